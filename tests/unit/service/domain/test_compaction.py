"""Compaction planned with the rounds (pure): which small files merge, and when the table is read."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commit_service.domain.compaction import CompactionWatch, bins, plan_compaction
from commit_service.domain.maintenance import MaintenancePolicy

MB = 1024 * 1024
DAY_A, DAY_B = (("ts_day", "2026-11-27"),), (("ts_day", "2026-11-28"),)


def test_a_partition_over_its_allowance_merges_its_smallest_files_while_they_grow_the_merge() -> None:
    sizes = [50, 10, 700, 20, 60, 30, 40]  # seven small files where four are allowed
    plan = plan_compaction({DAY_A: sizes, DAY_B: [5, 6]}, 128 * MB, allowed=4)
    assert len(plan.groups) == 1
    group = plan.groups[0]
    # 10, 20 (<= 2 * 10), 30, 40, 50, 60; not 700 (> 2 * 210): it would grow by a third only
    assert group.partition == DAY_A and group.below_bytes == 61
    assert (group.files, group.bytes) == (6, 210)
    assert plan.files == 6
    # DAY_A is left with 2 files, DAY_B has 2: three more files before either can be due
    assert plan.slack == 3


def test_a_file_much_larger_than_the_others_is_not_rewritten_to_add_them() -> None:
    plan = plan_compaction({(): [10, 25, 26, 1000]}, 128 * MB, allowed=2)
    assert [(g.below_bytes, g.files) for g in plan.groups] == [(27, 3)], "1000 > 2 * 61: left alone"
    plan = plan_compaction({(): [10, 1000, 5000]}, 128 * MB, allowed=2)
    assert plan.groups == () and plan.slack == 1, "no file within twice the smaller ones: the next round's may"
    plan = plan_compaction({(): [10, 25, 26, 1000, 1001]}, 128 * MB, allowed=2)
    assert [(g.below_bytes, g.files) for g in plan.groups] == [(1002, 5)], "two of like size grow twofold"


def test_a_few_tiny_files_before_the_steady_ones_do_not_stall_the_merges() -> None:
    """A pipeline's first files (a warm-up's few records) are far smaller than its steady ones:
    the partition still gets back under its allowance at every merge."""
    files, allowed = [300, 310, 320], 128
    for _ in range(200):
        files += [40_000 + i for i in range(15)]  # a round's files, one per Kafka partition
        plan = plan_compaction({(): files}, 128 * MB, allowed)
        for g in plan.groups:
            chosen = [s for s in files if s < g.below_bytes]
            files = [s for s in files if s >= g.below_bytes] + [sum(chosen)]
        assert len(files) <= allowed, f"{len(files)} small files left"


def test_ties_merge_together_and_files_of_the_target_size_are_not_small() -> None:
    plan = plan_compaction({(): [7, 7, 7, 7, 7]}, 128 * MB, allowed=4)
    assert [(g.below_bytes, g.files) for g in plan.groups] == [(8, 5)], "files of one size merge as one"
    done = plan_compaction({(): [MB, MB, MB, 3, 4]}, MB, allowed=2)
    assert [(g.below_bytes, g.files) for g in done.groups] == [], "files of the target's size are not small"


def test_no_partition_over_its_allowance_plans_nothing_and_says_how_long_to_wait() -> None:
    plan = plan_compaction({DAY_A: [1, 2, 3], DAY_B: [1]}, 128 * MB, allowed=4)
    assert plan.groups == () and plan.slack == 2
    assert plan_compaction({}, 128 * MB, allowed=4).slack == 5, "an empty table: a new partition needs five"


def test_merging_the_smallest_first_rewrites_a_record_a_few_times_not_once_per_merge() -> None:
    """A stream of equal files into one partition: each byte is rewritten fewer than log2(its
    bytes / a file's) times, 12.6 here (merging the smallest down to a count: 59 times)."""
    size, target, allowed = 1_000, 10**9, 8
    files: list[int] = []
    written = added = 0
    for _ in range(2_000):
        files += [size] * 3  # a round's files
        added += 3 * size
        plan = plan_compaction({(): files}, target, allowed)
        for g in plan.groups:
            chosen = [s for s in files if s < g.below_bytes]
            files = [s for s in files if s >= g.below_bytes] + [sum(chosen)]
            written += sum(chosen)
        assert len(files) <= allowed
    assert written / added < math.log2(added / size), f"each byte rewritten {written / added:.1f} times"


def test_the_watch_reads_the_table_after_the_first_round_then_after_its_slack() -> None:
    watch = CompactionWatch()
    assert not watch.due(), "nothing committed yet"
    watch.committed(1)
    assert watch.due(), "the first round after a start reads the table once"
    watch.looked(slack=5)
    watch.committed(4)
    assert not watch.due()
    watch.committed(1)
    assert watch.due()


@pytest.mark.parametrize(
    "bad", [{"small_files_allowed": 1}, {"small_files_allowed": -1}, {"target_file_size_bytes": 10}]
)
def test_bad_compaction_keys_are_refused(bad: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="maintenance"):
        MaintenancePolicy(**bad)  # type: ignore[arg-type]


def test_compaction_with_the_rounds_needs_maintenance_on_and_an_allowance() -> None:
    assert not MaintenancePolicy().compacts_with_rounds
    assert MaintenancePolicy(enabled=True).compacts_with_rounds
    assert not MaintenancePolicy(enabled=True, small_files_allowed=0).compacts_with_rounds


def test_bins_pack_consecutive_files_up_to_the_target() -> None:
    assert bins([10, 20, 30, 40], 100) == [range(0, 4)]
    assert bins([60, 30, 20, 50, 40], 100) == [range(0, 2), range(2, 4)], "the fifth alone stays"
    assert bins([120, 10, 10], 100) == [range(1, 3)], "a file that reaches the target alone is left"
    assert bins([10], 100) == [] and bins([], 100) == []


@given(st.lists(st.integers(1, 200), max_size=60), st.integers(1, 400))
def test_bins_never_overlap_and_each_holds_two_files_within_the_target(sizes: list[int], target: int) -> None:
    runs = bins(sizes, target)
    taken = [i for r in runs for i in r]
    assert taken == sorted(set(taken)), "in order, no file twice"
    for r in runs:
        assert len(r) >= 2 and sum(sizes[i] for i in r) <= target
