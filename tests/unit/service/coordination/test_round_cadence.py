"""When commit rounds fire: the interval counts from each round's plan, and the coordinator's loop
sleeps until the next round is due, or until intake brings what a due round waits for."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from commit_service.config import ServiceConfig
from commit_service.coordination.coordinator import MIN_GAP_SECONDS, TICK_SECONDS, Coordinator, pass_gap
from commit_service.domain.plan import CommitPlan, CommitPolicy
from commit_service.domain.state import TableState
from lakegate_core.configfile import build
from lakegate_core.protocol import DataFile, FileFormat, LeaseRequest, Manifest, SidecarInfo, Watermark
from lakegate_core.status import CommitRecord
from lakegate_core.types import TopicPartition
from tests.unit.fakes import Clock, FakeCommitter, PoisonCommitter, pf

TP0 = TopicPartition("orders", 0)
SIDECAR = SidecarInfo("sc-1", "w:1")


def test_the_interval_counts_from_the_plan_not_from_the_end_of_the_commit() -> None:
    s = TableState("t", policy=CommitPolicy(interval_seconds=10), now=0)
    s.offer(pf(0, 9), 1)
    plan = s.plan(now=10)
    assert plan is not None and plan.planned_at == 10
    s.committed_plan(plan, version=0, now=14)  # a commit of 4 s
    s.offer(pf(10, 19), 15)
    assert s.plan(now=19.9) is None
    assert s.next_round_at() == 20  # not 24: rounds keep a 10 s cadence however long a commit takes
    assert s.plan(now=20) is not None


def test_a_narrowed_plan_keeps_its_time() -> None:
    s = TableState("t", policy=CommitPolicy(interval_seconds=10), now=0)
    s.offer(pf(0, 9), 1)
    s.offer(pf(10, 19), 1)
    plan = s.plan(now=10)
    assert plan is not None and plan.head(1).planned_at == 10


def test_next_round_at() -> None:
    s = TableState("t", policy=CommitPolicy(interval_seconds=10, max_files=2), now=5)
    assert s.next_round_at() is None  # nothing buffered: nothing to wake for
    s.offer(pf(0, 9), 6)
    assert s.next_round_at() == 15
    s.offer(pf(10, 19), 7)
    assert s.next_round_at() == float("-inf")  # max_files fired: due now


@dataclass
class RecordingEvent:
    """Stands in for the loop's wake event: records how long the loop would sleep."""

    waits: list[float] = field(default_factory=list)
    flag: bool = False

    def wait(self, timeout: float) -> bool:
        self.waits.append(timeout)
        return self.flag

    def set(self) -> None:
        self.flag = True

    def clear(self) -> None:
        self.flag = False

    def is_set(self) -> bool:
        return self.flag


def coordinator(clock: Clock, interval: float) -> tuple[Coordinator, RecordingEvent]:
    config = build(
        ServiceConfig,
        {
            "auth": {"enabled": False},
            "storage": {"allowed_roots": ["s3a://landing/"]},
            "tables": [
                {
                    "name": "orders",
                    "path": "s3a://lake/orders",
                    "topics": ["orders"],
                    "placement": "copy_into_table",
                    "commit": {"interval_seconds": interval},
                }
            ],
        },
    )
    c = Coordinator(config, lambda t: PoisonCommitter(), clock=clock)
    c.load()
    wake = RecordingEvent()
    c._wake = wake  # type: ignore[assignment]
    return c, wake


def manifest(mid: str, start: int) -> Manifest:
    f = DataFile(f"s3a://landing/orders-0-{start}", "orders", 0, start, start + 9, 100, FileFormat.PARQUET)
    return Manifest(mid, SIDECAR, (f,))


def test_intake_wakes_the_loop_only_once_the_round_is_due() -> None:
    clock = Clock(1000.0)
    c, wake = coordinator(clock, interval=10)
    c.submit(manifest("m1", 0))
    assert not wake.is_set()  # 1000 + 10 is still ahead: the loop's own sleep ends then
    clock.now = 1010.0
    c.submit(manifest("m2", 10))
    assert wake.is_set()  # due: the new file may be what the round needs
    wake.clear()
    c.claim(LeaseRequest(SIDECAR, "snk", (0,), (TP0,), (Watermark("orders", 0, 20, 1_010_000),)))
    assert wake.is_set()  # a report can complete a due round, too


def test_the_loop_sleeps_until_the_next_round_is_due() -> None:
    clock = Clock(1000.0)
    c, wake = coordinator(clock, interval=10)
    c._pause()
    assert wake.waits[-1] == TICK_SECONDS  # nothing buffered: the longest sleep
    c.submit(manifest("m1", 0))
    clock.now = 1009.8
    c._pause()
    assert abs(wake.waits[-1] - 0.2) < 1e-9  # wakes when the interval ends, not at the next tick
    clock.now = 1010.0
    assert c.tick() is True
    assert c.offsets("orders") == {TP0: 10}
    assert c.tick() is False  # nothing left to commit
    assert c._pause() is False


def test_a_pass_that_commits_nothing_bounds_how_soon_the_next_one_runs() -> None:
    assert pass_gap(0.0) == MIN_GAP_SECONDS  # after a commit, or a cheap pass: at once
    assert abs(pass_gap(0.05) - 0.15) < 1e-9  # a 50 ms pass over a big buffer: 150 ms of rest
    assert pass_gap(10.0) == TICK_SECONDS  # never longer than the tick


class HeldCommitter(FakeCommitter):
    """A committer whose commits wait at a gate (a round that takes long: an archive's, a slow store's)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate, self.entered = threading.Event(), threading.Event()

    def commit(self, plan: CommitPlan) -> CommitRecord:
        self.entered.set()
        assert self.gate.wait(30), "the held round was never let go"
        return super().commit(plan)


def test_one_tables_long_round_does_not_hold_up_another_tables() -> None:
    """The background loop runs each table's pass on its own thread: a table whose round is held
    (minutes on a slow store) does not keep a second table's round from committing meanwhile."""
    tables = [
        {
            "name": n,
            "path": f"s3a://lake/{n}",
            "topics": [n],
            "placement": "copy_into_table",
            "commit": {"interval_seconds": 0.05},
        }
        for n in ("archive", "small")
    ]
    cfg = build(
        ServiceConfig, {"auth": {"enabled": False}, "storage": {"allowed_roots": ["s3a://landing/"]}, "tables": tables}
    )
    held, small = HeldCommitter(), FakeCommitter()
    c = Coordinator(cfg, lambda t: held if t.name == "archive" else small)
    c.load()
    c.start()
    try:
        for topic in ("archive", "small"):
            f = DataFile(f"s3a://landing/{topic}-0-0", topic, 0, 0, 9, 100, FileFormat.PARQUET)
            c.submit(Manifest(f"m-{topic}", SIDECAR, (f,)))
        assert held.entered.wait(10), "the archive's round never started"
        deadline = time.monotonic() + 10
        while not small.commits:
            assert time.monotonic() < deadline, "the small table waited behind the archive's round"
            time.sleep(0.02)
        assert not held.commits, "the archive's round is still held"
    finally:
        held.gate.set()
        c.stop()
    assert len(held.commits) == 1 and len(small.commits) == 1
