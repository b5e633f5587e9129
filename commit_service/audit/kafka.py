"""Kafka as the audit reads it: each partition's log bounds and the records at chosen offsets.

Used by :class:`~commit_service.audit.auditor.Auditor` when the service config has a ``kafka``
section; one kafka-python consumer per audit, assigned (no group, nothing committed), closed after.
It reads as the sink's consumer does by default (``read_uncommitted``): what the sink could have
written is what the table is compared with.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from commit_service.audit.values import KafkaRecord
from commit_service.domain.epochs import Epochs
from lakegate_core.connect_group import KafkaSettings
from lakegate_core.types import TopicPartition

TIMEOUT_MS = 10_000
POLL_MS = 500


class KafkaReadError(Exception):
    """Kafka could not be read; the audit reports the Kafka checks as not run."""


class KafkaLog:
    """One audit's reader of Kafka (close it; a context manager)."""

    def __init__(self, settings: KafkaSettings, timeout_ms: int = TIMEOUT_MS) -> None:
        self.timeout_ms = timeout_ms
        # set by the audit: partitions are then asked by a table's ledger keys (domain.epochs),
        # each read as the Kafka partition its current epoch stands for
        self.epochs = Epochs()
        try:
            self._consumer: Any = settings.consumer("lakegate-audit", timeout_ms)
        except Exception as exc:
            raise KafkaReadError(f"cannot reach Kafka at {settings.bootstrap_servers}: {exc}") from None

    def __enter__(self) -> KafkaLog:
        return self

    def __exit__(self, *_: object) -> None:
        self._consumer.close()

    def bounds(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
        """Per partition, Kafka's log start (the oldest offset it keeps) and log end (the next offset)."""
        from kafka import TopicPartition as KafkaPartition

        keys = {key: tp for key in set(partitions) if (tp := self.epochs.kafka(key)) is not None}
        wanted = [KafkaPartition(tp.topic, tp.partition) for tp in sorted(set(keys.values()))]
        if not wanted:
            return {}
        try:
            starts = self._consumer.beginning_offsets(wanted, timeout_ms=self.timeout_ms)
            ends = self._consumer.end_offsets(wanted, timeout_ms=self.timeout_ms)
        except Exception as exc:
            raise KafkaReadError(f"cannot read the log bounds: {type(exc).__name__}: {exc}") from None
        return {key: (int(starts[k]), int(ends[k])) for key, tp in keys.items() if (k := KafkaPartition(*tp)) in starts}

    def topic_bounds(self, topic: str) -> dict[int, tuple[int, int]]:
        """Per partition of ``topic``, its log start and end (empty: no such topic)."""
        try:
            partitions = self._consumer.partitions_for_topic(topic)
        except Exception as exc:
            raise KafkaReadError(f"cannot read topic {topic}'s partitions: {type(exc).__name__}: {exc}") from None
        found = self.bounds(TopicPartition(topic, p) for p in partitions or ())
        return {tp.partition: b for tp, b in found.items()}

    def records(self, tp: TopicPartition, offsets: Sequence[int], end: int) -> dict[int, KafkaRecord]:
        """The records of ``tp`` at ``offsets`` (sorted; each below ``end``, the log end) that Kafka
        holds: an offset that is no record (a transaction marker, a compacted record) is absent."""
        from kafka import TopicPartition as KafkaPartition

        kafka = self.epochs.kafka(tp)
        if kafka is None:
            return {}  # an epoch that is over: Kafka holds another topic's records at these offsets
        part = KafkaPartition(kafka.topic, kafka.partition)
        self._consumer.assign([part])
        found: dict[int, KafkaRecord] = {}
        position: int | None = None
        for wanted in offsets:
            if wanted >= end or wanted in found:
                continue
            if position is None or position > wanted or wanted - position > 500:
                self._consumer.seek(part, wanted)
                position = wanted
            deadline = time.monotonic() + self.timeout_ms / 1000
            while position <= wanted:
                if time.monotonic() > deadline:
                    raise KafkaReadError(f"{tp}: offset {wanted} not read within {self.timeout_ms} ms")
                batch = self._consumer.poll(timeout_ms=POLL_MS).get(part, [])
                for m in batch:
                    found.setdefault(m.offset, KafkaRecord(m.offset, m.key, m.value, int(m.timestamp)))
                    position = m.offset + 1
                if not batch:
                    position = max(position, self._consumer.position(part))
        return {o: found[o] for o in offsets if o in found}
