"""The chaos run's registry of fault kinds: one function per kind the settings accept."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from lakegate_stack.chaos import ALL_FAULT_KINDS, FAULT_KINDS, FAULTS, PEER_FAULT_KINDS, ChaosSettings


def test_every_kind_has_its_fault_and_every_fault_its_kind() -> None:
    assert set(FAULTS) == set(ALL_FAULT_KINDS)
    assert set(FAULT_KINDS) <= set(ALL_FAULT_KINDS) and set(PEER_FAULT_KINDS) <= set(ALL_FAULT_KINDS)
    for kind, fault in FAULTS.items():
        assert list(inspect.signature(fault).parameters) == ["run", "record", "go"], kind


def test_settings_refuse_a_kind_without_a_fault() -> None:
    with pytest.raises(ValueError, match="unknown fault kinds"):
        ChaosSettings(kinds=("service_kill", "meteor_strike"))


def test_the_peer_coordinators_starts_and_stops_are_read_from_a_worker_log(tmp_path: Path) -> None:
    from lakegate_stack.chaos.faults import coordinator_events

    log = tmp_path / "w.log"
    log.write_text(
        "[2026-11-26 19:43:11,494] INFO Committer p-0 received leader partition. Starting Coordinator. (x)\n"
        "[2026-11-26 19:43:11,494] INFO Task p-0 elected leader, starting commit coordinator (x)\n"
        "[2026-11-26 19:43:12,000] INFO Task other-0 elected leader, starting commit coordinator (x)\n"
        "[2026-11-26 19:43:23,937] INFO Committer p-0 lost leader partition. Stopping coordinator. (x)\n"
        "[2026-11-26 19:43:26,526] INFO Task p-1 elected leader, starting commit coordinator (x)\n"
    )
    assert coordinator_events(log, "p") == [
        ("2026-11-26 19:43:11,494", True),
        ("2026-11-26 19:43:23,937", False),
        ("2026-11-26 19:43:26,526", True),
    ]


def test_lost_ids_are_reported_as_runs() -> None:
    from lakegate_stack.chaos.verify import id_ranges

    assert id_ranges([7, 1, 2, 3, 9, 10]) == ["1-3", "7", "9-10"]
    assert id_ranges([]) == []
