"""Upsert and Debezium CDC tables through the whole pipeline: Kafka, a Connect worker running the S3
sink with JSON keys and values (as a Debezium deployment configures ``JsonConverter``), sidecars,
and the service.

One topic carries plain upserts and tombstones (``delete_on_tombstone``), the other Debezium's
change envelopes (``cdc: debezium``) with the tombstone Debezium sends after each delete. Keys are
updated many times across rounds. At quiesce each table, read by delta-rs, equals a model computed
here from the produced records (one row per live key, latest value), and every partition's
``txn`` equals Connect's committed offset.

Faults, each armed before a batch is produced, so whichever round meets it is the one hit (no
timing to win or lose): batch 1 kills the service inside an upsert round, after its new files
(and deletion vectors) are written and before the Delta commit; batch 2 SIGKILLs both sidecars;
batch 3 kills the service right after a round's Delta commit, before it noted it. The service and
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
from lakegate_stack.kafka import KafkaBroker
from lakegate_stack.s3 import S3Server
from lakegate_stack.services import ServiceProcess, SidecarProcess, sidecar_config
from tests.kafka_helpers import committed_offsets, create_topic, end_offsets

BUCKET, PARTITIONS, KEYS, BATCHES, PER_BATCH = "lake-upsert", 3, 60, 4, 150
S3_ENV = {"AWS_ACCESS_KEY_ID": s3mod.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": s3mod.SECRET_KEY, "AWS_REGION": s3mod.REGION}
# table -> (topic, connector, extra table keys)
TABLES = {
    "users": ("users", "users-sink", {"delete_on_tombstone": True}),
    "customers": ("db.inventory.customers", "customers-sink", {"cdc": "debezium"}),
}
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


def table_rows(table: DeltaTable, columns: list[str]) -> dict[int, dict[str, Any]]:
    rows = live_rows(table, columns)
    assert len({r["id"] for r in rows}) == len(rows), "a key is in the table twice"
    return {r["id"]: r for r in rows}


def test_upsert_and_debezium_tables_equal_the_model_through_the_pipeline(
    tmp_path: Path, kafka_broker: KafkaBroker, connect_worker: ConnectWorker, s3_server: S3Server
) -> None:
    s3_server.create_bucket(BUCKET)
    bootstrap = kafka_broker.bootstrap_servers
    for topic, _, _ in TABLES.values():
        create_topic(bootstrap, topic, PARTITIONS)
    tables = [
        {
            "name": name,
            "path": f"s3a://{BUCKET}/{name}",
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
            produce(bootstrap, TABLES["users"][0], users)
            customers = customers_changes(rng, batch, live)
            produce(bootstrap, TABLES["customers"][0], customers)
            if fault == SIDECARS:
                for proc in sidecars:
                    proc.kill()
                    proc.start()
            elif fault is not None:
                wait_crashed(service, fault_dir / fault)
                service.start()
            wait_committed(service, bootstrap)  # each batch its own rounds: keys change across commits
        models["customers"] = dict(live)
        connect = {
            tp: o
            for _, connector, _ in TABLES.values()
            for tp, o in committed_offsets(bootstrap, f"connect-{connector}").items()
        }
    finally:
        for proc in sidecars:
            proc.stop()
        for _, connector, _ in TABLES.values():
            client.delete_connector(connector)
        service.stop()

    options = {"AWS_ENDPOINT_URL": s3_server.endpoint, "AWS_ALLOW_HTTP": "true", **S3_ENV}
    for name, (topic, _, _) in TABLES.items():
        table = DeltaTable(f"s3://{BUCKET}/{name}", storage_options=options)
        assert table.version() + 1 >= BATCHES, name  # each batch committed in its own round(s)
        columns = ["id", "name", "n"] if name == "users" else ["id", "email", "visits"]
        expected = {k: {c: v[c] for c in columns} for k, v in models[name].items()}
        assert table_rows(table, columns) == expected, name
        for p in range(PARTITIONS):
            tp = TopicPartition(topic, p)
            assert table.transaction_version(f"lakegate-{name}-{topic}-{p}") == connect[tp], tp


def wait_crashed(service: ServiceProcess, armed: Path, timeout: float = 300) -> None:
    """Until the service killed itself at the armed point (bounded): the point's file is gone."""
    deadline = time.monotonic() + timeout
    while service.process.running():
        assert time.monotonic() < deadline, f"the service never reached {armed.name}"
        time.sleep(0.5)
    assert not armed.exists(), f"the service died before {armed.name}:\n{service.process.log_tail()}"


def wait_committed(service: ServiceProcess, bootstrap: str, timeout: float = 300) -> None:
    """Until every table's offsets reach the log ends (bounded)."""
    partitions = [TopicPartition(topic, p) for topic, _, _ in TABLES.values() for p in range(PARTITIONS)]
    ends = end_offsets(bootstrap, partitions)
    deadline, offsets = time.monotonic() + timeout, {}
    while time.monotonic() < deadline:
        offsets = {}
        for name in TABLES:
            offsets.update(service.call("GET", f"/v1/tables/{name}/offsets").json())
        if all(offsets.get(tp.topic, {}).get(str(tp.partition)) == ends[tp] for tp in partitions):
            return
        time.sleep(1)
    raise AssertionError(f"table offsets {offsets} never reached the log ends {ends}")
