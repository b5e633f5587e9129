"""TableState: what may commit, exhaustively and as properties (no I/O, no JVM)."""

from __future__ import annotations

import gc
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commit_service.domain.plan import CommitPolicy, OnTimeout, PendingFile
from commit_service.domain.state import TableState
from lakegate_core.protocol import CsvLayout, DataFile, FileFormat, FileStatus
from lakegate_core.status import ManifestState
from lakegate_core.types import TopicPartition
from tests.unit.fakes import pf


def test_contiguous_run_commits_and_a_gap_waits() -> None:
    s = TableState("t")
    assert s.offer(pf(0, 9), 0)[0] is FileStatus.ACCEPTED
    assert s.offer(pf(20, 29), 0)[0] is FileStatus.ACCEPTED  # gap 10..19: waits
    plan = s.plan(now=100)
    assert plan is not None and [p.file.start_offset for p in plan.files] == [0]
    assert plan.offsets == {("orders", 0): 10}
    s.committed_plan(plan, version=0, now=100)
    assert s.plan(now=1000) is None  # 20..29 still waits for 10..19
    assert s.offer(pf(10, 19), 1000)[0] is FileStatus.ACCEPTED
    plan = s.plan(now=2000)
    assert plan is not None and [p.file.start_offset for p in plan.files] == [10, 20]
    s.committed_plan(plan, version=1, now=2000)
    assert s.committed == {("orders", 0): 30} and s.buffer.count == 0


def test_duplicates_overlaps_and_committed_ranges() -> None:
    s = TableState("t", committed={("orders", 0): 10})
    assert s.offer(pf(0, 9), 0)[0] is FileStatus.ALREADY_COMMITTED
    status, reason = s.offer(pf(5, 14), 0)
    assert status is FileStatus.REJECTED and "committed range below 10" in (reason or "")
    assert s.offer(pf(10, 19), 0)[0] is FileStatus.ACCEPTED
    assert s.offer(pf(10, 19), 0)[0] is FileStatus.DUPLICATE
    status, reason = s.offer(pf(10, 24), 0)  # same start, other end: not an exact duplicate
    assert status is FileStatus.REJECTED and "overlap buffered file" in (reason or "")
    assert s.offer(pf(15, 30, path="s3a://landing/other"), 0)[0] is FileStatus.REJECTED
    assert s.buffer.count == 1


def test_triggers() -> None:
    policy = CommitPolicy(interval_seconds=10, max_files=3, max_bytes=1000)
    s = TableState("t", policy=policy, now=0)
    s.offer(pf(0, 0), 0)
    assert s.plan(now=5) is None  # nothing fired yet
    assert s.plan(now=5, force=True).reason == "forced"  # type: ignore[union-attr]
    assert s.plan(now=10).reason == "interval"  # type: ignore[union-attr]
    s.offer(pf(1, 1), 1)
    s.offer(pf(2, 2), 1)
    assert s.plan(now=1).reason == "max_files"  # type: ignore[union-attr]
    big = TableState("t", policy=policy)
    big.offer(pf(0, 0, size=5000), 0)
    assert big.plan(now=0).reason == "max_bytes"  # type: ignore[union-attr]


def test_no_trigger_means_no_walk_of_the_buffer() -> None:
    """The loop plans every pass; until a trigger can fire, the buffer is not walked (the plan
    comes from the running totals), and the first pass a trigger can fire walks it again."""

    class Counting(TableState):
        walks = 0

        def contiguous(self, limits=None):  # type: ignore[no-untyped-def]
            self.walks += 1
            return super().contiguous(limits)

    s = Counting("t", policy=CommitPolicy(interval_seconds=10, max_files=3, max_bytes=1000), now=0)
    s.offer(pf(0, 0), 0)
    s.offer(pf(2, 2), 0)  # not contiguous: even two more files must not fire max_files alone
    assert s.plan(now=9.9) is None and s.walks == 0
    s.offer(pf(3, 3), 0)  # three buffered: max_files may fire, so the run is walked (and is 1 file)
    assert s.plan(now=9.9) is None and s.walks == 1
    assert s.plan(now=10).reason == "interval" and s.walks == 2  # type: ignore[union-attr]


