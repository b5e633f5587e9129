"""Kafka as the doctor reads it: which topics exist, their retention and cleanup policy, each
partition's log end, and whether a topic's producers write in transactions.

Used by :class:`~commit_service.doctor.doctor.Doctor` when the service config has a ``kafka``
section; one admin client and one consumer (assigned, no group, nothing committed) per check,
closed after. Transactions are told from the tail of each log: a transaction's commit or abort
marker takes an offset no consumer is given, so a topic that is not compacted and whose last
records skip an offset (or stop short of the log end) was written in transactions.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from lakegate_core.connect_group import KafkaSettings

from .facts import TopicFacts

TIMEOUT_MS = 10_000
POLL_MS = 300
TAIL_RECORDS = 50  # records read from the end of each partition to look for transaction markers
TAIL_PARTITIONS = 32  # partitions of a topic whose tails are read


class DoctorKafkaError(Exception):
    """Kafka could not be read; the doctor reports its Kafka checks as not run."""


class TopicInspector:
    """One doctor run's reader of Kafka (a context manager: close it)."""

    def __init__(self, settings: KafkaSettings, timeout_ms: int = TIMEOUT_MS) -> None:
        self.timeout_ms = timeout_ms
        try:
            self._admin: Any = settings.admin_factory("lakegate-doctor")()
            self._consumer: Any = settings.consumer("lakegate-doctor", timeout_ms)
        except Exception as exc:
            raise DoctorKafkaError(f"cannot reach Kafka at {settings.bootstrap_servers}: {exc}") from None

    def __enter__(self) -> TopicInspector:
        return self

    def __exit__(self, *_: object) -> None:
        for client in (self._admin, self._consumer):
            try:
                client.close()
            except Exception:  # a broken client may fail to close; it is dropped either way
                pass

    def topic_names(self) -> list[str]:
        try:
            return sorted(str(t) for t in self._admin.list_topics())
        except Exception as exc:
            raise DoctorKafkaError(f"cannot list topics: {type(exc).__name__}: {exc}") from None

    def describe(self, topics: Iterable[str]) -> dict[str, TopicFacts]:
        """Facts of each topic (one that does not exist: ``exists=False``)."""
        wanted = sorted(set(topics))
        existing = set(self.topic_names())
        out = {t: TopicFacts(exists=False) for t in wanted if t not in existing}
        present = [t for t in wanted if t in existing]
        if not present:
            return out
        configs = self._configs(present)
        for topic in present:
            retention, policy = configs.get(topic, (None, "delete"))
            ends = self._log_ends(topic)
            transactional = None if "compact" in policy else self._transactional(topic, ends)
            out[topic] = TopicFacts(True, retention, policy, ends, transactional)
        return out

    def _configs(self, topics: list[str]) -> dict[str, tuple[int | None, str]]:
        from kafka.admin import ConfigResource, ConfigResourceType

        resources = [
            ConfigResource(ConfigResourceType.TOPIC, t, {"retention.ms": None, "cleanup.policy": None}) for t in topics
        ]
        try:
            described = self._admin.describe_configs(resources, config_filter="all").get("topic", {})
        except Exception as exc:
            raise DoctorKafkaError(f"cannot describe the topics' configs: {type(exc).__name__}: {exc}") from None
        out: dict[str, tuple[int | None, str]] = {}
        for topic, entries in described.items():
            raw = (entries.get("retention.ms") or {}).get("value")
            policy = (entries.get("cleanup.policy") or {}).get("value") or "delete"
            out[str(topic)] = (int(raw) if raw not in (None, "") else None, str(policy))
        return out

    def _log_ends(self, topic: str) -> dict[int, int]:
        from kafka import TopicPartition as KafkaPartition

        partitions = sorted(self._consumer.partitions_for_topic(topic) or ())
        wanted = [KafkaPartition(topic, p) for p in partitions]
        if not wanted:
            return {}
        try:
            ends = self._consumer.end_offsets(wanted, timeout_ms=self.timeout_ms)
        except Exception as exc:
            raise DoctorKafkaError(f"cannot read {topic}'s log ends: {type(exc).__name__}: {exc}") from None
        return {k.partition: int(v) for k, v in ends.items()}

    def _transactional(self, topic: str, ends: dict[int, int]) -> bool | None:
        """Whether the tail of some partition shows a transaction marker; None if every tail is empty."""
        from kafka import TopicPartition as KafkaPartition

        tails = {KafkaPartition(topic, p): end for p, end in sorted(ends.items())[:TAIL_PARTITIONS]}
        if not tails:
            return None
        starts = self._consumer.beginning_offsets(list(tails), timeout_ms=self.timeout_ms)
        seen_any = False
        for part, end in tails.items():
            first = max(int(starts[part]), end - TAIL_RECORDS)
            if first >= end:
                continue
            offsets = self._tail(part, first, end)
            if not offsets:
                continue
            seen_any = True
            if any(b - a > 1 for a, b in zip(offsets, offsets[1:], strict=False)) or offsets[-1] + 1 < end:
                return True
        return False if seen_any else None

    def _tail(self, part: Any, first: int, end: int) -> list[int]:
        """The offsets of the records in ``[first, end)`` (markers and aborted-or-not alike are what a
        ``read_uncommitted`` consumer is given: every data record, no marker)."""
        self._consumer.assign([part])
        self._consumer.seek(part, first)
        offsets: list[int] = []
        deadline = time.monotonic() + self.timeout_ms / 1000
        while time.monotonic() < deadline:
            for m in self._consumer.poll(timeout_ms=POLL_MS).get(part, []):
                offsets.append(int(m.offset))
            if self._consumer.position(part) >= end:
                break
        return offsets
