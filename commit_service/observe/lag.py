"""How far each table is behind: per partition, and over the last hour for the status page's plot.

Two upper bounds a table's committed offset is measured against:

- **Kafka's log end** (the next offset a producer's record gets), read by :class:`LogEnds` with a
  kafka-python consumer when the service config has a ``kafka`` section;
- **Connect's committed offset**, as the sidecars last reported it with their lease claims
  (``TableSummary.connect_offsets``): always there once a sidecar runs.

:func:`partition_lags` picks the best one per partition. :class:`LagSampler` (a thread started by
:func:`commit_service.http.app.create_app`'s start-up) records one :class:`LagSample` per table every
``SAMPLE_SECONDS`` into :class:`LagHistory`, so a page view never waits on Kafka.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from lakegate_core.connect_group import GroupReadError, KafkaSettings, LazyClient
from lakegate_core.status import TableSummary
from lakegate_core.types import PartitionOffsets, TopicPartition

logger = logging.getLogger(__name__)

SAMPLE_SECONDS = 10.0  # one point of the plot
ENDS_SECONDS = 2.0  # how often Kafka's log ends are read: a stale end would hide the newest records
WINDOW_MS = 3_600_000  # the plot's hour
KAFKA_TIMEOUT_MS = 5_000


class LagSource(str, Enum):
    KAFKA = "kafka"  # Kafka's log end minus the committed offset
    CONNECT = "connect"  # Connect's committed offset minus ours: the records Connect wrote, not yet in Delta


@dataclass(frozen=True)
class PartitionLag:
    """One partition's lag in records and what it was measured against."""

    offsets: int
    source: LagSource


@dataclass(frozen=True)
class EndsReading:
    """One read of Kafka's log ends; ``error`` says why there is none."""

    offsets: PartitionOffsets
    read_at_ms: int
    error: str | None = None


@dataclass(frozen=True)
class LagSample:
    """A table at one moment: its total lag (None: nothing to measure against) and buffer size."""

    at_ms: int
    lag: int | None
    pending_files: int


def partition_lags(summary: TableSummary, ends: PartitionOffsets | None) -> dict[TopicPartition, PartitionLag]:
    """Per partition of ``summary``, records not yet committed: against Kafka's log end when read,
    else against Connect's committed offset. A partition with neither is left out.

    The log end was read up to ``ENDS_SECONDS`` ago, Connect's offset a sidecar round ago: each only
    rises, and Connect's never passes the log end, so the greater of the two is the truer end."""
    lags: dict[TopicPartition, PartitionLag] = {}
    mine = set(summary.offsets) | set(summary.connect_offsets) | set(summary.pending_offsets)
    topics = {tp.topic for tp in mine}  # the log ends read are every table's: count this table's topics only
    starts = summary.starts or {}
    for tp in mine | {tp for tp in ends or {} if tp.topic in topics}:
        # before its first commit a partition lags from where its ledger begins (tables[].start)
        committed = summary.offsets.get(tp, int(starts.get(str(tp), {}).get("offset", 0)))
        if ends is not None and tp in ends:
            end = max(ends[tp], summary.connect_offsets.get(tp, 0))
            lags[tp] = PartitionLag(max(0, end - committed), LagSource.KAFKA)
        elif tp in summary.connect_offsets:
            lags[tp] = PartitionLag(max(0, summary.connect_offsets[tp] - committed), LagSource.CONNECT)
    return lags


def total_lag(lags: dict[TopicPartition, PartitionLag]) -> int | None:
    return sum(lag.offsets for lag in lags.values()) if lags else None


class LagHistory:
    """Per table, the samples of the last ``window_ms``; thread-safe (one writer, page readers)."""

    def __init__(self, window_ms: int = WINDOW_MS, every_seconds: float = SAMPLE_SECONDS) -> None:
        self.window_ms = window_ms
        self._samples: dict[str, deque[LagSample]] = {}
        self._maxlen = int(window_ms / 1000 / every_seconds) + 2
        self._lock = threading.Lock()

    def record(self, table: str, sample: LagSample) -> None:
        with self._lock:
            self._samples.setdefault(table, deque(maxlen=self._maxlen)).append(sample)

    def samples(self, table: str, now_ms: int) -> list[LagSample]:
        with self._lock:
            return [s for s in self._samples.get(table, ()) if now_ms - s.at_ms <= self.window_ms]


class LogEnds(LazyClient):
    """Kafka's log-end offsets, read with one kafka-python consumer made on first use and dropped
    after any error (the next read makes a new one)."""

    def __init__(self, consumer_factory: Callable[[], Any], clock: Callable[[], float] = time.time) -> None:
        super().__init__(consumer_factory)
        self.clock = clock

    @classmethod
    def for_kafka(cls, settings: KafkaSettings) -> LogEnds:
        def make() -> Any:
            return settings.consumer("lakegate-service-lag", KAFKA_TIMEOUT_MS)

        return cls(make)

    def read(self, partitions: Iterable[TopicPartition]) -> EndsReading:
        from kafka import TopicPartition as KafkaPartition

        wanted = sorted(set(partitions))
        now_ms = int(self.clock() * 1000)
        if not wanted:
            return EndsReading(PartitionOffsets(), now_ms)
        kafka_partitions = [KafkaPartition(tp.topic, tp.partition) for tp in wanted]
        try:
            ends = self._call("log ends", lambda c: c.end_offsets(kafka_partitions, timeout_ms=KAFKA_TIMEOUT_MS))
        except GroupReadError as exc:
            return EndsReading(PartitionOffsets(), now_ms, str(exc))
        return EndsReading(
            PartitionOffsets({TopicPartition(k.topic, k.partition): int(v) for k, v in ends.items()}), now_ms
        )


class LagSampler:
    """Every ``every`` seconds read Kafka's log ends (if configured) for the tables' partitions;
    every ``record_every`` seconds record a :class:`LagSample` per table. Its thread is a daemon;
    :meth:`stop` ends it."""

    def __init__(
        self,
        summaries: Callable[[], Sequence[TableSummary]],
        ends: LogEnds | None,
        history: LagHistory,
        clock: Callable[[], float] = time.time,
        every: float = ENDS_SECONDS,
        record_every: float = SAMPLE_SECONDS,
    ) -> None:
        self._summaries = summaries
        self.ends = ends
        self.history = history
        self.clock = clock
        self.every = every
        self.record_every = record_every
        self.last_ends: EndsReading | None = None  # the page shows these, and their error
        self._recorded_at: float | None = None
        self._stop = threading.Event()

    def sample(self) -> None:
        summaries = list(self._summaries())
        if self.ends is not None:
            partitions = {tp for s in summaries for tp in (*s.offsets, *s.connect_offsets, *s.pending_offsets)}
            self.last_ends = self.ends.read(partitions)
        now = self.clock()
        if self._recorded_at is not None and now - self._recorded_at < self.record_every:
            return
        self._recorded_at = now
        known = self.last_ends.offsets if self.last_ends and self.last_ends.error is None else None
        for s in summaries:
            lag = total_lag(partition_lags(s, known))
            self.history.record(s.table, LagSample(int(now * 1000), lag, s.pending_files))

    def start(self) -> None:
        threading.Thread(target=self._run, name="lakegate-lag", daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                self.sample()
            except Exception:  # the plot may miss a point; the loop must not die
                logger.exception("lag sampling failed")
            if self._stop.wait(self.every):
                return

    def stop(self) -> None:
        self._stop.set()
        if self.ends is not None:
            self.ends.close()