def test_the_buffer_adds_nothing_the_garbage_collector_walks() -> None:
    """Buffered files (and their places in the indexes) are tuples of atoms: untracked by the
    collector once it has seen them, and read back whole."""
    s = TableState("t")
    files = [pf(i * 10, i * 10 + 9, partition=i % 3, manifest=f"m{i}") for i in range(30)]
    for f in files:
        s.offer(f, 5.0)
    gc.collect()
    gc.collect()
    held = [row for rows in s.buffer._rows.values() for row in rows.values()] + [
        p for ps in s.buffer._by_path.values() for p in ps
    ]
    assert len(held) == 60 and not any(gc.is_tracked(x) for x in held)
    assert not any(gc.is_tracked(ps) for ps in s.buffer._by_path.values())
    back = sorted(s.buffered(TopicPartition("orders", 1)), key=lambda p: p.file.start_offset)
    assert back == [replace(f, arrived_at=5.0) for f in files if f.file.partition == 1]


def test_vtts_when_every_expected_partition_reported() -> None:
    s = TableState("t", policy=CommitPolicy(interval_seconds=10, timeout_seconds=30), now=0)
    s.set_expected({("orders", 0), ("orders", 1)})
    s.offer(pf(0, 9), 1)
    assert s.note_watermark(("orders", 0), 10, 1)  # all Connect committed (10) is buffered
    assert not s.note_watermark(("orders", 1), 5, 1)  # 0..4 of partition 1 has not arrived
    assert s.plan(now=10) is None  # partition 1 has not reported: wait up to the timeout
    s.offer(pf(0, 4, partition=1), 11)
    assert s.note_watermark(("orders", 1), 5, 12)
    plan = s.plan(now=12)
    assert plan is not None and plan.vtts == 0
    s.committed_plan(plan, 0, now=12)
    s.offer(pf(10, 19), 13)
    assert s.plan(now=22) is None  # a new round: the old reports predate its cut-off (12)


def catching_up(catch_up: float = 3) -> TableState:
    """A table due at 10 (interval 10 from 0) that catches up for ``catch_up`` s, partitions 0 and 1
    expected, 0..9 of each buffered and every Connect offset reported at 1."""
    s = TableState("t", policy=CommitPolicy(interval_seconds=10, timeout_seconds=30, catch_up_seconds=catch_up))
    s.set_expected({("orders", 0), ("orders", 1)})
    for p in (0, 1):
        s.offer(pf(0, 9, partition=p), 1)
        assert s.note_watermark(("orders", p), 10, 1)
    return s


def test_a_due_round_waits_for_what_kafka_held_when_it_came_due() -> None:
    s = catching_up()
    assert s.cadence.due_at() == 10
    s.note_watermark(("orders", 0), 10, 9.9, log_end=30)  # read before the round was due: not the cut-off
    assert s.cadence.catch_up == {}
    assert s.plan(now=10) is None, "no partition has said what its log held once the round was due"
    s.note_watermark(("orders", 0), 10, 10.1, log_end=20)
    s.note_watermark(("orders", 1), 10, 10.1, log_end=10)  # partition 1 holds all of it already
    s.note_watermark(("orders", 0), 10, 10.4, log_end=25)  # a later read: the first one counts
    assert s.cadence.catch_up == {("orders", 0): 20, ("orders", 1): 10}
    assert s.plan(now=11) is None and not s.caught_up(), "10..19 of partition 0 is not here yet"
    s.offer(pf(10, 19), 11.5)  # Connect's flush past the due time, sent by the sidecar
    plan = s.plan(now=11.6)
    assert plan is not None and plan.reason == "interval" and plan.offsets == {("orders", 0): 20, ("orders", 1): 10}
    assert plan.planned_at == 10, "the cadence counts from the due time, not the catch-up"
    assert plan.due == 10 and plan.caught_up == {("orders", 0): 20, ("orders", 1): 10}
    s.committed_plan(plan, 0, now=12)
    assert s.cadence.catch_up == {} and s.cadence.due_at() == 20, "the next round catches up with its own due time"


def test_a_round_catches_up_for_at_most_catch_up_seconds() -> None:
    s = catching_up(catch_up=3)
    s.note_watermark(("orders", 0), 10, 10.1, log_end=20)  # never reached; partition 1 never reads
    assert s.plan(now=12.9) is None
    plan = s.plan(now=14)
    assert plan is not None and plan.planned_at == 11, "late past the wait: the base moves by the lateness"
    assert plan.due == 10 and plan.caught_up is None, "the wait ran out"
    assert plan.offsets == {("orders", 0): 10, ("orders", 1): 10}


