"""A table that catches up (``commit.catch_up_seconds``): each round holds every record Kafka held
when it came due, or says it did not and waited the whole catch-up first.

Records go Kafka -> the S3 sink on a real Connect worker (JSON lines; Connect flushes every 2 s)
-> a sidecar -> the service, into a Delta table on the S3 server, with rounds due every 6 s that
may wait 4 s to catch up. A paced producer notes when Kafka acknowledged each record (the same
clock as the service's). Every round's commit record says when it was due and, if it caught up,
the log ends it caught up with; the test checks those against the acknowledgements, then every
field of every record against what ``deltalake`` reads.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from deltalake import DeltaTable
from kafka import KafkaProducer

from lakegate_stack import s3 as s3mod
from lakegate_stack.connect import ConnectWorker
from lakegate_stack.delta_read import live_rows
from lakegate_stack.kafka import KafkaBroker
from lakegate_stack.s3 import S3Server
from lakegate_stack.services import READ_TOKEN, ServiceProcess
from tests.kafka_helpers import create_topic
from tests.pipeline_helpers import S3_ENV, assert_landed_as_sent, sink_with_sidecar, wait_committed

BUCKET, TOPIC, TABLE, PARTITIONS = "lake-catch-up", "caught", "caught", 3
INTERVAL, CATCH_UP = 6, 4  # seconds: Connect's 2 s flush plus the sidecar's rounds fit in the wait
RATE, SECONDS = 40, 24  # records per second, and for how long: four rounds come due meanwhile
WARM_UP = 100_000  # the ids of the records committed before the window (one per partition)


def value(i: int) -> dict[str, Any]:
    return {"uid": f"u{i}", "n": i, "amount": i / 4, "note": None if i % 7 == 0 else f"näme {i}"}


def produce(
    bootstrap: str, ids: range, paced: bool = False
) -> tuple[dict[str, dict[str, Any]], list[tuple[int, int, float]]]:
    """Records ``ids`` (``paced``: RATE a second), each acknowledged before the next is sent: the
    values by uid, and (partition, offset, when acknowledged in ms) per record."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    sent: dict[str, dict[str, Any]] = {}
    acked: list[tuple[int, int, float]] = []
    started = time.monotonic()
    try:
        for n, i in enumerate(ids):
            if paced:
                time.sleep(max(0.0, started + n / RATE - time.monotonic()))
            v = sent.setdefault(f"u{i}", value(i))
            meta = producer.send(TOPIC, key=f"k{i}".encode(), value=json.dumps(v).encode(), partition=i % PARTITIONS)
            record = meta.get(timeout=60)
            acked.append((record.partition, record.offset, time.time() * 1000))
    finally:
        producer.close()
    return sent, acked


def flat(offsets: dict[str, dict[str, int]] | None) -> dict[int, int]:
    """A record's ``{topic: {"<partition>": offset}}`` for this test's one topic, by partition."""
    return {int(p): o for p, o in (offsets or {}).get(TOPIC, {}).items()}


def test_every_round_holds_what_kafka_held_when_it_came_due(
    tmp_path: Path, kafka_broker: KafkaBroker, connect_worker: ConnectWorker, s3_server: S3Server
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, TOPIC, PARTITIONS)
    s3_server.create_bucket(BUCKET)
    commit = {"interval_seconds": INTERVAL, "catch_up_seconds": CATCH_UP}
    tables = [{"name": TABLE, "path": f"s3a://{BUCKET}/{TABLE}", "topics": [TOPIC], "commit": commit}]
    s3 = {"endpoint": s3_server.endpoint, "access_key": s3mod.ACCESS_KEY, "secret_key": s3mod.SECRET_KEY}
    service = ServiceProcess(tmp_path, tables, [f"s3a://{BUCKET}/"], s3=s3).start()
    try:
        sidecar = sink_with_sidecar(
            tmp_path, connect_worker, s3_server, BUCKET, service, bootstrap, "catch-up-sink", TOPIC, {"output": "jsonl"}
        )
        try:
            # a warm service: a record in each partition, committed before the measured window (a
            # cold Spark's first rewrite took 12-24 s, the window is 24 s: it must hold rounds, not a start-up)
            warm, warm_acked = produce(bootstrap, range(WARM_UP, WARM_UP + PARTITIONS))
            wait_committed(service, bootstrap, [TOPIC], [TABLE], PARTITIONS)
            sent, acked = produce(bootstrap, range(RATE * SECONDS), paced=True)
            sent, acked = {**warm, **sent}, warm_acked + acked
            wait_committed(service, bootstrap, [TOPIC], [TABLE], PARTITIONS)
            response = service.call("GET", f"/v1/commits?table={TABLE}&limit=1000", READ_TOKEN)
            assert response.status_code == 200, response.text
            commits = sorted(response.json()["commits"], key=lambda c: c["version"])
        finally:
            sidecar.stop()
            connect_worker.client().delete_connector("catch-up-sink")
    finally:
        service.stop()

    table: dict[int, int] = {}  # the table's offsets after each commit
    caught = 0
    for c in commits:
        table.update(flat(c["offsets"]))
        if c.get("due_ms") is None:
            continue
        if c.get("caught_up") is None:  # it may say so only after waiting the whole catch-up
            assert c["committed_at_ms"] >= c["due_ms"] + CATCH_UP * 1000, c
            continue
        for p in range(PARTITIONS):
            before_due = [o for q, o, at in acked if q == p and at < c["due_ms"]]
            need = max(before_due) + 1 if before_due else 0
            assert flat(c["caught_up"])[p] >= need, ("a log end read before the round was due", p, c)
            assert table.get(p, 0) >= need, ("a record in Kafka when the round came due is not in it", p, c)
        caught += c["records"] > 0
    assert caught >= 2, f"at most one round with records caught up: {commits}"

    options = {"AWS_ENDPOINT_URL": s3_server.endpoint, "AWS_ALLOW_HTTP": "true", **S3_ENV}
    rows = live_rows(DeltaTable(f"s3://{BUCKET}/{TABLE}", storage_options=options))
    assert_landed_as_sent(sent, rows)
