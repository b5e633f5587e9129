"""Small Kafka client steps the integration tests share: topics, producing, group offsets."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable

from kafka import KafkaAdminClient, KafkaProducer, TopicPartition

from lakegate_stack.kafka import create_topic

__all__ = ["committed_offsets", "create_topic", "end_offsets", "make_again", "produce_json", "wait_committed"]


def produce_json(bootstrap: str, topic: str, records: Iterable[tuple[int, str, dict[str, object]]]) -> int:
    """Send (partition, key, value) records, flushed; returns how many were acknowledged."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20)
    try:
        futures = [
            producer.send(topic, key=k.encode(), value=json.dumps(v).encode(), partition=p) for p, k, v in records
        ]
        producer.flush(60)
        return sum(1 for f in futures if f.get(timeout=60) is not None)
    finally:
        producer.close()


def committed_offsets(bootstrap: str, group: str) -> dict[TopicPartition, int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return {tp: meta.offset for tp, meta in admin.list_group_offsets({group: None})[group].items()}
    finally:
        admin.close()


def wait_committed(bootstrap: str, group: str, expected: dict[TopicPartition, int], timeout: float) -> None:
    """Wait until ``group`` has committed at least ``expected`` on every partition."""
    deadline = time.monotonic() + timeout
    seen: dict[TopicPartition, int] = {}
    while time.monotonic() < deadline:
        seen = committed_offsets(bootstrap, group)
        if all(seen.get(tp, -1) >= off for tp, off in expected.items()):
            return
        time.sleep(0.5)
    raise AssertionError(f"group {group} committed {seen}, expected {expected} within {timeout:.0f}s")


def end_offsets(bootstrap: str, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
    """The log end offset of each partition."""
    from kafka.admin import OffsetSpec

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        result = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in partitions})
        return {tp: int(getattr(v, "offset", v)) for tp, v in result.items()}
    finally:
        admin.close()


def make_again(bootstrap: str, topic: str, partitions: int, timeout: float = 120) -> None:
    """Delete ``topic`` and create it anew, empty (a recreated cluster, for one topic)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_topics([topic])
        deadline = time.monotonic() + timeout
        while topic in admin.list_topics():
            assert time.monotonic() < deadline, f"{topic} was not deleted within {timeout:.0f}s"
            time.sleep(0.5)
    finally:
        admin.close()
    deadline = time.monotonic() + timeout
    while True:  # the deletion may still be under way on the broker: retry on "already exists"
        try:
            create_topic(bootstrap, topic, partitions)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
