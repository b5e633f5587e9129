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
