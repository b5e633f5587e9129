"""When maintenance is due (pure; the coordinator runs it between commit rounds)."""

from __future__ import annotations

import pytest

from commit_service.domain.maintenance import MaintenanceClock, MaintenancePolicy, due
from lakegate_core.status import MaintenanceKind

COMPACT, VACUUM = MaintenanceKind.COMPACT, MaintenanceKind.VACUUM


def test_disabled_never_runs_and_never_counts_files() -> None:
    def count() -> int:
        raise AssertionError("files counted while maintenance is off")

    clock = MaintenanceClock()
    clock.started(0)
    assert due(MaintenancePolicy(), clock, 10**9, count) == []


def test_compaction_needs_its_interval_and_enough_files_vacuum_its_interval() -> None:
    policy = MaintenancePolicy(
        enabled=True, compact_interval_seconds=60, compact_min_files=10, vacuum_interval_seconds=300
    )
    clock = MaintenanceClock()
    clock.started(0)
    counted: list[int] = []

    def files(n: int):  # type: ignore[no-untyped-def]
        def count() -> int:
            counted.append(n)
            return n

        return count

    assert due(policy, clock, 59, files(50)) == [] and counted == [], "files are not counted before the interval"
    assert due(policy, clock, 60, files(9)) == [] and counted == [9]
    assert due(policy, clock, 100, files(50)) == [], "a look that found too few files waits a whole interval"
    assert due(policy, clock, 120, files(50)) == [COMPACT]
    clock.ran(COMPACT, 120)
    assert due(policy, clock, 300, files(50)) == [COMPACT, VACUUM], "compaction first, then vacuum"


@pytest.mark.parametrize(
    "bad",
    [{"compact_interval_seconds": 0}, {"compact_min_files": 1}, {"vacuum_retention_hours": -1}],
)
def test_bad_policies_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="maintenance"):
        MaintenancePolicy(**bad)  # type: ignore[arg-type]


def test_checkpoints_leave_the_commit_path_unless_the_interval_is_zero() -> None:
    assert MaintenancePolicy().background_checkpoints  # the default, with compaction and vacuum off
    assert MaintenancePolicy(enabled=True).background_checkpoints
    assert not MaintenancePolicy(checkpoint_interval_commits=0).background_checkpoints
