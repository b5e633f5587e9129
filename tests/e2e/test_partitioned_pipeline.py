"""Partitioned tables through the whole pipeline, as a team meets them: Kafka, the S3 sink on a real
Connect worker writing Parquet of a schemaful value (``ts`` a Connect ``Timestamp``, no envelope),
sidecars, the service; a Delta table partitioned by ``day(ts)`` and an Iceberg table (Apache
Iceberg's REST catalog, warehouse on the S3 server) by ``hour(ts)``, one topic each.

Three batches per topic, each committed before the next is produced:

0. every record in one hour of one day: the Delta table adds each of these files where the sink
   wrote it (in place, with its day as ``partitionValues``);
1. each partition's records alternate between 23:xx of one day and 00:xx of the next, so every file
   of two records or more straddles a day and an hour: split by Spark, one file per partition. The
   ``commit.before`` crash point is armed: the service SIGKILLs itself in the first round to reach
   it, with that round's split files written, and is started again;
2. 05:xx and 06:xx of the next day, one record in seven without a ``ts`` (the null partition);
   ``commit.after`` armed: a commit lands and the service dies before it answers anyone.

At quiesce every field of every record reads back as sent (delta-rs, pyiceberg); every row lies
in the partition of its ``ts``; the Delta table's in-place files are exactly the sink's files whose
rows fall in one day; each table's offsets equal Connect's committed offsets; and a filter on one
day (Delta: delta-rs's and Spark's file plans) or one hour (Iceberg: pyiceberg's plan) reads only
that partition's files. The Iceberg table rewrites every file: the sink writes timestamps in
milliseconds, which not every Iceberg reader reads (docs/iceberg.md).
"""

from __future__ import annotations

import io
import re
import time
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable
from pyiceberg.expressions import And, GreaterThanOrEqual, LessThan

from lakegate_stack import s3 as s3mod
from lakegate_stack.connect import ConnectWorker
from lakegate_stack.fidelity import same
from lakegate_stack.iceberg_catalog import IcebergRestCatalog
from lakegate_stack.kafka import KafkaBroker
from lakegate_stack.s3 import S3Server
from lakegate_stack.services import ServiceProcess, SidecarProcess
from tests.fixtures import ICEBERG_BUCKET, pyiceberg_rest
from tests.kafka_helpers import committed_offsets, create_topic
from tests.partition_helpers import text
from tests.pipeline_helpers import S3_ENV, assert_iceberg_offsets, produce, sink_with_sidecar, wait_committed

PARTITIONS, PER_BATCH = 2, 150
DAY = datetime(2026, 11, 27, tzinfo=UTC)
DELTA, ICEBERG = "clicks_day", "e2e.clicks_hour"
DELTA_ROOT = f"s3a://{ICEBERG_BUCKET}/{DELTA}"
# table -> (topic, connector, landing prefix): the Delta table's sink writes inside its root (in place)
FEEDS = {
    DELTA: ("pt-day", "pt-day-sink", f"{DELTA}/landing/"),
    ICEBERG: ("pt-hour", "pt-hour-sink", "landing/pt-hour/"),
}
# a Connect Struct schema (JsonConverter with schemas on): ts is Connect's Timestamp logical type
VALUE_SCHEMA = {
    "type": "struct",
    "name": "click",
    "optional": False,
    "fields": [
        {"field": "id", "type": "int64", "optional": False},
        {"field": "ts", "type": "int64", "optional": True, "name": "org.apache.kafka.connect.data.Timestamp"},
        {"field": "page", "type": "string", "optional": True},
        {"field": "amount", "type": "double", "optional": True},
    ],
}
SINK = {
    "output": "parquet",
    "format.output.envelope": "false",
    "format.output.fields": "value",
    "value.converter.schemas.enable": "true",
}


def when(batch: int, i: int) -> datetime | None:
    """Record ``i``'s ``ts`` in ``batch``: the n-th record of its Kafka partition alternates."""
    n = i // PARTITIONS
    if batch == 0:
        return DAY + timedelta(hours=10, seconds=7 * i)
    if batch == 1:
        return (
            DAY + (timedelta(hours=23, minutes=30) if n % 2 else timedelta(days=1, minutes=30)) + timedelta(seconds=i)
        )
    if i % 7 == 3:
        return None
    return DAY + timedelta(days=1, hours=5 + n % 2, seconds=i)


def record(batch: int, i: int) -> dict[str, Any]:
    """The value as sent (``ts`` a datetime) and as a reader must return it."""
    uid = batch * PER_BATCH + i
    return {"id": uid, "ts": when(batch, i), "page": f"/p/{uid % 13}/{'é' * (uid % 3)}", "amount": uid * 0.25}


def on_the_wire(value: dict[str, Any]) -> dict[str, Any]:
    ts = value["ts"]
    payload = {**value, "ts": None if ts is None else int(ts.timestamp() * 1000)}
    return {"schema": VALUE_SCHEMA, "payload": payload}


