"""Listing that does not grow with the archive: each partition from its committed offset on.

Used by the sidecar loop each round. A storage sink's bucket keeps every file it ever wrote, and
listing a topic's whole prefix costs one request per 1,000 keys of that history, every round. When
a partition's names sort by offset, the loop lists that partition alone from the table's offset
(S3 ``StartAfter``): one request per partition, answering only the files not yet in the table.

Names sort by offset only where the sink zero-pads them: Aiven's prefix naming (20 digits),
Confluent's (``zeroPadOffsetWidth``, 10 by default). :class:`ListingPlan` learns it from the keys
a full listing keeps (:func:`~sidecar.storage.list_files`): a partition whose names all carry an
offset of one width, at least one with a leading zero, is listed from its offset; any other (a
custom regex, unpadded names, a width that changed) keeps its topic on the full listing. Per topic
it takes the cheaper in requests: per partition once the topic's last full listing held more pages
of keys than the loop owns partitions of it. Every ``full_every`` rounds a topic listed per
partition is listed whole again, which learns both anew.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass, field

from lakegate_core.types import TopicPartition
from sidecar.storage import Lister, NamePattern, StoredFile, list_files

PAGE = 1000  # keys per ListObjectsV2 answer
FULL_EVERY = 100  # rounds between full listings of a topic listed per partition

UNSORTED = 0  # a partition's names do not sort by offset


@dataclass
class _TopicShape:
    """What a topic's last full listing said: how many keys it held, and per partition the width
    of its names' offsets (``UNSORTED``; absent: it had no file)."""

    keys: int = 0
    widths: dict[int, int] = field(default_factory=dict)
    rounds: int = 0  # rounds listed per partition since that listing


class ListingPlan:
    """Per topic, whether to list it whole or per partition; state between rounds of one loop."""

    def __init__(self, pattern: NamePattern, full_every: int = FULL_EVERY) -> None:
        self.pattern = pattern
        self.full_every = full_every
        self._topics: dict[str, _TopicShape] = {}
        self.requests = 0  # listings started (a whole topic or one partition), for tests and benches

    def files(
        self, lister: Lister, since: Mapping[TopicPartition, int], spans: Container[tuple[str, int]] = ()
    ) -> dict[TopicPartition, list[StoredFile]]:
        """The files of ``since``'s partitions from each one's offset on, sorted, as
        :func:`~sidecar.storage.list_files` keeps them (with a topic listed whole, also the last
        file starting below the offset, which may straddle it)."""
        by_topic: dict[str, list[TopicPartition]] = {}
        for tp in since:
            by_topic.setdefault(tp.topic, []).append(tp)
        whole = {t for t, tps in by_topic.items() if not self._per_partition(t, tps)}
        out: dict[TopicPartition, list[StoredFile]] = {}
        if whole:
            counts: dict[str, int] = {}
            self.requests += len(whole)
            wanted = {tp: offset for tp, offset in since.items() if tp.topic in whole}
            listed = list_files(lister, self.pattern, whole, wanted, spans, counts)
            self._learn(whole, listed, counts)
            out.update(listed)
        for topic in set(by_topic) - whole:
            self._topics[topic].rounds += 1
            for tp in by_topic[topic]:
                self.requests += 1
                files = self._list_partition(lister, tp, since[tp])
                if files:
                    out[tp] = files
        return out

    def _per_partition(self, topic: str, tps: list[TopicPartition]) -> bool:
        shape = self._topics.get(topic)
        if shape is None or shape.rounds >= self.full_every or self.pattern.partition_prefix(tps[0]) is None:
            return False
        if any(shape.widths.get(tp.partition) == UNSORTED for tp in tps):
            return False
        return -(-shape.keys // PAGE) > len(tps)

    def _learn(
        self, topics: set[str], listed: Mapping[TopicPartition, list[StoredFile]], counts: Mapping[str, int]
    ) -> None:
        for topic in topics:
            self._topics[topic] = _TopicShape(keys=counts.get(topic, 0))
        for tp, files in listed.items():
            widths = {f.digits for f in files}
            sorted_names = len(widths) == 1 and any(f.padded for f in files)
            self._topics[tp.topic].widths[tp.partition] = widths.pop() if sorted_names else UNSORTED

    def _list_partition(self, lister: Lister, tp: TopicPartition, offset: int) -> list[StoredFile]:
        """``tp``'s files from ``offset`` on (all of them when its width is not known yet: it had
        no file)."""
        prefix = self.pattern.partition_prefix(tp)
        assert prefix is not None  # _per_partition checked the pattern has one
        shape = self._topics[tp.topic]
        width = shape.widths.get(tp.partition)
        after = f"{prefix}{offset - 1:0{width}d}" if width and offset > 0 else None
        files: list[StoredFile] = []
        for key, size in lister.list(prefix, start_after=after):
            f = self.pattern.parse(key, size)
            if f is None or f.tp != tp:
                continue
            files.append(f)
        widths = {f.digits for f in files} | ({width} if width else set())
        if len(widths) > 1 or (files and width is None and not any(f.padded for f in files)):
            shape.widths[tp.partition] = UNSORTED  # the topic is listed whole from the next round
        elif files and width is None:
            shape.widths[tp.partition] = files[0].digits
        files.sort(key=lambda f: f.start_offset)
        return files
