"""What the pipeline tests (tests/e2e) share: a sink connector with its sidecar, the records of the
shape topics, a producer of JSON records, and a bounded wait for the service's tables to reach
Kafka's log ends."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from kafka import KafkaProducer, TopicPartition

from lakegate_stack import s3 as s3mod
from lakegate_stack.connect import ConnectWorker, confluent_sink_config, s3_sink_config
from lakegate_stack.fidelity import same
from lakegate_stack.s3 import S3Server
from lakegate_stack.services import ServiceProcess, SidecarProcess, sidecar_config
from tests.kafka_helpers import end_offsets

S3_ENV = {"AWS_ACCESS_KEY_ID": s3mod.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": s3mod.SECRET_KEY, "AWS_REGION": s3mod.REGION}
FIELDS = "key,value,offset,timestamp"


def sink_with_sidecar(
    workdir: Path,
    worker: ConnectWorker,
    s3_server: S3Server,
    bucket: str,
    service: ServiceProcess,
    bootstrap: str,
    name: str,
    topic: str,
    sink: dict[str, Any],
    prefix: str | None = None,
) -> SidecarProcess:
    """Connector ``name`` (one task, writing ``topic`` under ``prefix`` of ``bucket``, by default
    ``landing/<name>/``, in ``sink["output"]`` with ``sink``'s other settings and the fields key,
    value, offset, timestamp), running, and a sidecar following it and sending to ``service``, started.
    A ``sink`` with ``format.class`` is Confluent's: its ``topics.dir`` is ``<prefix>topics``, and
    the sidecar reads Confluent's names."""
    prefix = prefix or f"landing/{name}/"
    settings = {k: v for k, v in sink.items() if k != "output"}
    confluent = "format.class" in sink
    if confluent:
        fmt = settings.pop("format.class")
        config = confluent_sink_config(
            [topic],
            bucket,
            s3_server.endpoint,
            s3mod.ACCESS_KEY,
            s3mod.SECRET_KEY,
            format_class=fmt,
            **{"topics.dir": f"{prefix}topics", **settings},
        )
    else:
        config = s3_sink_config(
            [topic],
            bucket,
            s3_server.endpoint,
            s3mod.ACCESS_KEY,
            s3mod.SECRET_KEY,
            prefix=prefix,
            output=sink["output"],
            tasks=1,
            **{"format.output.fields": FIELDS, **settings},
        )
    client = worker.client()
    client.put_connector(name, config)
    client.wait_running(name, tasks=1)
    landing = {"kind": "s3", "bucket": bucket, "prefix": prefix, "endpoint": s3_server.endpoint}
    if confluent:
        landing["naming"] = "confluent"
    sidecar = sidecar_config(worker, [name], bootstrap, landing, service.url)
    return SidecarProcess(workdir, f"sidecar-{name}", sidecar, env=S3_ENV).start()


def shape(topic: str, batch: int, i: int) -> dict[str, Any]:
    """Record ``i`` of ``batch`` for ``topic``: each topic its own fields; later batches grow a
    nested struct and leave a field null in every record of the batch."""
    uid = f"{topic}/{batch}/{i}"
    if topic == "shape-a":
        geo = {"lat": i / 8} if batch == 0 else {"lat": i / 8, "lon": -i / 4, "alt": {"m": i}}
        return {
            "uid": uid,
            "name": f"näme {i}",
            "tags": ["x", f"t{i % 3}"][: i % 3],
            "addr": {"city": "Oslo", "geo": geo},
        }
    if topic == "shape-b":
        meta: dict[str, Any] = (
            {"src": "b"} if batch == 0 else {"src": "b", "depth": {"n": i, "s": "" if i % 2 else None}}
        )
        return {"uid": uid, "amount": i * 0.25, "meta": meta, "note": None if batch == 1 else f"n{i}"}
    return {"uid": uid, "qty": i, "flag": i % 2 == 0, "name": None if i % 5 == 0 else f"c{i}"}


def assert_landed_as_sent(sent: dict[str, dict[str, Any]], rows: list[dict[str, Any]]) -> None:
    """Every record of ``sent`` (values by ``uid``) is one of ``rows`` (what a reader returned),
    once, with every field as sent (the ``_kafka_*`` columns aside)."""
    got = {r["uid"]: r for r in rows}
    assert len(got) == len(rows) == len(sent), "every record exactly once"
    wrong = [
        (uid, v, got[uid])
        for uid, v in sent.items()
        if not same(v, {k: x for k, x in got[uid].items() if not k.startswith("_kafka_")})
    ]
    assert not wrong, wrong[:3]


def produce(bootstrap: str, topic: str, records: list[tuple[int, Any, Any]]) -> None:
    """(partition, key, value) records, keys and values as JSON (None: a tombstone), in order."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20)
    try:
        futures = [
            producer.send(
                topic,
                key=json.dumps(k).encode(),
                value=None if v is None else json.dumps(v).encode(),
                partition=p,
            )
            for p, k, v in records
        ]
        producer.flush(60)
        for f in futures:
            f.get(timeout=60)
    finally:
        producer.close()


def wait_committed(
    service: ServiceProcess,
    bootstrap: str,
    topics: list[str],
    tables: list[str],
    partitions: int,
    timeout: float = 300,
) -> None:
    """Until ``tables``' offsets reach the log ends of ``topics`` (bounded)."""
    parts = [TopicPartition(t, p) for t in topics for p in range(partitions)]
    ends = end_offsets(bootstrap, parts)
    deadline, offsets = time.monotonic() + timeout, {}
    while time.monotonic() < deadline:
        offsets = {}
        for name in tables:
            offsets.update(service.call("GET", f"/v1/tables/{name}/offsets").json())
        if all(offsets.get(tp.topic, {}).get(str(tp.partition)) == ends[tp] for tp in parts):
            return
        time.sleep(0.25)
    raise AssertionError(f"table offsets {offsets} never reached the log ends {ends}")


def assert_iceberg_offsets(table: Any, connect: dict[TopicPartition, int]) -> None:
    """An Iceberg table's offsets (its head snapshot's ``lakegate.offsets``) equal Connect's
    committed offsets, partition for partition."""
    offsets = json.loads(table.current_snapshot().summary["lakegate.offsets"])
    assert {(tp.topic, tp.partition): o for tp, o in connect.items()} == {
        (t, int(p)): o for t, ps in offsets.items() for p, o in ps.items()
    }
