"""Which records the value audit reads back from Kafka: a seeded, uniform choice. Pure.

Called by :class:`~commit_service.audit.auditor.Auditor`. The records are drawn from what each
partition has committed that Kafka still keeps (its log start on), so the same seed over the same
table and Kafka picks the same records: an audit that found a breach can be run again to show it.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Mapping

from lakegate_core.types import TopicPartition


def reachable(
    committed: Mapping[TopicPartition, list[tuple[int, int]]], log_starts: Mapping[TopicPartition, int]
) -> dict[TopicPartition, list[tuple[int, int]]]:
    """Each partition's committed ranges cut to what Kafka still keeps."""
    out: dict[TopicPartition, list[tuple[int, int]]] = {}
    for tp, spans in committed.items():
        first = log_starts.get(tp, 0)
        kept = [(max(start, first), end) for start, end in spans if end > first]
        if kept:
            out[tp] = kept
    return out


def choose(
    ranges: Mapping[TopicPartition, list[tuple[int, int]]], count: int, seed: int
) -> dict[TopicPartition, list[int]]:
    """``count`` distinct (partition, offset) pairs drawn uniformly from ``ranges`` with ``seed``
    (all of them when there are no more); per partition, sorted."""
    flat = [(tp, start, end) for tp in sorted(ranges) for start, end in ranges[tp]]
    total = sum(end - start for _, start, end in flat)
    picks = list(range(total)) if total <= count else sorted(random.Random(seed).sample(range(total), count))
    bounds, acc = [], 0
    for _, start, end in flat:
        acc += end - start
        bounds.append(acc)
    out: dict[TopicPartition, list[int]] = {}
    for n in picks:
        i = bisect.bisect_right(bounds, n)
        tp, start, _ = flat[i]
        before = bounds[i - 1] if i else 0
        out.setdefault(tp, []).append(start + n - before)
    return out
