"""The chaos run's end: every fault undone, the tables caught up with Kafka's log ends
(:func:`quiesce`), then the check of exactly once (:func:`verify`): ids lost or duplicated, the
upsert table against its model, each partition's ``txn`` against Connect's committed offset,
files outside the roots, and Spark's read against the independent reader's (delta-rs for the
Delta tables, pyiceberg for the Iceberg one, whose offsets are its newest snapshot's). In a
``--peer`` run, the same for Apache Iceberg's sink: its group caught up (:func:`peer_quiesce`), its
table's ids lost and duplicated (:func:`peer_outcome`)."""

from __future__ import annotations

import json
import logging
import signal
import time
from collections import Counter
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from lakegate_stack import s3 as s3mod
from lakegate_stack.chaos.producer import upsert_model
from lakegate_stack.chaos.report import ChaosReport, upsert_mismatches_of
from lakegate_stack.chaos.settings import (
    ICEBERG_TABLE,
    PARTITIONS,
    PEER_TABLE,
    S3_ENV,
    UPSERT_TABLE,
    ChaosError,
    claimed,
    signal_process,
    wait_until,
)
from lakegate_stack.delta_read import live_rows

if TYPE_CHECKING:
    from lakegate_stack.chaos.run import ChaosRun

logger = logging.getLogger(__name__)


def log_ends(run: ChaosRun) -> dict[tuple[str, int], int]:
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.admin import OffsetSpec

    assert run.kafka is not None
    admin = KafkaAdminClient(bootstrap_servers=run.kafka.bootstrap_servers)
    try:
        tps = [TopicPartition(t, p) for t in run.topics for p in range(PARTITIONS)]
        result = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in tps})
        return {(tp.topic, tp.partition): int(getattr(v, "offset", v)) for tp, v in result.items()}
    finally:
        admin.close()


def connect_committed(run: ChaosRun) -> dict[tuple[str, int], int]:
    """The storage sinks' committed offsets (their ``connect-<connector>`` groups)."""
    out: dict[tuple[str, int], int] = {}
    for name in run.connectors:
        out.update(group_committed(run, f"connect-{name}"))
    return out


