"""``POST /v1/tables/{table}/epochs``: a topic deleted and made again begins a new ledger epoch
(:mod:`commit_service.domain.epochs`). Reads the topic's log bounds from Kafka (the ``kafka``
section) to check that it was made again and where its partitions now begin, then commits the
epoch through the table's coordinator.
"""

from __future__ import annotations

from commit_service.audit.kafka import KafkaLog, KafkaReadError
from commit_service.domain.epochs import epoch_starts
from commit_service.errors import BadRequestError, KafkaUnavailableError
from commit_service.http.runtime import ServiceRuntime
from lakegate_core.status import CommitRecord, EpochRequest


def open_epoch(rt: ServiceRuntime, table: str, asked: EpochRequest) -> CommitRecord:
    """Begin ``asked.topic``'s new ledger epoch in ``table``; 400 for a topic the table does not
    take, 409 unless it looks made again (or ``force``), 503 when Kafka cannot be read."""
    tc = rt.coordinator.table(table)
    if not tc.config.routes(asked.topic):
        raise BadRequestError(f"table {table} does not take topic {asked.topic!r}", {"field": "topic"})
    bounds = None
    if rt.config.kafka is not None:
        try:
            with KafkaLog(rt.config.kafka) as log:
                bounds = log.topic_bounds(asked.topic)
        except KafkaReadError as exc:
            raise KafkaUnavailableError(f"cannot check topic {asked.topic} in Kafka: {exc}") from None
    starts = epoch_starts(asked.topic, tc.topic_offsets(asked.topic), bounds, force=asked.force)
    return rt.coordinator.open_epoch(table, asked.topic, starts)
