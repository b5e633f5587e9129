"""``lakegate.offsets``: encoded canonically, decoded back, refused when it is not Lakegate's."""

from __future__ import annotations

import json

import pytest

from commit_service.errors import TableWriteError
from commit_service.iceberg.summary import decode, encode
from lakegate_core.types import PartitionOffsets, TopicPartition


def test_offsets_round_trip_and_equal_maps_give_equal_text() -> None:
    offsets = {TopicPartition("b", 10): 7, TopicPartition("a", 2): 0, TopicPartition("b", 1): 2**40}
    text = encode(offsets)
    assert json.loads(text) == {"a": {"2": 0}, "b": {"1": 2**40, "10": 7}}
    assert decode(text, "t") == PartitionOffsets(offsets)
    assert encode(dict(reversed(list(offsets.items())))) == text  # the text is the check's currency
    assert encode({}) == "{}" and decode("{}", "t") == PartitionOffsets({})


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '{"a": 3}', '{"a": {"x": 1}}', '{"a": {"0": -1}}'])
def test_a_property_that_is_not_lakegates_offsets_is_refused_naming_the_table(text: str) -> None:
    with pytest.raises(TableWriteError, match="table sales.orders"):
        decode(text, "sales.orders")
