"""Ledger epochs (commit_service.domain.epochs): the keys of a recreated topic's partitions and
where its new ledgers begin."""

from __future__ import annotations

import pytest

from commit_service.domain.epochs import Epochs, current, epoch_starts, keyed, split
from commit_service.errors import ConflictError
from lakegate_core.types import TopicPartition as TP


def test_a_key_names_its_topic_and_epoch_and_epoch_one_is_the_topics_own_name() -> None:
    assert keyed("orders", 1) == "orders" and keyed("orders", 3) == "orders~3"
    assert split("orders~3") == ("orders", 3)
    assert split("orders") == ("orders", 1)
    assert split("a~b") == ("a~b", 1) and split("~2") == ("~2", 1) and split("x~1") == ("x~1", 1)


def test_the_current_epoch_is_the_highest_the_keys_show_per_topic() -> None:
    keys = [TP("orders", 0), TP("orders~2", 0), TP("orders~3", 1), TP("users", 0)]
    assert current(keys) == {"orders": 3}
    epochs = Epochs(current(keys))
    assert epochs.ledger(TP("orders", 5)) == TP("orders~3", 5)
    assert epochs.ledger(TP("users", 0)) == TP("users", 0)
    assert epochs.kafka(TP("orders~3", 1)) == TP("orders", 1)
    assert epochs.kafka(TP("orders~2", 0)) is None and epochs.kafka(TP("orders", 0)) is None
    assert epochs.kafka(TP("users", 0)) == TP("users", 0)
    offsets = {TP("orders", 0): 5000, TP("orders~3", 0): 40, TP("users", 0): 7}
    assert epochs.to_kafka(offsets) == {TP("orders", 0): 40, TP("users", 0): 7}
    assert epochs.superseded(offsets) == [TP("orders", 0)]
    epochs.learn([TP("orders~2", 0)])  # never goes back
    assert epochs.of("orders") == 3


def test_a_new_epoch_begins_at_kafkas_log_start_of_the_partitions_the_table_held() -> None:
    starts = epoch_starts("orders", {0: 5000, 1: 4000, 2: 10}, {0: (0, 120), 1: (0, 0), 3: (0, 9)})
    assert starts == {0: 0, 1: 0}  # 2 is gone from the new topic; 3 is new (the start rule decides it)


def test_a_topic_that_does_not_look_made_again_is_refused_unless_forced() -> None:
    with pytest.raises(ConflictError, match="partition 1 ends at 4000 in Kafka, at or past the table's offset 4000"):
        epoch_starts("orders", {0: 5000, 1: 4000}, {0: (0, 10), 1: (0, 4000)})
    assert epoch_starts("orders", {0: 5000, 1: 4000}, {0: (0, 10), 1: (0, 4000)}, force=True) == {0: 0, 1: 0}


@pytest.mark.parametrize(
    ("committed", "bounds", "message"),
    [
        ({}, {0: (0, 1)}, "holds no offset of topic orders"),
        ({0: 5}, {}, "does not exist in Kafka"),
        ({0: 5}, None, "no kafka section"),
        ({0: 5}, {1: (0, 1)}, "has none of the partitions"),
    ],
)
def test_what_cannot_begin_an_epoch_says_why(committed: dict[int, int], bounds: dict | None, message: str) -> None:
    with pytest.raises(ConflictError, match=message):
        epoch_starts("orders", committed, bounds)


def test_without_kafka_a_forced_epoch_begins_at_zero() -> None:
    assert epoch_starts("orders", {0: 5, 2: 9}, None, force=True) == {0: 0, 2: 0}
