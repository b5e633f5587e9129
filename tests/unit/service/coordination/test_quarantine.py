"""No file can wedge a table: backoff, plan narrowing and quarantine (commit_service.domain.failures),
driven through a TableCoordinator over a fake committer and a fake clock."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commit_service.config import TableConfig
from commit_service.coordination.table_coordinator import TableCoordinator
from commit_service.domain.failures import FailureTracker
from commit_service.domain.plan import CommitPlan, CommitPolicy, PendingFile
from commit_service.errors import (
    CommitError,
    ConflictError,
    ContentRangeError,
    DataFileError,
    DataFileUnavailableError,
    OffsetsMovedError,
    TableUnavailableError,
    TableWriteError,
    UnexpectedCommitError,
)
from lakegate_core.protocol import DataFile, FileFormat, FileStatus, OffsetSpan
from lakegate_core.status import CommitRecord, DeadLetterState
from lakegate_core.types import PartitionOffsets, TopicPartition
from tests.unit.fakes import Clock, MemoryStore, PoisonCommitter

POLICY = CommitPolicy(interval_seconds=1, max_attempts=3, quarantine_after_seconds=60)


def pf(partition: int, start: int, size: int = 10) -> PendingFile:
    path = f"s3a://landing/orders-{partition}-{start}"
    return PendingFile(DataFile(path, "orders", partition, start, start + size - 1, 100, FileFormat.PARQUET), "m", "sc")


def table(committer: PoisonCommitter, clock: Clock, store: MemoryStore | None = None) -> TableCoordinator:
    config = TableConfig("orders", "s3a://lake/orders", ("orders",), commit=POLICY)
    tc = TableCoordinator(config, committer, clock, dead_letter_store=store)
    tc.load()
    return tc


def run(tc: TableCoordinator, clock: Clock, rounds: int) -> int:
    """Forced rounds, each after the backoff has passed; returns how many failed."""
    failures = 0
    for _ in range(rounds):
        clock.now = max(clock.now, tc._failures.not_before) + 0.01
        try:
            if tc.maybe_commit(force=True) is None:
                break
        except CommitError:
            failures += 1
    return failures


def test_backoff_doubles_to_a_cap_and_concurrent_writers_retry_at_once() -> None:
    tracker = FailureTracker(CommitPolicy(max_attempts=100))
    delays = [tracker.failed(TableUnavailableError("down"), None, 0).delay for _ in range(9)]
    assert delays == [0.5, 1, 2, 4, 8, 16, 30, 30, 30]
    assert tracker.failed(OffsetsMovedError("moved", 1, PartitionOffsets()), None, 0).delay == 0
    tracker.succeeded(CommitPlan.of([pf(0, 0)], None, "forced"))
    assert tracker.failed(TableUnavailableError("down"), None, 0).delay == 0.5


def test_a_refusal_that_passes_narrows_plans_only_briefly() -> None:
    tracker = FailureTracker(POLICY)
    plan = CommitPlan.of([pf(p, 0) for p in range(16)], None, "forced")
    for _ in range(POLICY.max_attempts):
        tracker.failed(TableWriteError("refused once"), plan, 0)
    assert len(tracker.cap(plan).files) == 8
    tracker.succeeded(tracker.cap(plan))
    assert len(tracker.cap(plan).files) == 16  # doubled
    tracker.succeeded(CommitPlan.of([pf(0, 0)], None, "forced"))  # a plan the cap did not cut
    assert tracker.plan_cap is None


def test_an_outage_never_condemns_a_file() -> None:
    plan = CommitPlan.of([pf(0, 0)], None, "forced")
    tracker = FailureTracker(POLICY)
    for error in (TableUnavailableError("s3 down"), OffsetsMovedError("moved", 1, PartitionOffsets())):
        assert all(tracker.failed(error, plan, t).quarantine is None for t in range(0, 10_000, 100))


def test_an_unreadable_file_is_quarantined_only_when_it_lasts() -> None:
    plan = CommitPlan.of([pf(0, 0)], None, "forced")
    tracker = FailureTracker(POLICY)
    err = DataFileUnavailableError(plan.files[0].file.path, "connection reset")
    assert [tracker.failed(err, plan, t).quarantine for t in (0, 1, 2, 3)] == [None] * 4  # many tries, too soon
    assert tracker.failed(err, plan, 61).quarantine == plan.files[0].file.path


def test_a_bad_file_is_quarantined_at_once_and_the_rest_commits() -> None:
    clock, store = Clock(), MemoryStore()
    committer = PoisonCommitter({pf(0, 10).file.path}, DataFileError)
    tc = table(committer, clock, store)
    tc.offer([pf(0, 0), pf(0, 10), pf(0, 20), pf(1, 0)], "m")
    assert run(tc, clock, 10) == 1
    assert committer.committed == {("orders", 0): 10, ("orders", 1): 10}  # partition 0 waits at the gap
    (letter,) = store.letters.values()
    assert letter.file.path == pf(0, 10).file.path and letter.code == "bad_data_file" and letter.attempts == 1
    assert tc.summary().dead_letters == 1 and tc.summary().pending_files == 1


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(1, 6)), min_size=1, max_size=12, unique=True),
    st.data(),
)
def test_poisoned_plans_are_narrowed_until_only_the_culprits_are_quarantined(
    layout: list[tuple[int, int]], data: st.DataObject
) -> None:
    """Files per partition, some poisoning any plan they are in (Delta refuses it): in a bounded
    number of rounds every good file before a culprit commits, exactly the culprits are
    quarantined, and nothing after a culprit commits (a gap is never skipped)."""
    files = sorted({pf(p, 10 * i) for p, n in layout for i in range(n)}, key=lambda f: (f.tp, f.file.start_offset))
    poison = set(data.draw(st.sets(st.sampled_from([f.file.path for f in files]), max_size=3)))
    clock, store = Clock(), MemoryStore()
    committer = PoisonCommitter(poison)
    tc = table(committer, clock, store)
    tc.offer(files, "m")
    run(tc, clock, 400)
    first_bad: dict[TopicPartition, int] = {}
    for f in files:
        if f.file.path in poison:
            first_bad.setdefault(f.tp, f.file.start_offset)
    expected_committed = {f.file.path for f in files if f.file.start_offset < first_bad.get(f.tp, 1 << 62)}
    assert set(committer.files) == expected_committed
    quarantined = {d.file.path for d in store.letters.values()}
    assert quarantined == {f.file.path for f in files if f.file.start_offset == first_bad.get(f.tp)}
    assert quarantined <= poison


def test_unexpected_errors_back_off_and_log_their_trace_once(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    committer = PoisonCommitter()

    def boom(plan: CommitPlan) -> CommitRecord:
        raise KeyError("surprise")

    committer.commit = boom  # type: ignore[method-assign]
    tc = table(committer, clock)
    tc.offer([pf(0, 0), pf(0, 10)], "m")
    for _ in range(3):
        with pytest.raises(UnexpectedCommitError):
            tc.maybe_commit(force=True)
    assert tc.maybe_commit() is None  # inside the backoff: no attempt
    assert sum(1 for r in caplog.records if r.exc_info) == 1


def test_retry_and_release_of_a_dead_letter() -> None:
    clock, store = Clock(), MemoryStore()
    bad = pf(0, 10)
    committer = PoisonCommitter({bad.file.path}, DataFileError)
    tc = table(committer, clock, store)
    tc.offer([pf(0, 0), bad, pf(0, 20)], "m")
    run(tc, clock, 5)
    (letter,) = tc.dead_letters()
    committer.poison.clear()  # the admin fixed the object
    assert tc.retry_dead_letter(letter.id).state is DeadLetterState.RETRIED
    with pytest.raises(ConflictError, match="already retried"):
        tc.retry_dead_letter(letter.id)
    run(tc, clock, 5)
    assert committer.committed[("orders", 0)] == 30

    committer.poison.add(pf(0, 30).file.path)
    tc.offer([pf(0, 30), pf(0, 40)], "m2")
    run(tc, clock, 5)
    (second,) = [d for d in tc.dead_letters() if d.state is DeadLetterState.QUARANTINED]
    record = tc.release_dead_letter(second.id)
    assert record.released == (second.id,) and record.files == 0
    assert committer.committed[("orders", 0)] == 40  # past the released range; 40.. follows
    run(tc, clock, 5)
    assert committer.committed[("orders", 0)] == 50
    assert store.letters[second.id].state is DeadLetterState.RELEASED
    reloaded = table(committer, clock, store)  # dead letters outlive a restart
    assert {d.id: d.state for d in reloaded.dead_letters()} == {
        letter.id: DeadLetterState.RETRIED,
        second.id: DeadLetterState.RELEASED,
    }


def test_a_range_filled_by_a_resent_file_cannot_be_released() -> None:
    clock, store = Clock(), MemoryStore()
    bad = pf(0, 0)
    tc = table(PoisonCommitter({bad.file.path}, DataFileError), clock, store)
    tc.offer([bad], "m")
    run(tc, clock, 3)
    (letter,) = tc.dead_letters()
    fixed = PendingFile(DataFile("s3a://landing/again/orders-0-0", "orders", 0, 0, 9, 100), "m2", "sc")
    tc.offer([fixed], "m2")  # the sink wrote the range again
    run(tc, clock, 3)
    with pytest.raises(ConflictError, match="already past"):
        tc.release_dead_letter(letter.id)


@dataclass
class RangeCommitter(PoisonCommitter):
    """Like :class:`PoisonCommitter`, but a file in ``holds`` holds more offsets than claimed."""

    holds: dict[str, OffsetSpan] = field(default_factory=dict)

    def commit(self, plan: CommitPlan) -> CommitRecord:
        for p in plan.files:
            span = self.holds.get(p.file.path)
            if span is not None and span.last > p.file.end_offset:
                raise ContentRangeError(p.file.path, span, p.file.start_offset, p.file.end_offset)
        return super().commit(plan)


def test_a_too_short_claim_is_neither_quarantined_nor_backed_off() -> None:
    clock = Clock()
    committer = RangeCommitter(holds={"s3a://landing/orders-0-0": OffsetSpan(0, 19)})
    tc = TableCoordinator(TableConfig("orders", "s3a://landing/orders", ("orders",), commit=POLICY), committer, clock)
    tc.load()
    tc.offer([pf(0, 0), pf(0, 10), pf(0, 20)], "m")  # 0..9 really holds 0..19; 10..19 is an orphan
    with pytest.raises(ContentRangeError):
        tc.maybe_commit(force=True)
    assert tc.dead_letters() == [] and tc._failures.not_before == 0.0
    assert tc.holds(pf(0, 0).file) == OffsetSpan(0, 19)
    claim = PendingFile(DataFile("s3a://landing/orders-0-0", "orders", 0, 0, 19, 100), "m2", "sc")
    assert [s for s, _ in tc.offer([claim, pf(0, 10)], "m2")] == [FileStatus.ACCEPTED, FileStatus.REJECTED]
    record = tc.maybe_commit(force=True)
    assert record is not None and committer.committed == {TopicPartition("orders", 0): 30}
    assert committer.files == ["s3a://landing/orders-0-0", "s3a://landing/orders-0-20"]


def test_what_a_table_holds_runs_from_its_committed_offset_and_shrinks_when_a_file_is_dropped() -> None:
    """``held_next`` and ``held_after``, told to the sidecar with its lease: a file below the one
    or inside the other is not sent again."""
    clock = Clock()
    committer = RangeCommitter(holds={"s3a://landing/orders-0-10": OffsetSpan(10, 29)})
    tc = table(committer, clock)
    tp = TopicPartition("orders", 0)
    assert tc.held(tp) == (0, ())  # a new (or restarted) service holds nothing
    tc.offer([pf(0, 0), pf(0, 20)], "m")
    assert tc.held(tp) == (10, (OffsetSpan(20, 29),)), "a gap ends the run; the file after it is held past the gap"
    tc.offer([pf(0, 10)], "m2")
    assert tc.held(tp) == (30, ())
    with pytest.raises(ContentRangeError):  # 10..19 holds 10..29: it and the orphan 20..29 are dropped
        tc.maybe_commit(force=True)
    assert tc.held(tp) == (10, ()), "a dropped file is no longer held: it may be sent again"
    tc.offer([PendingFile(DataFile("s3a://landing/orders-0-10", "orders", 0, 10, 29, 100), "m3", "sc")], "m3")
    assert tc.maybe_commit(force=True) is not None and tc.held(tp) == (30, ())
