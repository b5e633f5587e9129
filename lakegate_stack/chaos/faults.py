"""The fault kinds of the chaos run, one function each, in the registry :data:`FAULTS`.

A fault is called by :meth:`~lakegate_stack.chaos.run.ChaosRun.run` when the producer reached its
gate, with the run and ``go`` (opens the gate: the producer may go on). It injects the fault,
calls ``go`` when new records are needed for the fault's outcome, waits for that outcome within a
bounded deadline (:func:`~lakegate_stack.chaos.settings.wait_until`), recovers, and says what it
did in ``record.detail``."""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import requests

from lakegate_stack.chaos.report import FaultRecord
from lakegate_stack.chaos.rogue import RogueClient
from lakegate_stack.chaos.settings import ALL_FAULT_KINDS, ChaosError, claimed, signal_process, wait_until
from lakegate_stack.connect import ConnectWorker

if TYPE_CHECKING:
    from lakegate_stack.chaos.run import ChaosRun

logger = logging.getLogger(__name__)


Fault = Callable[["ChaosRun", FaultRecord, Callable[[], None]], None]


def restart_service(run: ChaosRun, record: FaultRecord, died_at: float) -> None:
    assert run.service is not None
    run.service.process.kill()  # reaps what is left; a no-op when the group is already gone
    run.service.start(timeout=300)
    record.recovery_s = round(time.monotonic() - died_at, 1)


def service_kill(run: ChaosRun, record: FaultRecord, go: Callable[[], None]) -> None:
    assert run.service is not None
    go()
    killed = time.monotonic()
    run.service.kill()
    restart_service(run, record, killed)
    record.detail = f"ready {record.recovery_s}s after SIGKILL"


def crash_point(run: ChaosRun, record: FaultRecord, go: Callable[[], None], point: str) -> None:
    assert run.service is not None
    (run.service_faults / point).touch()
    go()  # commits need new data
    service = run.service
    wait_until(f"a commit reaching {point}", lambda: not service.process.running(), 300, poll=0.1)
    died = time.monotonic()
    restart_service(run, record, died)
    record.detail = f"died at {point}, ready {record.recovery_s}s later"


def service_kill_before_commit(run: ChaosRun, record: FaultRecord, go: Callable[[], None]) -> None:
    crash_point(run, record, go, "commit.before")


def service_kill_after_commit(run: ChaosRun, record: FaultRecord, go: Callable[[], None]) -> None:
    crash_point(run, record, go, "commit.after")


def sidecar_kill(run: ChaosRun, record: FaultRecord, go: Callable[[], None]) -> None:
    i = run.rng.randrange(len(run.sidecars))
    run.sidecars[i].kill()
    go()
    run.sidecars[i].start()
    record.detail = f"sidecar {i + 1} SIGKILLed and restarted"


def all_tasks_running_elsewhere(run: ChaosRun, worker: ConnectWorker) -> bool:
    live = next(w for w in run.workers if w is not worker and w.process and w.process.running())
    for name in run.all_connectors():
        tasks = live.client().status(name)["tasks"]
        if len(tasks) != 3 or any(t["state"] != "RUNNING" or t["worker_id"] == worker.worker_id for t in tasks):
            return False
    return True


def sidecar_zombie(run: ChaosRun, record: FaultRecord, go: Callable[[], None]) -> None:
    i = run.rng.randrange(len(run.workers))
    worker, sidecar = run.workers[i], run.sidecars[i]
    pid = sidecar.process.pid
    assert pid is not None
    signal_process(pid, signal.SIGSTOP)
    worker.stop()  # its partitions move while its sidecar is frozen mid-round
    go()
    moved = wait_until("the frozen sidecar's tasks to move", lambda: all_tasks_running_elsewhere(run, worker), 180)
    signal_process(pid, signal.SIGCONT)  # the zombie wakes up with a stale view and sends it
    worker.start()
    record.detail = f"sidecar {i + 1} frozen; its worker's tasks moved in {moved:.0f}s; thawed"


def worker_down(run: ChaosRun, record: FaultRecord, go: Callable[[], None], *, kill: bool) -> None:
    """Stop (or SIGKILL) a worker, wait for its tasks to move, start it again: a random worker, or
    in a ``--peer`` run the one whose task runs the peer's commit coordinator."""
    drawn = run.rng.randrange(len(run.workers))  # drawn in every run: the seed's plan stays the same
    coordinator = peer_coordinator_worker(run) if run.peer_connector else None
    i = drawn if coordinator is None else coordinator
    worker = run.workers[i]
    if kill:
        assert worker.process is not None
        worker.process.kill()
    else:
        worker.stop()
    go()
    how = "SIGKILLed" if kill else "stopped"
    check = lambda: all_tasks_running_elsewhere(run, worker)  # noqa: E731
    moved = wait_until(f"the {how} worker's tasks to move", check, 240 if kill else 180)
    worker.start()
    holds = ", the peer's coordinator's" if coordinator is not None else ""
    record.detail = f"worker {i + 1}{holds} {how} (tasks moved in {moved:.0f}s) and started again"


def worker_stop_start(run: ChaosRun, record: FaultRecord, go: Callable[[], None]) -> None:
    worker_down(run, record, go, kill=False)


def worker_kill(run: ChaosRun, record: FaultRecord, go: Callable[[], None]) -> None:
    worker_down(run, record, go, kill=True)


