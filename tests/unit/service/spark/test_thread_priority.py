"""``thread_priority``: the nice value of a thread named by its JVM peer's ``/proc/thread-self``.

The JVM is faked at its seam (the symbolic link it reads); the priority is the kernel's own: each
case lowers a thread of this test process and reads the value back with ``getpriority``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from commit_service.spark.thread_priority import MAX_NICE, jvm_peer_thread_id, lower_jvm_peer

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/thread-self"), reason="Linux only")


class FakeLink:
    def __init__(self, text: str) -> None:
        self.text = text

    def getFileName(self) -> FakeLink:
        return FakeLink(self.text.rsplit("/", 1)[-1])

    def toString(self) -> str:
        return self.text


def fake_jvm(link: Callable[[], str]) -> Any:
    """A JVM whose thread reads ``/proc/thread-self`` as ``link()`` (what Files.readSymbolicLink
    returns there: ``<pid>/task/<tid>``)."""

    def read_symbolic_link(path: str) -> FakeLink:
        assert path == "/proc/thread-self"
        return FakeLink(link())

    classes = {
        "java.nio.file.Files": SimpleNamespace(readSymbolicLink=read_symbolic_link),
        "java.io.File": lambda name: SimpleNamespace(toPath=lambda: name),
    }
    return FakeJvm(classes)


class FakeJvm:
    """A py4j JVM view that knows ``classes`` by their whole names."""

    def __init__(self, classes: dict[str, Any]) -> None:
        self.classes = classes

    def __getattr__(self, name: str) -> Any:
        return self.classes[name]


def this_thread() -> str:
    return f"{os.getpid()}/task/{threading.get_native_id()}"


def in_new_thread(work: Callable[[], Any]) -> Any:
    """Run ``work`` on a thread of its own (a raised nice value cannot be lowered again)."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(work()))
    thread.start()
    thread.join(timeout=30)
    assert out, "the thread finished"
    return out[0]


def test_the_peer_thread_runs_lower_and_no_other_thread_does() -> None:
    jvm = fake_jvm(this_thread)
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    def lower() -> tuple[int | None, int, int]:
        tid = threading.get_native_id()
        before = os.getpriority(os.PRIO_PROCESS, tid)
        return lower_jvm_peer(jvm, 3), before, os.getpriority(os.PRIO_PROCESS, tid)

    nice, before, after = in_new_thread(lower)
    assert nice == after == min(MAX_NICE, before + 3)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine, "the caller's thread is untouched"


def test_the_nice_value_stops_at_19() -> None:
    jvm = fake_jvm(this_thread)
    assert in_new_thread(
        lambda: (lower_jvm_peer(jvm, 100), os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
    ) == (
        MAX_NICE,
        MAX_NICE,
    )


def test_no_proc_leaves_the_priority_alone() -> None:
    def no_proc() -> str:
        raise RuntimeError("java.nio.file.NoSuchFileException: /proc/thread-self")

    assert jvm_peer_thread_id(fake_jvm(no_proc)) is None
    assert lower_jvm_peer(fake_jvm(no_proc), 10) is None


def test_a_thread_that_is_gone_is_reported_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    gone = 2**31 - 2  # above any pid_max
    caplog.set_level("INFO", logger="commit_service.spark.thread_priority")
    assert lower_jvm_peer(fake_jvm(lambda: f"1/task/{gone}"), 10) is None
    assert f"could not lower the priority of JVM thread {gone}" in caplog.text
