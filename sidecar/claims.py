"""Lease claims cut to size: a round's owned partitions in claims the service accepts.

The loop leases every partition it owns each round (:meth:`sidecar.loop.SidecarLoop.run_once`),
each claim naming its partitions and carrying their watermarks. :func:`claim_batches` cuts the
sorted partitions into consecutive batches whose claims stay under ``CLAIM_BYTES``, estimated from
the topics' names alone. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator

from lakegate_core.types import TopicPartition

# a lease claim's size, estimated, at most: half the service's default request limit
# (server.max_request_bytes, 1 MiB), which a claim of 10,000 partitions with their watermarks passed
CLAIM_BYTES = 512 * 1024


def claim_batches(partitions: list[TopicPartition]) -> Iterator[tuple[TopicPartition, ...]]:
    """``partitions`` (sorted) in consecutive batches whose claims, each partition named once and
    in one watermark, stay under ``CLAIM_BYTES`` (a generous estimate per partition: its topic twice
    and the JSON of two entries with every field at its longest)."""
    batch: list[TopicPartition] = []
    size = 0
    for tp in partitions:
        cost = 2 * len(tp.topic.encode()) + 200
        if batch and size + cost > CLAIM_BYTES:
            yield tuple(batch)
            batch, size = [], 0
        batch.append(tp)
        size += cost
    if batch:
        yield tuple(batch)