def crash_and_restart(service: ServiceProcess, faults: Path, point: str, produce_batch: Any) -> None:
    """Arm ``point``, produce (a round needs new files), wait for the service to SIGKILL itself
    there, start it again."""
    (faults / point).touch()
    produce_batch()
    deadline = time.monotonic() + 300
    while service.process.running():
        assert time.monotonic() < deadline, f"no round reached {point} in 300 s"
        time.sleep(0.2)
    assert not (faults / point).exists(), f"the service died, but not at {point}"
    service.process.kill()  # reaps what is left of the group
    service.start(timeout=300)


def test_straddling_sink_files_land_in_day_and_hour_partitions_through_two_crashes(
    tmp_path: Path,
    kafka_broker: KafkaBroker,
    connect_worker: ConnectWorker,
    s3_server: S3Server,
    s3_rest_catalog: IcebergRestCatalog,
    spark: Any,
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topics = [topic for topic, _, _ in FEEDS.values()]
    for topic in topics:
        create_topic(bootstrap, topic, PARTITIONS)
    common = {"commit": {"interval_seconds": 2}}
    tables = [
        {"name": DELTA, "path": DELTA_ROOT, "topics": ["pt-day"], "partition_by": ["day(ts)"], **common},
        {
            "name": ICEBERG,
            "format": "iceberg",
            "path": f"s3a://{ICEBERG_BUCKET}/warehouse/e2e/clicks_hour",
            "topics": ["pt-hour"],
            "partition_by": ["hour(ts)"],
            **common,
        },
    ]
    faults = tmp_path / "faults"
    faults.mkdir()
    service = ServiceProcess(
        tmp_path,
        tables,
        [f"s3a://{ICEBERG_BUCKET}/"],
        s3={"endpoint": s3_server.endpoint, "access_key": s3mod.ACCESS_KEY, "secret_key": s3mod.SECRET_KEY},
        catalogs=[{"name": "lake", "type": "rest", "uri": s3_rest_catalog.uri}],
        env={"LAKEGATE_TEST_FAULT_DIR": str(faults)},
    ).start()
    sidecars: list[SidecarProcess] = []
    sent: dict[int, dict[str, Any]] = {}

    def produce_batch(batch: int) -> None:
        values = [record(batch, i) for i in range(PER_BATCH)]
        sent.update({v["id"]: v for v in values})
        for topic in topics:
            produce(bootstrap, topic, [(i % PARTITIONS, v["id"], on_the_wire(v)) for i, v in enumerate(values)])

    try:
        for _, (topic, connector, prefix) in FEEDS.items():
            sidecars.append(
                sink_with_sidecar(
                    tmp_path,
                    connect_worker,
                    s3_server,
                    ICEBERG_BUCKET,
                    service,
                    bootstrap,
                    connector,
                    topic,
                    SINK,
                    prefix,
                )
            )
        produce_batch(0)
        wait_committed(service, bootstrap, topics, list(FEEDS), PARTITIONS)
        crash_and_restart(service, faults, "commit.before", lambda: produce_batch(1))
        wait_committed(service, bootstrap, topics, list(FEEDS), PARTITIONS)
        crash_and_restart(service, faults, "commit.after", lambda: produce_batch(2))
        wait_committed(service, bootstrap, topics, list(FEEDS), PARTITIONS)
        connect = {name: committed_offsets(bootstrap, f"connect-{FEEDS[name][1]}") for name in FEEDS}
    finally:
        for proc in sidecars:
            proc.stop()
        for _, connector, _ in FEEDS.values():
            connect_worker.client().delete_connector(connector)
        service.stop()

    check_delta(s3_server, spark, sent, connect[DELTA])
    check_iceberg(s3_server, s3_rest_catalog, sent, connect[ICEBERG])
    # each of the three starts read the Iceberg table from its REST catalog before Spark was up,
    # and Spark's read that followed found the same offsets
    log = service.process.log_path.read_text(errors="replace")
    read = re.findall(rf"table {re.escape(ICEBERG)}: version (-?\d+) read from catalog lake without Spark", log)
    assert len(read) == 3 and read[0] == "-1" and all(int(v) > 0 for v in read[1:]), read
    assert "offsets read at start were behind" not in log


def check_delta(s3_server: S3Server, spark: Any, sent: dict[int, dict[str, Any]], connect: dict[Any, int]) -> None:
    options = {"AWS_ENDPOINT_URL": s3_server.endpoint, "AWS_ALLOW_HTTP": "true", **S3_ENV}
    table = DeltaTable(f"s3://{ICEBERG_BUCKET}/{DELTA}", storage_options=options)
    assert table.metadata().partition_columns == ["ts_day"]
    rows = table.to_pyarrow_table().to_pylist()
    assert_as_sent(sent, rows, derived=lambda v: {"ts_day": v["ts"].date() if v["ts"] else None})

    added = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    day_of = {a["path"]: text(a["partition.ts_day"]) for a in added}
    days = sorted({v["ts"].date().isoformat() for v in sent.values() if v["ts"]})
    assert days == ["2026-11-27", "2026-11-28"]
    for day in days:  # every row in the partition of its day, and delta-rs plans only that day's files
        in_day = table.to_pyarrow_table(filters=[("ts_day", "=", date.fromisoformat(day))]).to_pylist()
        assert sorted(r["id"] for r in in_day) == ids_where(sent, lambda at, day=day: at.date().isoformat() == day)
        planned = table.file_uris(file_pruning_predicate=[("ts_day", "=", day)])
        assert planned and {day_of[relative(uri)] for uri in planned} == {day}, planned
    frame = spark.read.format("delta").load(DELTA_ROOT).where(f"ts >= '{days[1]} 00:00:00'")
    assert sorted(r["id"] for r in frame.select("id").collect()) == ids_where(
        sent, lambda at: at.date().isoformat() == days[1]
    )
    inputs = frame.inputFiles()  # Spark prunes by the generated column from a filter on ts
    assert inputs and {day_of[relative(uri)] for uri in inputs} == {days[1]}, inputs

    # the files added in place are exactly the sink's files whose rows all fall in one day
    one_day = {
        key.split(f"{DELTA}/", 1)[1]: spans
        for key, spans in landing_partitions(s3_server, FEEDS[DELTA][2], lambda t: t.date()).items()
        if len(spans) == 1
    }
    in_place = {path: day for path, day in day_of.items() if path.startswith("landing/")}
    assert in_place == {path: text(next(iter(spans))) for path, spans in one_day.items()}
    assert len(in_place) >= PARTITIONS, "each partition's batch 0 (one day) is in place"
    assert any(not path.startswith("landing/") for path in day_of), "no straddling file was split"
    for tp, offset in connect.items():
        assert table.transaction_version(f"lakegate-{DELTA}-{tp.topic}-{tp.partition}") == offset, tp


def check_iceberg(
    s3_server: S3Server, rest: IcebergRestCatalog, sent: dict[int, dict[str, Any]], connect: dict[Any, int]
) -> None:
    table = pyiceberg_rest(rest, s3_server).load_table(ICEBERG)
    assert [(f.name, str(f.transform)) for f in table.spec().fields] == [("ts_hour", "hour")]
    assert_as_sent(sent, table.scan().to_arrow().to_pylist(), derived=lambda v: {})

    hours = Counter(None if v["ts"] is None else hour_of(v["ts"]) for v in sent.values())
    files = table.inspect.files().to_pylist()
    assert Counter({h: n for h, n in hours.items()}) == sum(
        (Counter({f["partition"]["ts_hour"]: f["record_count"]}) for f in files), Counter()
    ), "every row in the partition of its ts's hour"
    for f in files:  # and each file's own bounds agree with its partition
        bounds = f["readable_metrics"]["ts"]
        if f["partition"]["ts_hour"] is not None:
            assert hour_of(bounds["lower_bound"]) == hour_of(bounds["upper_bound"]) == f["partition"]["ts_hour"], f
    assert not any("/landing/" in f["file_path"] for f in files), "millisecond timestamps are rewritten"
    start = DAY + timedelta(days=1, hours=5)  # one hour: only that hour's files are planned
    planned = table.scan(
        row_filter=And(
            GreaterThanOrEqual("ts", start.isoformat()), LessThan("ts", (start + timedelta(hours=1)).isoformat())
        )
    ).plan_files()
    assert planned and {t.file.partition[0] for t in planned} == {hour_of(start)}
    assert_iceberg_offsets(table, connect)


def hour_of(at: datetime) -> int:
    """Iceberg's ``hour`` of a timestamp (naive: UTC): hours since the epoch."""
    return int((at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()) // 3600


def relative(uri: str) -> str:
    """A Delta data file's path in its table's log, from a reader's URI of it."""
    return unquote(uri.split(f"/{DELTA}/", 1)[1])


def ids_where(sent: dict[int, dict[str, Any]], test: Any) -> list[int]:
    return sorted(i for i, v in sent.items() if v["ts"] is not None and test(v["ts"]))


def assert_as_sent(sent: dict[int, dict[str, Any]], rows: list[dict[str, Any]], derived: Any) -> None:
    """Every record once, every field (and the table's derived columns) as sent."""
    got = {r["id"]: r for r in rows}
    assert len(got) == len(rows) == len(sent), "every record exactly once"
    wrong = [(v, got[i]) for i, v in sent.items() if not same({**v, **derived(v)}, got[i])]
    assert not wrong, wrong[:3]


def landing_partitions(s3_server: S3Server, prefix: str, part: Any) -> dict[str, set[Any]]:
    """Each file the sink wrote under ``prefix``: the partitions (``part`` of each ``ts``) of its rows."""
    client = s3_server.client()
    keys = [
        o["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=ICEBERG_BUCKET, Prefix=prefix)
        for o in page.get("Contents", [])
    ]
    spans = {}
    for key in keys:
        body = client.get_object(Bucket=ICEBERG_BUCKET, Key=key)["Body"].read()
        stamps = pq.read_table(io.BytesIO(body), columns=["ts"]).column("ts").to_pylist()
        spans[key] = {None if t is None else part(t.replace(tzinfo=UTC) if t.tzinfo is None else t) for t in stamps}
    return spans
