"""What the status page shows, as frozen dataclasses built from the coordinator's reads.

:func:`build_view` is the only function: the page handlers (:mod:`commit_service.http.status_page`) call it
and hand the result to the Jinja templates, which only format. Nothing here does I/O beyond the
coordinator's in-memory reads; Kafka's log ends come from the :class:`~commit_service.observe.lag.LagSampler`'s
last reading, so a page view never waits on Kafka or Spark.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from markupsafe import Markup

from commit_service.coordination.coordinator import Coordinator
from commit_service.coordination.sidecars_seen import SidecarSeen
from commit_service.domain.leases import Lease
from commit_service.observe.freshness_plot import freshness_svg
from commit_service.observe.lag import EndsReading, LagHistory, LagSource, partition_lags, total_lag
from lakegate_core.status import CommitRecord, DeadLetter, DeadLetterState, TableSummary
from lakegate_core.types import PartitionOffsets, TopicPartition

RECENT_COMMITS = 20
DEAD_LETTERS_SHOWN = 50


@dataclass(frozen=True)
class PartitionRow:
    """One partition of a table: where the table, Connect and Kafka are, and who holds its lease."""

    tp: TopicPartition
    committed: int | None
    buffered_to: int | None  # the end of the buffered files + 1
    connect: int | None
    log_end: int | None
    lag: int | None
    lag_source: LagSource | None
    lease: Lease | None
    lease_age_s: float | None
    start: dict[str, object] | None = None  # where its ledger began and why (tables[].start), if decided here


@dataclass(frozen=True)
class TableView:
    summary: TableSummary
    partitions: tuple[PartitionRow, ...]
    lag: int | None  # every partition's lag summed
    oldest_pending_age_s: float | None
    plot: Markup


@dataclass(frozen=True)
class CommitView:
    record: CommitRecord
    freshness_s: float | None  # commit time minus VTTS: how old the newest-guaranteed data was
    job_links: tuple[tuple[int, str], ...]  # (Spark job id, its page in the Spark UI)


@dataclass(frozen=True)
class SidecarView:
    seen: SidecarSeen
    age_s: float
    partitions: int  # partitions it holds a lease on


@dataclass(frozen=True)
class StatusView:
    now_ms: int
    ready: bool
    tables: tuple[TableView, ...]
    commits: tuple[CommitView, ...]
    sidecars: tuple[SidecarView, ...]
    dead_letters: tuple[DeadLetter, ...]
    spark_ui: str | None
    kafka: str  # where the lag of the partitions is measured, or why Kafka could not be read


def job_url(spark_ui: str, job_id: int) -> str:
    return f"{spark_ui.rstrip('/')}/jobs/job/?id={job_id}"


def build_view(
    coordinator: Coordinator,
    history: LagHistory,
    ends: EndsReading | None,
    spark_ui: str | None,
    now: float,
    *,
    kafka_configured: bool,
) -> StatusView:
    """The page at ``now`` (epoch seconds)."""
    now_ms = int(now * 1000)
    if not coordinator.ready:
        return StatusView(now_ms, False, (), (), (), (), spark_ui, "")
    leases = coordinator.fencing.leases_now()
    known_ends = ends.offsets if ends is not None and ends.error is None else None
    records = coordinator.commits(None, 1000)
    tables = tuple(
        _table(s, leases, known_ends, history, records, now_ms) for s in sorted(coordinator.summaries(), key=_name)
    )
    commits = tuple(_commit(r, spark_ui) for r in sorted(records, key=_at, reverse=True)[:RECENT_COMMITS])
    held = Counter(lease.holder for lease in leases.values())
    sidecars = tuple(SidecarView(s, max(0.0, now - s.at), held[s.sidecar_id]) for s in coordinator.sidecars())
    letters = tuple(coordinator.dead_letters(None, DeadLetterState.QUARANTINED)[:DEAD_LETTERS_SHOWN])
    if not kafka_configured:
        kafka = "Lag is measured against Connect's committed offsets (no kafka section: Kafka's log ends not read)"
    elif ends is None:
        kafka = "Kafka's log ends: not read yet"
    elif ends.error is not None:
        kafka = f"{ends.error}; lag falls back to Connect's committed offsets"
    else:
        kafka = f"Lag is measured against Kafka's log ends (read {max(0, now_ms - ends.read_at_ms) / 1000:.1f} s ago)"
    return StatusView(now_ms, True, tables, commits, sidecars, letters, spark_ui, kafka)


def _name(s: TableSummary) -> str:
    return s.table


def _at(r: CommitRecord) -> tuple[int, int]:
    return (r.committed_at_ms or 0, r.version)


def _table(
    s: TableSummary,
    leases: dict[TopicPartition, Lease],
    ends: PartitionOffsets | None,
    history: LagHistory,
    records: list[CommitRecord],
    now_ms: int,
) -> TableView:
    lags = partition_lags(s, ends)
    topics = {tp.topic for tp in (*s.offsets, *s.connect_offsets, *s.pending_offsets)}
    tps = set(s.offsets) | set(s.pending_offsets) | set(s.connect_offsets) | set(lags)
    tps |= {tp for tp in leases if tp.topic in topics}
    rows = []
    for tp in sorted(tps):
        lease = leases.get(tp)
        lag = lags.get(tp)
        rows.append(
            PartitionRow(
                tp,
                s.offsets.get(tp),
                s.pending_offsets.get(tp),
                s.connect_offsets.get(tp),
                None if ends is None else ends.get(tp),
                None if lag is None else lag.offsets,
                None if lag is None else lag.source,
                lease,
                None if lease is None else max(0.0, now_ms / 1000 - lease.renewed_at),
                (s.starts or {}).get(str(tp)),
            )
        )
    oldest = None if s.oldest_pending_ms is None else max(0.0, (now_ms - s.oldest_pending_ms) / 1000)
    commit_times = [r.committed_at_ms for r in records if r.table == s.table and r.committed_at_ms is not None]
    plot = freshness_svg(
        history.samples(s.table, now_ms),
        commit_times,
        now_ms,
        history.window_ms,
        f"{s.table}: lag (records) over the last hour; ticks are commits",
    )
    return TableView(s, tuple(rows), total_lag(lags), oldest, plot)


def _commit(r: CommitRecord, spark_ui: str | None) -> CommitView:
    fresh = None
    if r.committed_at_ms is not None and r.vtts is not None:
        fresh = max(0.0, (r.committed_at_ms - r.vtts) / 1000)
    links = tuple((j, job_url(spark_ui, j)) for j in r.spark_jobs) if spark_ui else ()
    return CommitView(r, fresh, links)
