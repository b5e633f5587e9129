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
it takes the cheaper: per partition once the topic's last full listing held more than
``KEYS_PER_REQUEST`` keys per partition the loop owns of it (a request costs about what that many
listed keys do). A partition whose offsets may reach a name of more digits than its width before
the next round (Connect's committed offset has as many digits: Confluent pads to 10 and writes 11
past 9,999,999,999) is listed whole, as such a name would sort before the ``StartAfter`` key.
A sink reconfigured to pad otherwise is followed from its connector's config (:meth:`ListingPlan.follow`):
the partition is listed from its first name, and its topic whole from then on; a width change
the config does not show is followed after the sidecar restarts.

A steady round lists a partition by a narrower prefix still: the digits that every name from the
table's offset to Connect's committed offset shares (offsets 12,340 to 12,395 in 20 digits share
``000000000000000123``), where the connector's config (:meth:`ListingPlan.follow`) gives the width
the names were seen with. S3 answers ``StartAfter`` by seeking; SeaweedFS reads the prefix's keys
from its first, so a partition's request there cost what its archive holds (37 ms a request in
a partition of 1,000 files, 2.3 ms narrowed). A narrowed listing that does not find the file
the offset says comes next is done again on the partition's prefix.

A partition listed alone is listed a window at a time: at most ``WINDOW`` files a round, from
its offset on (the loop gives the table's offset, or what the service already holds). A window
cut short says where it stopped (:attr:`ListingPlan.cut`: the first file it left out), and the
loop takes that start as the partition's bound for the round, as if Connect had committed only up
to there: the last file in the window ends before it, and no file past it is reported or claimed.
So an archive of a million files costs a round a page per partition, and the sidecar holds a
window of each, not the archive. A topic never listed before is probed this way too (its first
round would otherwise list the whole archive): a window is kept only where its names sort by
offset (one width, zero-padded); elsewhere the partition is listed whole, and the next round
lists its topic whole.
"""

from __future__ import annotations

import time
from collections.abc import Container, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from os.path import commonprefix
from typing import Any

from lakegate_core.types import TopicPartition
from sidecar.storage import Listed, Lister, NamePattern, StoredFile, list_files

# a listing request costs about what this many listed keys cost (measured on SeaweedFS: a request
# 3-5 ms, a key 0.25-0.5 ms in a page of 1,000): a topic is listed per partition once its last
# full listing held more keys than this many per partition owned
KEYS_PER_REQUEST = 20
LIST_THREADS = 8  # partitions listed at once
# files a round lists of a partition listed alone: a catch-up's rounds commit at most
# commit.max_files (1,000 by default) of all partitions, so a window of 200 a partition keeps the
# service's buffer ahead of them, and one request (a page holds 1,000 keys) lists it
WINDOW = 200

UNSORTED = 0  # a partition's names do not sort by offset


@dataclass
class _TopicShape:
    """What a topic's last full listing said: how many keys it held, and per partition the width
    of its names' offsets (``UNSORTED``; absent: it had no file)."""

    keys: int = 0
    widths: dict[int, int] = field(default_factory=dict)


class ListingPlan:
    """Per topic, whether to list it whole or per partition; state between rounds of one loop."""

    def __init__(self, pattern: NamePattern, threads: int = LIST_THREADS, metrics: Any = None) -> None:
        self.pattern = pattern
        self.threads = threads
        self.metrics = metrics  # a SidecarMetrics: seconds and listings per topic
        self._topics: dict[str, _TopicShape] = {}
        self._configured: dict[str, int] = {}  # per topic, the padded width its connector's config gives names
        self.requests = 0  # listings started (a whole topic or one partition), for tests and benches
        # the last call's partitions whose window was cut short: the start of the first file left out
        self.cut: dict[TopicPartition, int] = {}

    def follow(self, topics: Iterable[str], width: int | None) -> None:
        """The width the connector of ``topics`` pads its names' offsets to, as its config says this
        round (None: not padded, or not known). A partition is listed by a prefix narrowed to its
        round's offsets only while this agrees with the width its names were seen to have."""
        for topic in topics:
            if width is None:
                self._configured.pop(topic, None)
            else:
                self._configured[topic] = width

    def files(
        self,
        lister: Lister,
        since: Mapping[TopicPartition, int],
        spans: Container[tuple[str, int]] = (),
        upto: Mapping[TopicPartition, int] | None = None,
    ) -> dict[TopicPartition, list[StoredFile]]:
        """The files of ``since``'s partitions from each one's offset on, sorted, as
        :func:`~sidecar.storage.list_files` keeps them (with a topic listed whole, also the last
        file starting below the offset, which may straddle it). ``upto``: each partition's
        Connect committed offset, below which the files to find start (a partition without one is
        listed from its start: a name of more digits might come)."""
        upto = upto or {}
        self.cut = {}
        by_topic: dict[str, list[TopicPartition]] = {}
        for tp in since:
            by_topic.setdefault(tp.topic, []).append(tp)
        whole = {t for t, tps in by_topic.items() if not self._per_partition(t, tps)}
        out: dict[TopicPartition, list[StoredFile]] = {}
        for topic in sorted(whole):  # one streaming listing per topic
            started, counts = time.perf_counter(), dict[str, int]()
            wanted = {tp: offset for tp, offset in since.items() if tp.topic == topic}
            listed = list_files(lister, self.pattern, [topic], wanted, spans, counts)
            self._learn(topic, listed, counts.get(topic, 0))
            out.update(listed)
            self._count(topic, 1, time.perf_counter() - started)
        per_partition = sorted(set(by_topic) - whole)
        for topic in per_partition:
            self._topics.setdefault(topic, _TopicShape())  # a first round's probe
        tps = [tp for topic in per_partition for tp in by_topic[topic]]
        if tps:  # one request each, a few at a time: the store answers them side by side
            started = time.perf_counter()
            with ThreadPoolExecutor(min(self.threads, len(tps))) as pool:
                found = list(pool.map(lambda tp: self._list_partition(lister, tp, since[tp], upto.get(tp)), tps))
            took = time.perf_counter() - started
            met: dict[TopicPartition, int] = {}
            requests: dict[TopicPartition, int] = {}
            for tp, (files, cut, met[tp], requests[tp]) in zip(
                tps, found, strict=True
            ):  # learnt here, not on the pool's threads
                self._learn_partition(tp, files)
                if cut is not None:
                    self.cut[tp] = cut
                if files:
                    out[tp] = files
            for topic in per_partition:
                shape = self._topics[topic]
                if not shape.keys:  # probed: it holds at least the keys its windows met
                    shape.keys = sum(met[tp] for tp in by_topic[topic])
                n = len(by_topic[topic])
                self._count(topic, sum(requests[tp] for tp in by_topic[topic]), took * n / len(tps))
        return out

    def _count(self, topic: str, requests: int, seconds: float) -> None:
        self.requests += requests
        if self.metrics is not None:
            self.metrics.listings.labels(topic).inc(requests)
            self.metrics.listing_seconds.labels(topic).inc(seconds)

    def _per_partition(self, topic: str, tps: list[TopicPartition]) -> bool:
        if self.pattern.partition_prefix(tps[0]) is None:
            return False
        shape = self._topics.get(topic)
        if shape is None:
            return True  # never listed: probed a window per partition
        if any(shape.widths.get(tp.partition) == UNSORTED for tp in tps):
            return False
        return shape.keys > KEYS_PER_REQUEST * len(tps)

    def _learn(self, topic: str, listed: Mapping[TopicPartition, list[StoredFile]], keys: int) -> None:
        """What a full listing of ``topic`` said: its keys, and its partitions' name widths (those it
        kept no file of stay as known)."""
        known = self._topics.get(topic)
        self._topics[topic] = _TopicShape(keys=keys, widths=dict(known.widths) if known else {})
        for tp, files in listed.items():
            widths = {f.digits for f in files}
            sorted_names = len(widths) == 1 and any(f.padded for f in files)
            self._topics[tp.topic].widths[tp.partition] = widths.pop() if sorted_names else UNSORTED

    def _list_partition(
        self, lister: Lister, tp: TopicPartition, offset: int, upto: int | None
    ) -> tuple[list[StoredFile], int | None, int, int]:
        """``tp``'s files from ``offset`` on, at most a ``WINDOW`` of them where their names sort by
        offset, where that window was cut (the first file left out's start; None when none was),
        how many of its keys the listing met, and the listings it took. Listed from ``offset``
        where the names' width is known; else from the partition's first name, the files below
        ``offset`` passed over. Where the connector's config gives the width the names were seen
        with, and Connect's offset (``upto``) bounds the starts wanted, the listing's prefix is
        narrowed to the digits every name from ``offset`` to ``upto - 1`` shares (some stores, such
        as SeaweedFS, read a prefix's keys from its first up to ``StartAfter``); a narrowed listing
        whose first file does not start at ``offset`` (a gap, an orphan, a name of another width)
        is done again on the partition's prefix."""
        prefix = self.pattern.partition_prefix(tp)
        assert prefix is not None  # _per_partition checked the pattern has one
        width = self._topics[tp.topic].widths.get(tp.partition)
        after, narrowed = None, None
        told = self._configured.get(tp.topic)  # another width: listed from the first name, where either sorts
        if width and told in (None, width) and upto is not None and len(str(upto)) < width:  # no longer name
            after = f"{prefix}{offset - 1:0{width}d}" if offset > 0 else None
            if upto > offset and told == width:
                narrowed = prefix + commonprefix([f"{offset:0{width}d}", f"{upto - 1:0{width}d}"])
        files: list[StoredFile] = []
        met = requests = 0
        if narrowed is not None and narrowed != prefix:
            listing = iter(lister.list(narrowed, start_after=after, page=WINDOW + 1))
            files, met = self._take(listing, tp, offset, WINDOW + 1)
            requests += 1
            if not (_sorts(files) and files[0].digits == width):
                files = []  # names of another width under the narrowed prefix: the partition's prefix
        if not files or files[0].start_offset != offset:  # not the file the offset says comes next
            listing = iter(lister.list(prefix, start_after=after, page=WINDOW + 1))
            files, met = self._take(listing, tp, offset, WINDOW + 1)
            requests += 1
        cut = None
        if len(files) > WINDOW:
            if _sorts(files) and width in (None, files[0].digits):
                cut = files[WINDOW].start_offset
                del files[WINDOW:]
            else:  # a window in key order is not one in offset order: the partition whole
                rest, more = self._take(listing, tp, offset, None)
                files, met = files + rest, met + more
        files.sort(key=lambda f: f.start_offset)
        return files, cut, met, requests

    def _take(
        self, listing: Iterator[Listed | tuple[str, int]], tp: TopicPartition, offset: int, n: int | None
    ) -> tuple[list[StoredFile], int]:
        """The next ``n`` (all, when None) files of ``tp`` starting at or above ``offset`` in
        ``listing``, and how many of ``tp``'s keys were met; the listing stops there (a page not
        yet fetched is not)."""
        files: list[StoredFile] = []
        met = 0
        for listed in listing:
            f = self.pattern.parse(*listed)
            if f is None or f.tp != tp:
                continue
            met += 1
            if f.start_offset >= offset:
                files.append(f)
                if n is not None and len(files) >= n:
                    break
        return files, met

    def _learn_partition(self, tp: TopicPartition, files: list[StoredFile]) -> None:
        """A partition listing's names: a width seen the first time, or ``UNSORTED`` (its topic is
        listed whole from the next round) when they disagree with it or are not padded."""
        shape = self._topics[tp.topic]
        width = shape.widths.get(tp.partition)
        widths = {f.digits for f in files} | ({width} if width else set())
        if len(widths) > 1 or (files and width is None and not any(f.padded for f in files)):
            shape.widths[tp.partition] = UNSORTED
        elif files and width is None:
            shape.widths[tp.partition] = files[0].digits


def _sorts(files: list[StoredFile]) -> bool:
    """Whether names in key order are in offset order: one width, zero-padded."""
    return len({f.digits for f in files}) == 1 and any(f.padded for f in files)
