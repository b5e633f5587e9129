"""ManagedProcess: readiness, failure with the log's tail, and teardown of the whole group."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from lakegate_stack.errors import ServiceStartError
from lakegate_stack.process import ManagedProcess, free_port, port_open


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ready_then_stop_kills_children_too(tmp_path: Path) -> None:
    port = free_port()
    child_pid_file = tmp_path / "child.pid"
    script = (
        "import socket, subprocess, sys, time\n"
        f"c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(child_pid_file)!r}, 'w').write(str(c.pid))\n"
        f"s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen()\n"
        "print('listening', flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = ManagedProcess("toy", [sys.executable, "-c", script], tmp_path / "toy.log").start()
    proc.wait_ready(lambda: port_open("127.0.0.1", port), timeout=20)
    grandchild = int(child_pid_file.read_text())
    assert _alive(grandchild)
    proc.stop(timeout=5)
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(grandchild), "the process group was not stopped"
    assert "listening" in (tmp_path / "toy.log").read_text()


def test_early_exit_raises_with_log_tail(tmp_path: Path) -> None:
    cmd = [sys.executable, "-c", "print('bad config: port is taken'); raise SystemExit(3)"]
    proc = ManagedProcess("broken", cmd, tmp_path / "broken.log").start()
    with pytest.raises(ServiceStartError, match="bad config: port is taken"):
        proc.wait_ready(lambda: False, timeout=20)


def test_readiness_timeout_raises(tmp_path: Path) -> None:
    proc = ManagedProcess("slow", [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "slow.log").start()
    try:
        with pytest.raises(ServiceStartError, match="not ready within"):
            proc.wait_ready(lambda: False, timeout=1)
    finally:
        proc.stop(timeout=5)
    assert not proc.running()


def test_a_kafka_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-storage reads ``-t -xyz`` as an option: such an id is drawn again (seen failing the demo)."""
    import uuid

    from lakegate_stack import kafka

    draws = iter([uuid.UUID(bytes=b"\xf8" + b"\x01" * 15), uuid.UUID(bytes=b"\x10" * 16)])
    monkeypatch.setattr(kafka.uuid, "uuid4", lambda: next(draws))
    cluster_id = kafka.random_cluster_id()
    assert cluster_id == "EBAQEBAQEBAQEBAQEBAQEA" and len(cluster_id) == 22