def task_restart(run: ChaosRun, record: FaultRecord, go: Callable[[], None]) -> None:
    """Restart one sink task through the REST API; in a ``--peer`` run, the peer's task of the same
    number too."""
    names = [run.rng.choice(sorted(run.connectors))]
    task = run.rng.randrange(3)
    if run.peer_connector:
        names.append(run.peer_connector)
    live = next(w for w in run.workers if w.process and w.process.running())
    for name in names:
        response = requests.post(f"{live.url}/connectors/{name}/tasks/{task}/restart", timeout=60)
        if response.status_code not in (200, 202, 204):
            raise ChaosError(f"task restart of {name}/{task}: {response.status_code} {response.text}")
    go()
    for name in names:
        wait_until(
            f"{name} task {task} RUNNING again",
            lambda name=name: live.client().status(name)["tasks"][task]["state"] == "RUNNING",  # type: ignore[misc]
            120,
        )
    record.detail = f"task {task} of {', '.join(names)} restarted through the REST API"


def sink_rewrite(run: ChaosRun, record: FaultRecord, go: Callable[[], None]) -> None:
    before = len(claimed(run))
    (run.fault_dir / "crash-after-upload").touch()
    go()
    wait_until("a sink task to take the crash-after-upload fault", lambda: len(claimed(run)) > before, 180)
    record.detail = "split and failed: " + "; ".join(claimed(run)[before:])


def rogue_manifests(run: ChaosRun, record: FaultRecord, go: Callable[[], None]) -> None:
    go()
    record.detail = RogueClient(run).attack(run.rng)


def service_unreachable(run: ChaosRun, record: FaultRecord, go: Callable[[], None]) -> None:
    assert run.service_proxy is not None
    run.service_proxy.cut()
    go()
    time.sleep(run.settings.outage_seconds)  # the fault's length, not a wait for progress
    run.service_proxy.restore()
    record.detail = f"sidecars cut off from the service for {run.settings.outage_seconds:.0f}s"


def slow_s3(run: ChaosRun, record: FaultRecord, go: Callable[[], None]) -> None:
    assert run.s3_proxy is not None
    run.s3_proxy.slow(run.settings.slow_s3_delay)
    go()
    time.sleep(run.settings.slow_s3_seconds)
    run.s3_proxy.slow(0)
    record.detail = f"S3 responses delayed {run.settings.slow_s3_delay}s for {run.settings.slow_s3_seconds:.0f}s"


def catalog_unreachable(run: ChaosRun, record: FaultRecord, go: Callable[[], None]) -> None:
    """Nobody reaches the Iceberg REST catalog (the service, the peer) for the outage's length."""
    assert run.catalog_proxy is not None
    run.catalog_proxy.cut()
    go()
    time.sleep(run.settings.catalog_outage_seconds)  # the fault's length, not a wait for progress
    run.catalog_proxy.restore()
    record.detail = f"the Iceberg REST catalog cut off for {run.settings.catalog_outage_seconds:.0f}s"


def peer_coordinator_worker(run: ChaosRun) -> int | None:
    """The index of the worker running the peer's commit coordinator, from what the sink logs in
    each worker's log (``Task <connector>-<n> elected leader`` when its coordinator starts, ``...
    Stopping coordinator`` / ``Closing coordinator`` when it stops): the worker of the newest start
    with no stop after it. None while no coordinator runs (a rebalance in progress)."""
    assert run.peer_connector is not None
    events: list[tuple[str, int, bool]] = []  # (log timestamp, worker, started)
    for i, worker in enumerate(run.workers):
        log = worker.workdir / f"{worker.name}.log"
        if log.exists():
            events.extend((stamp, i, started) for stamp, started in coordinator_events(log, run.peer_connector))
    latest: dict[int, bool] = {}
    newest_start: tuple[str, int] | None = None
    for stamp, i, started in sorted(events):
        latest[i] = started
        if started:
            newest_start = (stamp, i)
    if newest_start is None or not latest[newest_start[1]]:
        return None
    return newest_start[1]


def coordinator_events(log: Path, connector: str) -> list[tuple[str, bool]]:
    """``(timestamp, started)`` of each start and stop of the Iceberg sink's coordinator in one
    worker's log (lines ``[yyyy-mm-dd hh:mm:ss,mmm] INFO ...``)."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if f" {connector}-" not in line or not line.startswith("["):
            continue
        if "elected leader, starting commit coordinator" in line:
            out.append((line[1:24], True))
        elif "Stopping coordinator" in line or "Closing coordinator" in line:
            out.append((line[1:24], False))
    return out


FAULTS: dict[str, Fault] = {
    "service_kill": service_kill,
    "service_kill_before_commit": service_kill_before_commit,
    "service_kill_after_commit": service_kill_after_commit,
    "sidecar_kill": sidecar_kill,
    "sidecar_zombie": sidecar_zombie,
    "worker_stop_start": worker_stop_start,
    "worker_kill": worker_kill,
    "task_restart": task_restart,
    "sink_rewrite": sink_rewrite,
    "rogue_manifests": rogue_manifests,
    "service_unreachable": service_unreachable,
    "slow_s3": slow_s3,
    "catalog_unreachable": catalog_unreachable,
}
if set(FAULTS) != set(ALL_FAULT_KINDS):  # the settings validate kinds against ALL_FAULT_KINDS
    raise ImportError(f"FAULTS and ALL_FAULT_KINDS differ: {sorted(set(FAULTS) ^ set(ALL_FAULT_KINDS))}")