def test_without_catch_up_a_due_round_commits_what_is_buffered() -> None:
    s = catching_up(catch_up=0)
    plan = s.plan(now=10.5)
    assert plan is not None and plan.planned_at == 10.5 and plan.due is None and plan.caught_up is None
    for bad in (-1, 10, 11):
        with pytest.raises(ValueError, match="catch_up_seconds"):
            CommitPolicy(interval_seconds=10, catch_up_seconds=bad)


def test_size_triggers_and_forced_commits_do_not_catch_up() -> None:
    s = catching_up()
    assert s.plan(now=10.5, force=True) is not None
    small = TableState("t", policy=CommitPolicy(interval_seconds=10, max_files=2, catch_up_seconds=3))
    small.set_expected({("orders", 0)})
    small.offer(pf(0, 9), 1)
    small.offer(pf(10, 19), 1)
    plan = small.plan(now=2)
    assert plan is not None and plan.reason == "max_files"


def test_timeout_policies() -> None:
    for policy, expect_commit in ((OnTimeout.PARTIAL, True), (OnTimeout.WAIT, False)):
        s = TableState("t", policy=CommitPolicy(interval_seconds=10, timeout_seconds=30, on_timeout=policy))
        s.set_expected({("orders", 0), ("orders", 1)})
        s.offer(pf(0, 9), 1)
        plan = s.plan(now=31)
        assert (plan is not None) is expect_commit
        if plan:
            assert plan.vtts is None  # partial: no valid-through timestamp
        assert s.plan(now=31, force=True) is not None  # a forced commit always goes


def test_failed_commit_keeps_everything_pending() -> None:
    s = TableState("t")
    s.offer(pf(0, 9), 0)
    assert s.plan(now=0, force=True) is not None
    # the coordinator's Delta commit failed: it does not call committed_plan
    again = s.plan(now=0, force=True)
    assert again is not None and len(again.files) == 1 and s.committed == {}


def test_recovered_offsets_drop_buffered_files_another_writer_committed() -> None:
    s = TableState("t")
    s.offer(pf(0, 9), 0)
    s.offer(pf(10, 19), 0)
    s.recovered({("orders", 0): 10}, version=4)
    plan = s.plan(now=0, force=True)
    assert plan is not None and [p.file.start_offset for p in plan.files] == [10]
    assert s.version == 4


def test_manifest_status_follows_its_files() -> None:
    s = TableState("t", committed={("orders", 0): 10})
    verdicts = [s.offer(pf(10, 19, manifest="a"), 0), s.offer(pf(20, 29, manifest="a"), 0)]
    s.settle_manifest("a", verdicts)
    assert s.manifest("a") == (ManifestState.ACCEPTED, None, None)
    plan = s.plan(now=0, force=True)
    s.committed_plan(plan, version=7, now=0)  # type: ignore[arg-type]
    assert s.manifest("a") == (ManifestState.COMMITTED, 7, None)
    old = [s.offer(pf(0, 9, manifest="b"), 0)]
    s.settle_manifest("b", old)
    assert s.manifest("b") == (ManifestState.COMMITTED, 7, None)
    bad = [s.offer(pf(25, 34, manifest="c"), 0)]  # straddles the committed offset 30
    s.settle_manifest("c", bad)
    state, _, reason = s.manifest("c")  # type: ignore[misc]
    assert state is ManifestState.REJECTED and "overlap" in (reason or "")


