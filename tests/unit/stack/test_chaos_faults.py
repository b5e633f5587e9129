"""The chaos run's registry of fault kinds: one function per kind the settings accept."""

from __future__ import annotations

import inspect

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


def test_a_members_partitions_are_read_from_either_form_of_its_assignment() -> None:
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

    from lakegate_stack.chaos.faults import assigned

    decoded = ConsumerProtocolAssignment(version=0, assigned_partitions=[("t-a", [0, 3]), ("t-b", [1])], user_data=b"")
    assert assigned(decoded) == {("t-a", 0), ("t-a", 3), ("t-b", 1)}
    as_dict = {"assigned_partitions": [{"topic": "t-a", "partitions": [0]}, {"topic": "t-b", "partitions": [2]}]}
    assert assigned(as_dict) == {("t-a", 0), ("t-b", 2)}
    assert assigned(None) == set()
