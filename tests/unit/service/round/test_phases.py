"""Where a round's time goes (``CommitRecord.phases_ms``): each phase from the end of the one before."""

from __future__ import annotations

from commit_service.round.commit import Phases


def test_each_phase_counts_from_the_end_of_the_one_before() -> None:
    ticks = iter([100.0, 100.010, 100.0155, 101.2])
    phases = Phases(clock=lambda: next(ticks))
    phases.ended("facts")
    phases.ended("open")
    phases.ended("write")
    assert phases.ms == {"facts": 10, "open": 5, "write": 1184}
    assert list(phases.ms) == ["facts", "open", "write"]  # in the order they ran
