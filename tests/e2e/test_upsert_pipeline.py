"""Upsert and Debezium CDC tables through the whole pipeline: Kafka, a Connect worker running the S3
sink with JSON keys and values (as a Debezium deployment configures ``JsonConverter``), sidecars,
and the service.

One topic carries plain upserts and tombstones (``delete_on_tombstone``), the other Debezium's
change envelopes (``cdc: debezium``) with the tombstone Debezium sends after each delete. Each
kind of change is produced into two topics, one feeding a Delta table and one an Iceberg table (in
Iceberg's REST catalog server, its warehouse on the S3 server), each through a connector of its own. Keys are updated many times across rounds.
The plain upsert Delta table and the Debezium Iceberg table are partitioned by ``bucket(8, id)``
and ``truncate(50, n)`` / ``truncate(50, visits)``: each update moves its key to another partition
more often than not, and every row must end where its value puts it, its old row gone.
At quiesce each table equals a model computed here from the produced records (one row per live
key, latest value), read by delta-rs or by pyiceberg, and every partition's offset in the table
(a Delta ``txn``, the Iceberg snapshot's ``lakegate.offsets``) equals Connect's committed offset.

Faults, each armed before a batch is produced, so whichever round meets it is the one hit (no
timing to win or lose): batch 1 kills the service inside an upsert round, after its new files
(and deletion vectors) are written and before the Delta commit; batch 2 SIGKILLs both sidecars;
batch 3 kills the service right after a round's commit, before it noted it. Whichever table's round
reaches an armed point first (Delta or Iceberg) is the one hit. The service and
the sidecars are started again with the same configuration, as their supervisor would.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

from deltalake import DeltaTable
from kafka import KafkaProducer, TopicPartition

from commit_service import faults
from lakegate_stack import s3 as s3mod
from lakegate_stack.connect import ConnectWorker, s3_sink_config
from lakegate_stack.delta_read import live_rows
from lakegate_stack.iceberg_catalog import IcebergRestCatalog
from lakegate_stack.kafka import KafkaBroker
from lakegate_stack.s3 import S3Server
from lakegate_stack.services import ServiceProcess, SidecarProcess, sidecar_config
from tests.kafka_helpers import committed_offsets, create_topic, end_offsets

BUCKET, PARTITIONS, KEYS, BATCHES, PER_BATCH = "lake-upsert", 3, 60, 4, 150
STEP = 50  # the partitioned tables' truncate width of n / visits (0..149: three partitions)
S3_ENV = {"AWS_ACCESS_KEY_ID": s3mod.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": s3mod.SECRET_KEY, "AWS_REGION": s3mod.REGION}
# table -> (topic, connector, extra table keys); each kind of change goes to two topics (a topic
# feeds one table): one for a Delta table, one for an Iceberg table
# one table of each format is partitioned: by the key's bucket (each round's merge reads only its
# keys' buckets) and by a value column that changes with each update (keys move partitions)
TABLES = {
    "users": (
        "users",
        "users-sink",
        {"delete_on_tombstone": True, "partition_by": ["bucket(8, id)", f"truncate({STEP}, n)"]},
    ),
    "customers": ("db.inventory.customers", "customers-sink", {"cdc": "debezium"}),
    "ice.users": ("ice-users", "ice-users-sink", {"delete_on_tombstone": True, "format": "iceberg"}),
    "ice.customers": (
        "ice-customers",
        "ice-customers-sink",
        {"cdc": "debezium", "format": "iceberg", "partition_by": ["bucket(8, id)", f"truncate({STEP}, visits)"]},
    ),
}
MODEL = {"users": "users", "customers": "customers", "ice.users": "users", "ice.customers": "customers"}
COLUMNS = {"users": ["id", "name", "n"], "customers": ["id", "email", "visits"]}
SIDECARS = "sidecars"
FAULTS = {1: faults.MID_MERGE, 2: SIDECARS, 3: faults.AFTER_COMMIT}  # batch -> what fails


def users_changes(rng: random.Random, batch: int) -> list[tuple[int, Any]]:
    out: list[tuple[int, Any]] = []
    for i in range(PER_BATCH):
        key = rng.randrange(KEYS)
        out.append((key, None if rng.random() < 0.15 else {"id": key, "name": f"b{batch}-{i}", "n": i}))
    return out


def customers_changes(rng: random.Random, batch: int, live: dict[int, dict[str, Any]]) -> list[tuple[int, Any]]:
    out: list[tuple[int, Any]] = []
    for i in range(PER_BATCH):
        key = rng.randrange(KEYS)
        if key in live and rng.random() < 0.2:
            out.append((key, {"before": live.pop(key), "after": None, "op": "d", "source": {"lsn": i}, "ts_ms": i}))
            out.append((key, None))  # Debezium's tombstone after a delete
        else:
            after = {"id": key, "email": f"c{key}@b{batch}.example", "visits": i}
            op = "u" if key in live else "c"
            out.append((key, {"before": live.get(key), "after": after, "op": op, "source": {"lsn": i}, "ts_ms": i}))
            live[key] = after
    return out


def apply_upserts(model: dict[int, Any], changes: list[tuple[int, Any]]) -> None:
    for key, value in changes:
        if value is None:
            model.pop(key, None)
        else:
            model[key] = value


def produce(bootstrap: str, topic: str, changes: list[tuple[int, Any]]) -> None:
    """Each key to one partition (key % PARTITIONS), in order; JSON keys and values, None a tombstone."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20)
    try:
        futures = [
            producer.send(
                topic,
                key=json.dumps({"id": key}).encode(),
                value=None if value is None else json.dumps(value).encode(),
                partition=key % PARTITIONS,
            )
            for key, value in changes
        ]
        producer.flush(60)
        for f in futures:
            f.get(timeout=60)
    finally:
        producer.close()