def test_a_manifest_that_names_a_file_already_buffered_follows_that_file() -> None:
    """A sender that retries under a new manifest id (its answer was lost) gets DUPLICATE for a
    file the first manifest brought; the retry's status must still end, as the file's does."""
    s = TableState("t")
    s.settle_manifest("a", [s.offer(pf(0, 9, manifest="a"), 0), s.offer(pf(10, 19, manifest="a"), 0)])
    retry = [s.offer(pf(0, 9, manifest="b"), 0), s.offer(pf(10, 19, manifest="b"), 0)]
    assert [status for status, _ in retry] == [FileStatus.DUPLICATE] * 2
    s.settle_manifest("b", retry)
    assert s.manifest("b") == (ManifestState.ACCEPTED, None, None)
    plan = s.plan(now=0, force=True)
    s.committed_plan(plan, version=3, now=0)  # type: ignore[arg-type]
    assert s.manifest("a") == s.manifest("b") == (ManifestState.COMMITTED, 3, None)

    s.settle_manifest("c", [s.offer(pf(20, 29, manifest="c"), 0)])
    s.settle_manifest("d", [s.offer(pf(20, 29, manifest="d"), 0)])
    s.drop_file("s3a://landing/orders-0-20", "unreadable")
    assert s.manifest("c") == s.manifest("d") == (ManifestState.REJECTED, None, "unreadable")

    s.settle_manifest("e", [s.offer(pf(30, 39, manifest="e"), 0)])
    s.settle_manifest("f", [s.offer(pf(30, 39, manifest="f"), 0)])
    s.recovered({TopicPartition("orders", 0): 40}, version=9)  # another writer committed 30..39
    assert s.buffer.count == 0
    assert s.manifest("e") == s.manifest("f") == (ManifestState.COMMITTED, 9, None)
    assert s.manifests.followers() == {}


# -- properties ------------------------------------------------------------------------------


@st.composite
def partition_files(draw: st.DrawFn, partition: int) -> list[PendingFile]:
    """A partition's offsets 0..n-1 cut into files at random points."""
    n = draw(st.integers(1, 60))
    cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=8)) if n > 1 else set())
    bounds = [0, *cuts, n]
    return [
        pf(a, b - 1, partition=partition, manifest=f"m{partition}-{a}")
        for a, b in zip(bounds, bounds[1:], strict=False)
    ]


@st.composite
def scenario(draw: st.DrawFn) -> tuple[list[list[PendingFile]], list[tuple[str, int]]]:
    parts = [draw(partition_files(p)) for p in range(draw(st.integers(1, 3)))]
    every = [f for files in parts for f in files]
    # arrivals: every file at least once, some repeated, in any order, with commits in between
    arrivals = every + draw(st.lists(st.sampled_from(every), max_size=15))
    order = draw(st.permutations(arrivals))
    steps: list[tuple[str, int]] = []
    for i in range(len(order)):
        steps.append(("offer", i))
        if draw(st.booleans()):
            steps.append(("commit", 0) if draw(st.integers(0, 4)) else ("fail", 0))
    return [order], steps


@settings(max_examples=300, deadline=None)
@given(scenario())
def test_never_a_gap_never_twice_whatever_the_arrival_order(
    case: tuple[list[list[PendingFile]], list[tuple[str, int]]],
) -> None:
    [order], steps = case
    s = TableState("t")
    ledger: dict[tuple[str, int], list[int]] = {}
    version = -1

    def commit(apply: bool) -> None:
        nonlocal version
        plan = s.plan(now=0, force=True)
        if plan is None:
            return
        for tp, offset in plan.offsets.items():
            start = s.next_offset(tp)
            files = sorted((p for p in plan.files if p.tp == tp), key=lambda p: p.file.start_offset)
            assert files[0].file.start_offset == start, "a plan must start at the committed offset"
            for a, b in zip(files, files[1:], strict=False):
                assert a.file.next_offset == b.file.start_offset, "a plan must be contiguous"
            assert files[-1].file.next_offset == offset
        if apply:
            version += 1
            for p in plan.files:
                ledger.setdefault(p.tp, []).extend(range(p.file.start_offset, p.file.next_offset))
            s.committed_plan(plan, version, now=0)

    for kind, i in steps:
        if kind == "offer":
            status, _ = s.offer(order[i], now=0)
            assert status is not FileStatus.REJECTED, "an exact re-send is never rejected"
        else:
            commit(apply=(kind == "commit"))
    while s.plan(now=0, force=True) is not None:
        commit(apply=True)

    expected = {f.tp: f.file.next_offset for f in order}
    expected = {tp: max(f.file.next_offset for f in order if f.tp == tp) for tp in expected}
    assert s.committed == expected
    for tp, offsets in ledger.items():
        assert offsets == list(range(expected[tp])), f"{tp}: every offset once, in order"
    assert s.buffer.count == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 15)), min_size=1, max_size=25))