def group_committed(run: ChaosRun, group: str) -> dict[tuple[str, int], int]:
    """One consumer group's committed offsets."""
    from kafka import KafkaAdminClient

    assert run.kafka is not None
    admin = KafkaAdminClient(bootstrap_servers=run.kafka.bootstrap_servers)
    try:
        offsets = admin.list_group_offsets({group: None})[group]
        return {(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items()}
    finally:
        admin.close()


def peer_outcome(run: ChaosRun) -> dict[str, Any]:
    """What Apache Iceberg's sink landed in :data:`PEER_TABLE`, read by pyiceberg: ids missing and
    duplicated against every record of topics a and b, its snapshots, its tasks' states, and how
    long :func:`peer_quiesce` waited for it after Lakegate's tables had caught up."""
    assert run.producer is not None and run.peer_connector is not None
    table = peer_table(run)
    ids = table_ids(table)
    snapshots = len(table.snapshots()) if table is not None else 0
    counts = Counter(ids)
    produced = run.producer.produced
    live = next(w for w in run.workers if w.process and w.process.running())
    tasks = [t["state"] for t in live.client().status(run.peer_connector)["tasks"]]
    lost = [i for i in range(produced) if i not in counts]
    return {
        "records_produced": produced,
        "records_in_table": len(ids),
        "lost": len(lost),
        "lost_ranges": id_ranges(lost)[:20],  # where the loss fell (ids are produced in order)
        "duplicated": sum(c - 1 for c in counts.values() if c > 1),
        "snapshots": snapshots,
        "task_states": tasks,
        "waited_s": run.peer_wait_s,  # after Lakegate's tables caught up; the bound is the quiesce timeout
    }


def table_offsets(run: ChaosRun) -> dict[tuple[str, int], int]:
    assert run.service is not None
    out: dict[tuple[str, int], int] = {}
    for table in run.tables:
        body = run.service.call("GET", f"/v1/tables/{table}/offsets").json()
        for topic, parts in body.items():
            out.update({(topic, int(p)): int(o) for p, o in parts.items()})
    return out


def quiesce(run: ChaosRun) -> None:
    """Undo every fault still in effect, then wait for every table to hold Kafka's log ends (and in
    a ``--peer`` run, then for the peer, up to ``peer_quiesce_timeout``)."""
    assert run.service is not None and run.service_proxy and run.s3_proxy
    run.service_proxy.restore()
    run.s3_proxy.slow(0)
    if run.catalog_proxy is not None:
        run.catalog_proxy.restore()
    for sidecar in run.sidecars:
        if sidecar.process.pid:
            signal_process(sidecar.process.pid, signal.SIGCONT)
    if not run.service.process.running():
        run.service.start(timeout=300)
    for worker in run.workers:
        if not (worker.process and worker.process.running()):
            worker.start()
    for i, sidecar in enumerate(run.sidecars):
        if not sidecar.process.running():
            run.sidecars[i] = sidecar.start()
    ends = log_ends(run)
    last: dict[tuple[str, int], int] = {}

    def caught_up() -> bool:
        nonlocal last
        last = table_offsets(run)
        return all(last.get(tp, 0) == end for tp, end in ends.items())

    try:
        bound = max(run.settings.quiesce_timeout, run.settings.records / 250)  # a backlog takes longer
        took = wait_until("the tables to reach Kafka's log ends", caught_up, bound, 2)
    except ChaosError:
        behind = {f"{t}-{p}": (last.get((t, p), 0), e) for (t, p), e in ends.items() if last.get((t, p), 0) != e}
        print(f"chaos: the tables did not catch up; (table, log end) per partition behind: {behind}", flush=True)
        return  # verified as it stands: what is missing is reported as lost
    print(f"chaos: tables caught up {took:.0f}s after the last record", flush=True)
    if run.peer_connector is not None:
        peer_quiesce(run, ends, run.settings.peer_quiesce_timeout)


def peer_quiesce(run: ChaosRun, ends: dict[tuple[str, int], int], bound: float) -> None:
    """Wait for the peer's consumer group to commit topics a and b's log ends, then for its table to
    hold every record produced: its workers commit their offsets when they hand their files to the
    coordinator, before the coordinator's snapshot lands, so offsets at the log end do not mean the
    table is there yet. A peer that never gets there is verified as it stands, after ``bound``."""
    wanted = {tp: end for tp, end in ends.items() if tp[0] in run.topics[:2]}
    group = f"connect-{run.peer_connector}"
    last: dict[tuple[str, int], int] = {}
    started = time.monotonic()

    def caught_up() -> bool:
        nonlocal last
        last = group_committed(run, group)
        return all(last.get(tp, 0) == end for tp, end in wanted.items())

    assert run.producer is not None
    produced = run.producer.produced
    held = 0

    def table_whole() -> bool:
        nonlocal held
        held = len(set(table_ids(peer_table(run))))
        return held >= produced

    try:
        wait_until("the peer to commit Kafka's log ends", caught_up, bound, 2)
        left = max(10.0, bound - (time.monotonic() - started))
        wait_until("the peer's table to hold every record", table_whole, left, 5)
    except ChaosError:
        behind = {f"{t}-{p}": (last.get((t, p), 0), e) for (t, p), e in wanted.items() if last.get((t, p), 0) != e}
        print(
            f"chaos: the peer did not catch up in {time.monotonic() - started:.0f}s: its table holds {held:,} of "
            f"{produced:,} records; (committed, log end) per partition behind: {behind}",
            flush=True,
        )
        run.peer_wait_s = round(time.monotonic() - started, 1)
        return
    run.peer_wait_s = round(time.monotonic() - started, 1)
    print(f"chaos: the peer's table caught up {run.peer_wait_s:.0f}s after Lakegate's", flush=True)


def peer_table(run: ChaosRun) -> Any:
    """:data:`PEER_TABLE` as pyiceberg loads it through the run's catalog; None before the sink's
    first commit made it."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NoSuchTableError

    assert run.s3 is not None and run.catalog is not None
    catalog = load_catalog("chaos-peer", type="rest", uri=run.catalog.uri, **pyiceberg_s3(run.s3.endpoint))
    try:
        return catalog.load_table(PEER_TABLE)
    except NoSuchTableError:
        return None


def table_ids(table: Any) -> list[int]:
    """Every id of a pyiceberg table (none of no table)."""
    if table is None:
        return []
    return [int(i) for i in table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist()]


class TableRead:
    """What the independent reader (delta-rs, or pyiceberg through the run's catalog) finds in one
    table: its rows, the URIs of its data files, its offsets per partition, its Lakegate commits."""

    def __init__(self, run: ChaosRun, table: str, columns: list[str]) -> None:
        assert run.s3 is not None
        self.uri = run.table_uri(table)
        if table == ICEBERG_TABLE:
            self._iceberg(run, table, columns)
        else:
            self._delta(run, table, columns)

    def _delta(self, run: ChaosRun, table: str, columns: list[str]) -> None:
        from deltalake import DeltaTable

        assert run.s3 is not None
        options = {"AWS_ENDPOINT_URL": run.s3.endpoint, "AWS_ALLOW_HTTP": "true", **S3_ENV}
        dt = DeltaTable(self.uri.replace("s3a://", "s3://"), storage_options=options)
        self.rows = live_rows(dt, columns)
        self.files = [p.replace("s3://", "s3a://", 1) for p in dt.file_uris()]
        prefix = f"lakegate-{table}-"
        self.offsets = {
            (topic, p): dt.transaction_version(f"{prefix}{topic}-{p}")
            for topic in [run.tables[table]]
            for p in range(PARTITIONS)
        }
        self.commits = dt.version() + 1

    def _iceberg(self, run: ChaosRun, table: str, columns: list[str]) -> None:
        from pyiceberg.catalog import load_catalog

        assert run.s3 is not None and run.catalog is not None
        catalog = load_catalog("chaos-check", type="rest", uri=run.catalog.uri, **pyiceberg_s3(run.s3.endpoint))
        it = catalog.load_table(table)
        self.rows = it.scan(selected_fields=tuple(columns)).to_arrow().to_pylist()
        self.files = [str(p) for p in it.inspect.files().column("file_path").to_pylist()]
        snapshots = [
            s for s in it.snapshots() if s.summary is not None and "lakegate.offsets" in s.summary.additional_properties
        ]
        self.commits = len(snapshots)
        head = it.current_snapshot()
        held = {}
        for snap in [head] if head is not None else []:
            props = snap.summary.additional_properties if snap.summary is not None else {}
            held = json.loads(props.get("lakegate.offsets", "{}"))
        self.offsets = {(t, int(p)): o for t, parts in held.items() for p, o in parts.items()}


def id_ranges(ids: list[int]) -> list[str]:
    """Sorted ids as runs: ``[1, 2, 3, 7]`` is ``["1-3", "7"]``."""
    runs: list[list[int]] = []
    for i in sorted(ids):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return [f"{a}-{b}" if a != b else str(a) for a, b in runs]


def pyiceberg_s3(endpoint: str) -> dict[str, str]:
    """pyiceberg's settings for the run's S3 server."""
    return {
        "s3.endpoint": endpoint,
        "s3.access-key-id": s3mod.ACCESS_KEY,
        "s3.secret-access-key": s3mod.SECRET_KEY,
        "s3.region": s3mod.REGION,
    }


def verify(run: ChaosRun, duration: float) -> ChaosReport:
    assert run.s3 is not None and run.service is not None and run.producer is not None
    connect = connect_committed(run)
    produced_by_topic = Counter(run.topics[i % 2] for i in range(run.producer.produced))
    ids_all: list[int] = []
    txn_mismatches: list[str] = []
    outside: list[str] = []
    spark_mismatches: list[str] = []
    upsert_rows: list[dict[str, Any]] = []
    commits = 0
    for table, topic in run.tables.items():
        read = TableRead(run, table, ["id", "seq"] if table == UPSERT_TABLE else ["id"])
        ids = [r["id"] for r in read.rows]
        if table == UPSERT_TABLE:
            upsert_rows = read.rows
        else:
            ids_all.extend(ids)
        outside.extend(path for path in read.files if not path.startswith(f"{read.uri}/"))
        for p in range(PARTITIONS):
            held = read.offsets.get((topic, p))
            if held != connect.get((topic, p)):
                txn_mismatches.append(f"{topic}-{p}: table {held}, connect {connect.get((topic, p))}")
        if run.spark_check is not None:
            spark_ids = run.spark_check(run.table_ref(table))
            if sorted(spark_ids) != sorted(ids):
                spark_mismatches.append(f"{table}: Spark read {len(spark_ids)} ids, the independent reader {len(ids)}")
        commits += read.commits
        logger.info("table %s: %d ids (%d produced)", table, len(ids), produced_by_topic.get(topic, 0))
    counts = Counter(ids_all)
    produced = run.producer.produced
    lost = sum(1 for i in range(produced) if i not in counts)
    duplicated = sum(c - 1 for c in counts.values() if c > 1)
    upsert_mismatches = upsert_mismatches_of(upsert_rows, upsert_model(produced))
    recoveries = [f.recovery_s for f in run.faults if f.recovery_s is not None]
    assert run.s3_proxy and run.service_proxy
    return ChaosReport(
        seed=run.settings.seed,
        records_produced=produced,
        records_in_table=len(ids_all),
        lost=lost,
        duplicated=duplicated,
        faults_by_kind=dict(Counter(f.kind for f in run.faults)),
        commits=commits,
        duration_s=round(duration, 1),
        recovery_s=max(recoveries) if recoveries else None,
        recovery_s_all=recoveries,
        txn_mismatches=txn_mismatches,
        outside_roots=outside,
        spark_checked=run.spark_check is not None,
        spark_mismatches=spark_mismatches,
        faults=run.faults,
        orphans_made=len(claimed(run)),
        proxies={p.name: asdict(p.stats()) for p in (run.s3_proxy, run.service_proxy, run.catalog_proxy) if p},
        upsert_keys=len(upsert_rows),
        upsert_mismatches=upsert_mismatches,
        peer=peer_outcome(run) if run.peer_connector is not None else None,
        audits={table: audit_outcome(run, table) for table in run.tables},
    )


AUDIT_SAMPLE = 500  # records each table's audit reads back from Kafka


def audit_outcome(run: ChaosRun, table: str) -> dict[str, Any]:
    """The service's own audit of ``table`` after the run (docs/operations.md): its verdict, the
    records it compared with Kafka, and every finding that is not informational."""
    assert run.service is not None
    response = run.service.call("GET", f"/v1/tables/{table}/audit?sample={AUDIT_SAMPLE}&seed={run.settings.seed}")
    if response.status_code != 200:
        return {"ok": False, "error": f"{response.status_code}: {response.text[:300]}"}
    report = response.json()
    return {
        "ok": report["ok"],
        "sampled": report["counts"]["sampled"],
        "matched": report["counts"]["matched"],
        "rows": report["counts"]["rows"],
        "duration_ms": report["duration_ms"],
        "findings": [
            f"{f['severity']} {f['kind']}: {f['message']}" for f in report["findings"] if f["severity"] != "info"
        ],
    }
