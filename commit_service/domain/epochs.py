"""Ledger epochs: a topic deleted and made again starts its partitions' ledgers anew. Pure.

Kafka numbers a recreated topic's records from 0 again; a table that holds the old topic up to
offset 5,000 would take the new records 0..4,999 for duplicates. An admin opens a new *ledger
epoch* for the topic (``POST /v1/tables/{table}/epochs``): from then on the table keys that
topic's partitions as ``<topic>~<epoch>`` (``orders~2``) in everything it records (the ``txn``
appIds of Delta, ``lakegate.offsets`` of Iceberg, the commit records, the paths of rewritten
files), while sidecars, leases and the API keep Kafka's names. Kafka topic names cannot hold
``~``, so a ledger key is never a topic's name.

The epochs are not stored apart: a topic's epoch is the highest one its ledger keys show
(:func:`current`), and the commit that opens an epoch records each partition's first offset under
the new key, so a restart reads the epoch back with the offsets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

from commit_service.errors import ConflictError
from lakegate_core.types import TopicPartition

V = TypeVar("V")

MARK = "~"


def split(topic: str) -> tuple[str, int]:
    """A ledger key's topic as Kafka's topic name and its epoch (1 for a plain name)."""
    name, sep, epoch = topic.rpartition(MARK)
    if sep and name and epoch.isdigit() and int(epoch) > 1:
        return name, int(epoch)
    return topic, 1


def keyed(topic: str, epoch: int) -> str:
    """The ledger key of ``topic`` in ``epoch`` (the topic's own name in epoch 1)."""
    return topic if epoch <= 1 else f"{topic}{MARK}{epoch}"


def current(keys: Iterable[TopicPartition]) -> dict[str, int]:
    """Per Kafka topic, the highest epoch among ``keys`` (only topics past epoch 1 are named)."""
    out: dict[str, int] = {}
    for tp in keys:
        name, epoch = split(tp.topic)
        if epoch > out.get(name, 1):
            out[name] = epoch
    return out


class Epochs:
    """A table's topics' current epochs, translating between Kafka's partitions and ledger keys."""

    def __init__(self, epochs: Mapping[str, int] | None = None) -> None:
        self.by_topic: dict[str, int] = {t: e for t, e in (epochs or {}).items() if e > 1}

    def of(self, topic: str) -> int:
        return self.by_topic.get(topic, 1)

    def learn(self, keys: Iterable[TopicPartition]) -> None:
        """Adopt the epochs ``keys`` (a table's ledger keys, read back) show; never goes back."""
        for topic, epoch in current(keys).items():
            self.by_topic[topic] = max(self.by_topic.get(topic, 1), epoch)

    def ledger(self, tp: TopicPartition) -> TopicPartition:
        """Kafka's partition ``tp`` as the table's ledger keys it now."""
        epoch = self.by_topic.get(tp.topic)
        return tp if epoch is None else TopicPartition(keyed(tp.topic, epoch), tp.partition)

    def kafka(self, key: TopicPartition) -> TopicPartition | None:
        """The Kafka partition a ledger key stands for, or None when its epoch is over (the topic
        was made again since: those records are not in Kafka any more)."""
        name, epoch = split(key.topic)
        if epoch != self.of(name):
            return None
        return key if epoch == 1 else TopicPartition(name, key.partition)

    def to_kafka(self, offsets: Mapping[TopicPartition, V]) -> dict[TopicPartition, V]:
        """``offsets`` keyed by ledger keys, as Kafka's partitions: the current epochs' only."""
        out: dict[TopicPartition, V] = {}
        for key, offset in offsets.items():
            tp = self.kafka(key)
            if tp is not None:
                out[tp] = offset
        return out

    def superseded(self, keys: Iterable[TopicPartition]) -> list[TopicPartition]:
        """The ledger keys among ``keys`` whose epoch is over."""
        return sorted(k for k in keys if self.kafka(k) is None)


def epoch_starts(
    topic: str,
    committed: Mapping[int, int],
    bounds: Mapping[int, tuple[int, int]] | None,
    *,
    force: bool = False,
) -> dict[int, int]:
    """Where each partition's ledger begins in ``topic``'s new epoch: Kafka's log start of the
    topic made again (``bounds``: per partition its log start and end; None without a ``kafka``
    section: 0). ``committed`` is the table's offsets of the topic in its current epoch.

    A :class:`ConflictError` unless the topic looks made again: it exists, and no partition the
    table holds ends at or past the table's offset (a topic whose records the table could still
    be taking is not recreated). ``force`` passes that check (the operator knows better: the new
    topic already holds more records than the old one did, or Kafka cannot be read). Partitions
    the new topic has that the table never held are not named: their ledgers begin by the
    table's ``start`` rule, as any new partition's."""
    if not committed:
        raise ConflictError(
            f"the table holds no offset of topic {topic}: there is no ledger to begin again",
            {"topic": topic},
        )
    if bounds is None:
        if not force:
            raise ConflictError(
                f"the service config has no kafka section, so it cannot check that topic {topic} was made "
                "again: send force=true once you have checked",
                {"topic": topic},
            )
        return {p: 0 for p in sorted(committed)}
    if not bounds:
        raise ConflictError(f"topic {topic} does not exist in Kafka: make it again first", {"topic": topic})
    ahead = {p: bounds[p][1] for p in sorted(committed) if p in bounds and bounds[p][1] >= committed[p]}
    if ahead and not force:
        p, end = next(iter(ahead.items()))
        raise ConflictError(
            f"topic {topic} does not look made again: partition {p} ends at {end} in Kafka, at or past the "
            f"table's offset {committed[p]} ({len(ahead)} partition(s) so): send force=true if it was",
            {"topic": topic, "ahead": {str(k): v for k, v in ahead.items()}},
        )
    starts = {p: bounds[p][0] for p in sorted(committed) if p in bounds}
    if not starts:
        raise ConflictError(
            f"topic {topic} made again has none of the partitions the table holds ({sorted(committed)})",
            {"topic": topic},
        )
    return starts