def table_rows(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    assert len({r["id"] for r in rows}) == len(rows), "a key is in the table twice"
    return {r["id"]: r for r in rows}


def path_of(name: str) -> str:
    """Where a table lives: a Delta table at the bucket's top, an Iceberg one under the warehouse."""
    return f"s3a://{BUCKET}/warehouse/{name.replace('.', '/')}" if "." in name else f"s3a://{BUCKET}/{name}"


def test_upsert_and_debezium_tables_equal_the_model_through_the_pipeline(
    tmp_path: Path, kafka_broker: KafkaBroker, connect_worker: ConnectWorker, s3_server: S3Server
) -> None:
    s3_server.create_bucket(BUCKET)
    catalog = IcebergRestCatalog(tmp_path / "iceberg-rest", f"s3a://{BUCKET}/warehouse", s3_server).start()
    bootstrap = kafka_broker.bootstrap_servers
    for topic in {topic for topic, _, _ in TABLES.values()}:
        create_topic(bootstrap, topic, PARTITIONS)
    tables = [
        {
            "name": name,
            "path": path_of(name),
            "topics": [topic],
            "mode": "upsert",
            "key": ["id"],
            "commit": {"interval_seconds": 2},
            **extra,
        }
        for name, (topic, _, extra) in TABLES.items()
    ]
    fault_dir = tmp_path / "faults"
    fault_dir.mkdir()
    service = ServiceProcess(
        tmp_path,
        tables,
        [f"s3a://{BUCKET}/"],
        s3={"endpoint": s3_server.endpoint, "access_key": s3mod.ACCESS_KEY, "secret_key": s3mod.SECRET_KEY},
        env={faults.ENV: str(fault_dir)},
        catalogs=[{"name": "lake", "type": "rest", "uri": catalog.uri}],
    ).start()
    client = connect_worker.client()
    sidecars: list[SidecarProcess] = []
    models: dict[str, dict[int, Any]] = {"users": {}, "customers": {}}
    try:
        for name, (topic, connector, _) in TABLES.items():
            config = s3_sink_config(
                [topic],
                BUCKET,
                s3_server.endpoint,
                s3mod.ACCESS_KEY,
                s3mod.SECRET_KEY,
                prefix=f"landing/{name}/",
                output="jsonl",
                tasks=1,
                **{
                    "format.output.fields": "key,value,offset,timestamp",
                    "key.converter": "org.apache.kafka.connect.json.JsonConverter",
                    "key.converter.schemas.enable": "false",
                },
            )
            client.put_connector(connector, config)
            client.wait_running(connector, tasks=1)
            landing = {"kind": "s3", "bucket": BUCKET, "prefix": f"landing/{name}/", "endpoint": s3_server.endpoint}
            config = sidecar_config(connect_worker, [connector], bootstrap, landing, service.url)
            sidecars.append(SidecarProcess(tmp_path, f"sidecar-{name}", config, env=S3_ENV).start())

        rng, live = random.Random(5), {}
        for batch in range(BATCHES):
            fault = FAULTS.get(batch)
            if fault in (faults.MID_MERGE, faults.AFTER_COMMIT):
                (fault_dir / fault).touch()
            users = users_changes(rng, batch)
            apply_upserts(models["users"], users)
            customers = customers_changes(rng, batch, live)
            for name, (topic, _, _) in TABLES.items():  # the same changes into each table's topic
                produce(bootstrap, topic, users if MODEL[name] == "users" else customers)
            if fault == SIDECARS:
                for proc in sidecars:
                    proc.kill()
                    proc.start()
            elif fault is not None:
                wait_crashed(service, fault_dir / fault)
                service.start()
            wait_committed(service, bootstrap)  # each batch its own rounds: keys change across commits
        models["customers"] = dict(live)
        connect_by_table = {
            name: committed_offsets(bootstrap, f"connect-{connector}") for name, (_, connector, _) in TABLES.items()
        }
    finally:
        for proc in sidecars:
            proc.stop()
        for _, connector, _ in TABLES.values():
            client.delete_connector(connector)
        service.stop()

    try:
        for name, (topic, _, extra) in TABLES.items():
            columns = COLUMNS[MODEL[name]]
            expected = {k: {c: v[c] for c in columns} for k, v in models[MODEL[name]].items()}
            if extra.get("format") == "iceberg":
                rows, offsets = iceberg_table(catalog, s3_server, name, columns)
            else:
                rows, offsets = delta_table(s3_server, name, topic, columns)
            assert rows == expected, name
            assert offsets == connect_by_table[name], name
        assert_placed_users(s3_server)
        assert_placed_customers(catalog, s3_server, models["customers"])
    finally:
        catalog.stop()


def delta_table(
    s3_server: S3Server, name: str, topic: str, columns: list[str]
) -> tuple[dict[int, dict[str, Any]], dict[TopicPartition, int]]:
    """The Delta table's rows by key (read by delta-rs) and its partitions' ``txn`` offsets."""
    options = {"AWS_ENDPOINT_URL": s3_server.endpoint, "AWS_ALLOW_HTTP": "true", **S3_ENV}
    table = DeltaTable(f"s3://{BUCKET}/{name}", storage_options=options)
    assert table.version() + 1 >= BATCHES, name  # each batch committed in its own round(s)
    offsets = {}
    for p in range(PARTITIONS):
        version = table.transaction_version(f"lakegate-{name}-{topic}-{p}")
        if version is not None:
            offsets[TopicPartition(topic, p)] = version
    return table_rows(live_rows(table, columns)), offsets


def assert_placed_users(s3_server: S3Server) -> None:
    """Every row of the partitioned Delta table is in the partition its ``n`` names (the partition
    values delta-rs reads from the log), however often its key moved."""
    options = {"AWS_ENDPOINT_URL": s3_server.endpoint, "AWS_ALLOW_HTTP": "true", **S3_ENV}
    rows = live_rows(DeltaTable(f"s3://{BUCKET}/users", storage_options=options), ["id", "n", "n_trunc"])
    wrong = [r for r in rows if r["n_trunc"] != r["n"] - r["n"] % STEP]
    assert rows and not wrong, wrong[:5]


def assert_placed_customers(catalog: IcebergRestCatalog, s3_server: S3Server, model: dict[int, Any]) -> None:
    """pyiceberg's scan of each ``visits`` range (pruned by the ``truncate`` partition: a row in
    another partition would not be read) holds exactly the model's keys in that range."""
    from pyiceberg.expressions import And, GreaterThanOrEqual, LessThan

    table = rest_table(catalog, s3_server, "ice.customers")
    for low in range(0, PER_BATCH, STEP):
        pruned = And(GreaterThanOrEqual("visits", low), LessThan("visits", low + STEP))
        got = sorted(
            r["id"] for r in table.scan(row_filter=pruned, selected_fields=("id", "visits")).to_arrow().to_pylist()
        )
        assert got == sorted(k for k, v in model.items() if low <= v["visits"] < low + STEP), low


def rest_table(catalog: IcebergRestCatalog, s3_server: S3Server, name: str) -> Any:
    from pyiceberg.catalog import load_catalog

    properties = {
        "s3.endpoint": s3_server.endpoint,
        "s3.access-key-id": s3mod.ACCESS_KEY,
        "s3.secret-access-key": s3mod.SECRET_KEY,
        "s3.region": s3mod.REGION,
    }
    return load_catalog("check", type="rest", uri=catalog.uri, **properties).load_table(name)


def iceberg_table(
    catalog: IcebergRestCatalog, s3_server: S3Server, name: str, columns: list[str]
) -> tuple[dict[int, dict[str, Any]], dict[TopicPartition, int]]:
    """The Iceberg table's rows by key (read by pyiceberg through the REST catalog, position
    deletes applied by it) and the offsets of its newest snapshot."""
    table = rest_table(catalog, s3_server, name)
    assert len(table.snapshots()) >= BATCHES, name  # each batch committed in its own round(s)
    rows = [{c: r[c] for c in columns} for r in table.scan().to_arrow().to_pylist()]
    stored = json.loads(table.current_snapshot().summary["lakegate.offsets"])
    offsets = {TopicPartition(t, int(p)): o for t, ps in stored.items() for p, o in ps.items()}
    return table_rows(rows), offsets


def wait_crashed(service: ServiceProcess, armed: Path, timeout: float = 300) -> None:
    """Until the service killed itself at the armed point (bounded): the point's file is gone."""
    deadline = time.monotonic() + timeout
    while service.process.running():
        assert time.monotonic() < deadline, f"the service never reached {armed.name}"
        time.sleep(0.5)
    assert not armed.exists(), f"the service died before {armed.name}:\n{service.process.log_tail()}"


def wait_committed(service: ServiceProcess, bootstrap: str, timeout: float = 300) -> None:
    """Until every table's offsets reach its topic's log ends (bounded)."""
    partitions = {name: [TopicPartition(topic, p) for p in range(PARTITIONS)] for name, (topic, _, _) in TABLES.items()}
    ends = end_offsets(bootstrap, [tp for tps in partitions.values() for tp in tps])
    deadline, behind = time.monotonic() + timeout, {}
    while time.monotonic() < deadline:
        behind = {}
        for name, tps in partitions.items():
            offsets = service.call("GET", f"/v1/tables/{name}/offsets").json()
            behind.update(
                {
                    (name, str(tp)): offsets.get(tp.topic, {}).get(str(tp.partition))
                    for tp in tps
                    if offsets.get(tp.topic, {}).get(str(tp.partition)) != ends[tp]
                }
            )
        if not behind:
            return
        time.sleep(0.25)
    raise AssertionError(f"tables behind the log ends {ends}: {behind}")
