"""What a chaos run found: each fault (:class:`FaultRecord`), the report (:class:`ChaosReport`,
the JSON ``scripts/chaos --report`` writes) and its summary for a person; how the upsert table
differs from the model of each key's last change."""

from __future__ import annotations

import logging
import statistics
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)


@dataclass
class FaultRecord:
    """One injected fault: what, at which record, and how long it took to recover."""

    kind: str
    at_record: int
    at_s: float  # seconds since the producer started
    detail: str = ""
    took_s: float = 0.0
    recovery_s: float | None = None  # service faults: SIGKILL (or death) to ready again


@dataclass
class ChaosReport:
    """What ``scripts/chaos --report`` writes."""

    seed: int
    records_produced: int
    records_in_table: int
    lost: int
    duplicated: int
    faults_by_kind: dict[str, int]
    commits: int
    duration_s: float
    recovery_s: float | None  # the slowest service recovery (None: no service fault)
    recovery_s_all: list[float] = field(default_factory=list)
    txn_mismatches: list[str] = field(default_factory=list)
    outside_roots: list[str] = field(default_factory=list)
    spark_checked: bool = False
    spark_mismatches: list[str] = field(default_factory=list)
    faults: list[FaultRecord] = field(default_factory=list)
    orphans_made: int = 0
    proxies: dict[str, Any] = field(default_factory=dict)
    upsert_keys: int = 0  # rows of the upsert table
    upsert_mismatches: list[str] = field(default_factory=list)  # keys whose row is not their last change
    # A --peer run: what Apache Iceberg's own sink landed under the same faults (records, lost,
    # duplicated, snapshots, task states). Reported, not part of ``ok``: Lakegate's verdict.
    peer: dict[str, Any] | None = None
    # Per table, the service's own audit after the run (GET /v1/tables/{table}/audit): its verdict,
    # the records it read back from Kafka and matched, its findings other than informational ones
    audits: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.duplicated
            or self.txn_mismatches
            or self.outside_roots
            or self.spark_mismatches
            or self.upsert_mismatches
            or not all(a.get("ok") for a in self.audits.values())
        ) and (self.records_in_table == self.records_produced)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def upsert_mismatches_of(rows: list[dict[str, Any]], model: dict[int, int]) -> list[str]:
    """How the upsert table's rows differ from the model (key -> last seq): the first 20, then how many more."""
    got: dict[int, int] = {}
    out: list[str] = []
    for r in rows:
        if r["id"] in got:
            out.append(f"key {r['id']} is in the table twice")
        got[r["id"]] = r["seq"]
    for key in sorted(set(got) | set(model)):
        if got.get(key) != model.get(key):
            out.append(f"key {key}: seq {got.get(key)} in the table, {model.get(key)} last produced")
    return out if len(out) <= 20 else [*out[:20], f"... and {len(out) - 20} more"]


def summary(report: ChaosReport) -> str:
    """The report as a few lines for a person."""
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(report.faults_by_kind.items()))
    recov = (
        f"recovery_s max {report.recovery_s}, median {statistics.median(report.recovery_s_all):.1f} "
        f"over {len(report.recovery_s_all)} service restarts"
        if report.recovery_s_all
        else "no service restart"
    )
    spark = (
        "not run"
        if not report.spark_checked
        else "DISAGREES with delta-rs / pyiceberg"
        if report.spark_mismatches
        else "agrees with delta-rs / pyiceberg"
    )
    return "\n".join(
        [
            f"chaos seed {report.seed}: {'OK' if report.ok else 'FAILED'} in {report.duration_s:.0f}s",
            f"  records produced {report.records_produced:,}, in the tables {report.records_in_table:,}, "
            f"lost {report.lost}, duplicated {report.duplicated}",
            f"  faults {sum(report.faults_by_kind.values())}: {kinds}",
            f"  commits {report.commits}; orphans made by the sink {report.orphans_made}; {recov}",
            f"  offset mismatches (txn, snapshot) {len(report.txn_mismatches)}, files outside the roots "
            f"{len(report.outside_roots)}, Spark {spark}",
            f"  upsert table: {report.upsert_keys} keys, {len(report.upsert_mismatches)} not at their last change",
        ]
        + [
            f"  audit {table}: {'OK' if a.get('ok') else 'BREACH'}, {a.get('matched', 0)} of {a.get('sampled', 0)} "
            f"records read back equal"
            + "".join(f"\n    {f}" for f in a.get("findings", []))
            + (f"\n    {a['error']}" if a.get("error") else "")
            for table, a in sorted(report.audits.items())
        ]
        + (
            [
                f"  peer (Apache Iceberg's Kafka Connect sink, topics a and b): in its table "
                f"{report.peer['records_in_table']:,} of {report.peer['records_produced']:,}, lost "
                f"{report.peer['lost']}, duplicated {report.peer['duplicated']}; {report.peer['snapshots']} "
                f"snapshots; waited {report.peer['waited_s']}s for it; tasks {', '.join(report.peer['task_states'])}"
            ]
            if report.peer is not None
            else []
        )
    )