def test_random_ranges_never_overlap_once_buffered(ranges: list[tuple[int, int]]) -> None:
    s = TableState("t")
    for start, length in ranges:
        s.offer(pf(start, start + length, path=f"p{start}-{length}"), now=0)
    spans = sorted((p.file.start_offset, p.file.end_offset) for p in s.buffered(TopicPartition("orders", 0)))
    for (_, a1), (b0, _) in zip(spans, spans[1:], strict=False):
        assert a1 < b0, f"buffered ranges overlap: {spans}"


def test_dropping_a_bad_file_stalls_only_its_partition() -> None:
    s = TableState("t")
    verdicts = [s.offer(pf(0, 9, manifest="bad"), 0)]
    s.settle_manifest("bad", verdicts)
    s.offer(pf(0, 9, partition=1, manifest="good"), 0)
    dropped = s.drop_file("s3a://landing/orders-0-0", "gone")
    assert dropped is not None and s.manifest("bad") == (ManifestState.REJECTED, None, "gone")
    plan = s.plan(now=0, force=True)
    assert plan is not None and plan.offsets == {("orders", 1): 10}
    assert s.offer(pf(0, 9), 0)[0] is FileStatus.ACCEPTED  # a correct re-send is taken again


def test_limits_hold_back_what_connect_has_not_committed() -> None:
    s = TableState("t")
    s.offer(pf(0, 9), 0)
    s.offer(pf(10, 19), 0)
    s.offer(pf(0, 4, partition=1), 0)
    plan = s.plan(now=0, force=True, limits={("orders", 0): 15})
    assert plan is not None and plan.offsets == {("orders", 0): 10}  # 10..19 passes Connect's 15
    assert s.plan(now=0, force=True, limits={("orders", 1): 5}).offsets == {("orders", 1): 5}  # type: ignore[union-attr]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("offer"), st.integers(0, 60), st.integers(0, 12)),
            st.tuples(st.just("drop"), st.integers(0, 60), st.just(0)),
            st.tuples(st.just("commit"), st.just(0), st.just(0)),
        ),
        max_size=40,
    )
)
def test_the_sorted_index_agrees_with_a_scan_of_the_buffer(ops: list[tuple[str, int, int]]) -> None:
    """``offer`` finds overlaps by bisecting a sorted index; whatever happens to the buffer, its
    verdicts equal a scan of every buffered file, and the index, path map and byte count stay true."""
    s = TableState("t")
    for op, start, length in ops:
        if op == "offer":
            f = pf(start, start + length)
            base = s.next_offset(f.tp)
            scanned = [
                o
                for o in s.buffered(f.tp)
                if o.file.start_offset <= f.file.end_offset and f.file.start_offset <= o.file.end_offset
            ]
            status, _ = s.offer(f, 0)
            if f.file.start_offset >= base and f.file.end_offset >= base:
                expect_in = (
                    not scanned
                    or scanned == [f]
                    or any(o.file.path == f.file.path and o.file.end_offset == f.file.end_offset for o in scanned)
                )
                assert (status in (FileStatus.ACCEPTED, FileStatus.DUPLICATE)) == expect_in
        elif op == "drop":
            s.drop_file(f"s3a://landing/orders-0-{start}", "test")
        else:
            plan = s.plan(now=0, force=True)
            if plan is not None:
                s.committed_plan(plan, version=0, now=0)
        files = {p.file.start_offset: p for p in s.buffered(TopicPartition("orders", 0))}
        assert s.buffer._starts.get(TopicPartition("orders", 0), []) == sorted(files)
        assert sorted(s.buffer._by_path) == sorted(p.file.path for p in files.values())
        assert s.buffer.size == sum(p.file.size_bytes for p in files.values())
        assert s.buffer.count == len(files)


def test_a_buffered_csv_file_keeps_its_layout() -> None:
    f = DataFile("s3a://b/t-0-0", "t", 0, 0, 9, 100, FileFormat.CSV, csv=CsvLayout(("key", "value"), "none"))
    p = PendingFile(f, "m", "sc", 1.5)
    assert PendingFile.from_row(p.row()) == p
    state = TableState("t")
    state.offer(p, now=0)
    plan = state.plan(now=0, force=True)
    assert plan is not None and plan.files[0].file.csv == CsvLayout(("key", "value"), "none")
