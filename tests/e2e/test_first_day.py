"""The first day, all real: Lakegate attached to topics and a bucket older than it.

Kafka, Connect with the stand-in S3 sink (plain Parquet, written under the table's root: added in
place), the S3 server, the service (auth and fencing on) and one sidecar, started only after the
sinks have run, one table fed by three topics:

- ``retained``: records 0..249 of each partition removed by retention (``delete_records``) before
  the connector was created, so the sink's first files start at 250;
- ``latest``: a connector created with ``consumer.override.auto.offset.reset=latest`` on a topic
  that already held records;
- ``archive``: an archive of at least 1,000 files written before the service's first start, and
  partition 0's first three files removed by a lifecycle rule; the table's rounds are bounded at
  250 files (the backfill's scale is the ``adopt`` benchmark's: 100,000 files);
- and a second table whose ``start`` is a time between two batches of ``timed``'s records: it
  begins at the first file of the second batch.

Once all of that is committed, ``retained`` is deleted and made again, as docs/operations.md
says to recover: its connector removed, the topic made again, a new ledger epoch begun
(``POST /v1/tables/{table}/epochs``), a new connector writing to a new prefix with a sidecar of
its own. The new topic's records (offsets from 0 again) must land beside the old ones.

The table must hold, once, every record the sinks wrote (every field compared with Kafka's
record, read before the topic was deleted for the old one), each partition's offset equal to
Connect's; every round holds at most 250 files; each partition's first commit records where its
ledger began and why; the audit finds no breach, before the topic is made again and after."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from deltalake import DeltaTable
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTP

from lakegate_core.connect_group import assignments
from lakegate_core.types import TopicPartition
from lakegate_stack import s3 as s3mod
from lakegate_stack.connect import ConnectWorker, s3_sink_config
from lakegate_stack.kafka import KafkaBroker, create_topic
from lakegate_stack.s3 import S3Server
from lakegate_stack.services import ADMIN_TOKEN, READ_TOKEN, ServiceProcess, SidecarProcess, sidecar_config
from tests.kafka_helpers import committed_offsets, end_offsets, make_again

BUCKET, TABLE = "first-day", "first_day"
PREFIX = "lake/landing/"  # inside the table's root (s3a://first-day/lake): Parquet is added in place
PREFIX2 = "lake/landing-2/"  # where the recreated topic's new connector writes (docs/operations.md)
RECREATED = range(5_000, 5_300)  # the ids produced to the recreated topic
RETAINED, LATEST, ARCHIVE = "fd-retained", "fd-latest", "fd-archive"
TIMED, TIMED_TABLE = "fd-timed", "first_day_timed"  # a second table, begun at a time
TOPICS = {RETAINED: 2, LATEST: 2, ARCHIVE: 4}  # the first table's
PARTITIONS = {**TOPICS, TIMED: 1}
ARCHIVE_FILES, MAX_FILES, REMOVED = 1_000, 250, 3
S3_ENV = {"AWS_ACCESS_KEY_ID": s3mod.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": s3mod.SECRET_KEY, "AWS_REGION": s3mod.REGION}


def value(topic: str, i: int) -> dict[str, Any]:
    return {"id": i, "src": topic, "amount": i * 0.25, "note": f"r{i}-ü"}


def produce(bootstrap: str, topic: str, ids: range) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    try:
        for i in ids:
            producer.send(
                topic, key=str(i).encode(), value=json.dumps(value(topic, i)).encode(), partition=i % PARTITIONS[topic]
            )
    finally:
        producer.flush(60)
        producer.close()


def first_files(s3: S3Server, prefix: str, topic: str) -> dict[int, int]:
    """Per partition, where the sink's first file of ``topic`` under ``prefix`` begins."""
    starts: dict[int, int] = {}
    for key in listed(s3, f"{prefix}{topic}-"):
        partition, start = key[len(f"{prefix}{topic}-") :].split("-")[:2]
        starts[int(partition)] = min(starts.get(int(partition), 1 << 62), int(start.split(".")[0]))
    return starts


def listed(s3: S3Server, prefix: str) -> list[str]:
    keys: list[str] = []
    for page in s3.client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", [])]
    return keys


def write_archive(bootstrap: str, s3: S3Server) -> int:
    """Produce to the archive topic, a record per partition at a time, until the sink has written
    ``ARCHIVE_FILES`` files (each Connect offset flush writes one file per partition that got a
    record): paced by what is in the bucket, not by the clock. Returns the records produced."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0)
    i, deadline = 0, time.monotonic() + 600
    try:
        while len(listed(s3, f"{PREFIX}{ARCHIVE}-")) < ARCHIVE_FILES:
            assert time.monotonic() < deadline, "the sink did not write the archive in 600 s"
            for _ in range(40):
                for p in range(PARTITIONS[ARCHIVE]):
                    producer.send(
                        ARCHIVE, key=str(i).encode(), value=json.dumps(value(ARCHIVE, i)).encode(), partition=p
                    )
                    i += 1
                producer.flush(60)
                time.sleep(0.03)
    finally:
        producer.close()
    return i


def kafka_values(bootstrap: str, tp: KafkaTP, start: int, end: int) -> list[dict[str, Any]]:
    """Kafka's records of ``tp`` at offsets ``start``..``end - 1``, their values decoded."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        consumer.assign([tp])
        consumer.seek(tp, start)
        out: list[dict[str, Any]] = []
        deadline = time.monotonic() + 120
        while len(out) < end - start and time.monotonic() < deadline:
            for record in consumer.poll(timeout_ms=1000).get(tp, []):
                if record.offset < end:
                    out.append(json.loads(record.value))
        assert len(out) == end - start, f"read {len(out)} of {tp}'s {end - start} records"
        return out
    finally:
        consumer.close()


def first_file_starts(s3: S3Server, topic: str) -> dict[int, int]:
    return first_files(s3, PREFIX, topic)


def test_topics_and_an_archive_older_than_lakegate_commit_once_and_whole(
    tmp_path: Path, kafka_broker: KafkaBroker, s3_server: S3Server
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    s3_server.create_bucket(BUCKET)
    for topic, n in PARTITIONS.items():
        create_topic(bootstrap, topic, n)
    worker = ConnectWorker(
        tmp_path / "connect", bootstrap, name="fd-w1", group_id="fd-connect", offset_flush_interval_ms=100
    ).start()
    service: ServiceProcess | None = None
    sidecar: SidecarProcess | None = None
    sidecar2: SidecarProcess | None = None

    def sink(topic: str, prefix: str = PREFIX, **overrides: str) -> dict[str, str]:
        config = s3_sink_config(
            [topic], BUCKET, s3_server.endpoint, s3mod.ACCESS_KEY, s3mod.SECRET_KEY, prefix=prefix, tasks=1
        )
        return {**config, **overrides}

    try:
        # the archive: written by the sink long before Lakegate, its oldest files since expired
        worker.client().put_connector("fd-archive-sink", sink(ARCHIVE))
        worker.client().wait_running("fd-archive-sink", tasks=1)
        archived = write_archive(bootstrap, s3_server)
        wait_connect(bootstrap, "fd-archive-sink", ARCHIVE)
        p0 = sorted(k for k in listed(s3_server, f"{PREFIX}{ARCHIVE}-0-"))
        for key in p0[:REMOVED]:  # a lifecycle rule removed partition 0's oldest files
            s3_server.client().delete_object(Bucket=BUCKET, Key=key)

        # a topic whose head retention removed before its connector was created
        produce(bootstrap, RETAINED, range(1_000))
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            admin.delete_records({KafkaTP(RETAINED, p): 250 for p in range(2)})
        finally:
            admin.close()
        worker.client().put_connector("fd-retained-sink", sink(RETAINED))
        # a connector started at latest on a topic holding records
        produce(bootstrap, LATEST, range(400))
        worker.client().put_connector(
            "fd-latest-sink", sink(LATEST, **{"consumer.override.auto.offset.reset": "latest"})
        )
        for name in ("fd-retained-sink", "fd-latest-sink"):
            worker.client().wait_running(name, tasks=1)
        wait_assigned(bootstrap, "fd-latest-sink", LATEST)
        produced = 400
        while len(first_file_starts(s3_server, LATEST)) < PARTITIONS[LATEST]:  # until each partition has a file
            assert produced < 40_000, "the latest connector wrote no file of some partition"
            produce(bootstrap, LATEST, range(produced, produced + 100))
            produced += 100
            time.sleep(0.2)
        produce(bootstrap, LATEST, range(produced, produced + 200))
        produce(bootstrap, RETAINED, range(1_000, 1_400))
        for name, topic in (("fd-retained-sink", RETAINED), ("fd-latest-sink", LATEST)):
            wait_connect(bootstrap, name, topic)
        # a topic whose second batch the second table begins at, by time
        worker.client().put_connector("fd-timed-sink", sink(TIMED))
        worker.client().wait_running("fd-timed-sink", tasks=1)
        produce(bootstrap, TIMED, range(300))
        wait_connect(bootstrap, "fd-timed-sink", TIMED)  # its files end at 299: the next begins at 300
        time.sleep(0.05)
        since = datetime.now(timezone.utc).isoformat()
        time.sleep(0.05)
        produce(bootstrap, TIMED, range(300, 600))
        wait_connect(bootstrap, "fd-timed-sink", TIMED)
        timed = {
            "name": TIMED_TABLE,
            "path": f"s3a://{BUCKET}/timed",
            "topics": [TIMED],
            "placement": "copy_into_table",
            "start": since,
            "commit": {"interval_seconds": 2},
        }

        table = {
            "name": TABLE,
            "path": f"s3a://{BUCKET}/lake",
            "topics": list(TOPICS),
            "commit": {"interval_seconds": 2, "max_files": MAX_FILES},
        }
        service = ServiceProcess(
            tmp_path,
            [table, timed],
            [f"s3a://{BUCKET}/"],
            s3={"endpoint": s3_server.endpoint, "access_key": s3mod.ACCESS_KEY, "secret_key": s3mod.SECRET_KEY},
            kafka=bootstrap,
        ).start()
        storage = {"kind": "s3", "bucket": BUCKET, "prefix": PREFIX, "endpoint": s3_server.endpoint, "naming": "aiven"}
        sidecar = SidecarProcess(
            tmp_path,
            "fd-sidecar",
            sidecar_config(
                worker,
                ["fd-archive-sink", "fd-retained-sink", "fd-latest-sink", "fd-timed-sink"],
                bootstrap,
                storage,
                service.url,
            ),
            env=S3_ENV,
        ).start()

        ends = end_offsets(bootstrap, [KafkaTP(t, p) for t, n in TOPICS.items() for p in range(n)])
        assert sum(ends[KafkaTP(ARCHIVE, p)] for p in range(4)) == archived
        wait_offsets(service, ends)
        wait_offsets(service, {KafkaTP(TIMED, 0): 600}, TIMED_TABLE)
        timed_commits = service.call("GET", f"/v1/commits?table={TIMED_TABLE}&limit=100").json()["commits"]
        summary = service.call("GET", f"/v1/tables/{TABLE}").json()
        audit = service.call("GET", f"/v1/tables/{TABLE}/audit?sample=500&seed=3", READ_TOKEN)
        connect = {
            **committed_offsets(bootstrap, "connect-fd-archive-sink"),
            **committed_offsets(bootstrap, "connect-fd-retained-sink"),
            **committed_offsets(bootstrap, "connect-fd-latest-sink"),
        }
        expected_starts = {RETAINED: first_file_starts(s3_server, RETAINED)}
        old = {
            p: kafka_values(bootstrap, KafkaTP(RETAINED, p), expected_starts[RETAINED][p], ends[KafkaTP(RETAINED, p)])
            for p in range(2)
        }

        # the retained topic is deleted and made again, and recovered as docs/operations.md says
        worker.client().delete_connector("fd-retained-sink")
        make_again(bootstrap, RETAINED, PARTITIONS[RETAINED])
        refused = service.call("POST", f"/v1/tables/{TABLE}/epochs", ADMIN_TOKEN, json={"topic": LATEST})
        assert refused.status_code == 409 and "does not look made again" in refused.text, refused.text
        opened = service.call("POST", f"/v1/tables/{TABLE}/epochs", ADMIN_TOKEN, json={"topic": RETAINED})
        assert opened.status_code == 200, opened.text
        assert opened.json()["offsets"] == {f"{RETAINED}~2": {"0": 0, "1": 0}}, opened.text
        produce(bootstrap, RETAINED, RECREATED)
        worker.client().put_connector("fd-retained-sink-2", sink(RETAINED, PREFIX2))
        worker.client().wait_running("fd-retained-sink-2", tasks=1)
        sidecar2 = SidecarProcess(
            tmp_path,
            "fd-sidecar-2",
            sidecar_config(worker, ["fd-retained-sink-2"], bootstrap, {**storage, "prefix": PREFIX2}, service.url),
            env=S3_ENV,
        ).start()
        wait_connect(bootstrap, "fd-retained-sink-2", RETAINED)
        new_ends = end_offsets(bootstrap, [KafkaTP(RETAINED, p) for p in range(2)])
        assert sum(new_ends.values()) == len(RECREATED)
        wait_offsets(service, {**ends, **new_ends})
        new_connect = committed_offsets(bootstrap, "connect-fd-retained-sink-2")
        new = {p: kafka_values(bootstrap, KafkaTP(RETAINED, p), 0, new_ends[KafkaTP(RETAINED, p)]) for p in range(2)}
        after = service.call("GET", f"/v1/tables/{TABLE}").json()
        commits = service.call("GET", f"/v1/commits?table={TABLE}&limit=1000").json()["commits"]
        audit_after = service.call("GET", f"/v1/tables/{TABLE}/audit?sample=500&seed=5", READ_TOKEN)
    finally:
        for process in (sidecar2, sidecar, service):
            if process is not None:
                process.stop()
        worker.stop()

    assert expected_starts[RETAINED] == {0: 250, 1: 250}, "retention removed 0..249 before the sink started"
    archive_firsts = first_file_starts(s3_server, ARCHIVE)
    assert archive_firsts[0] > 0 and all(archive_firsts[p] == 0 for p in (1, 2, 3))
    expected_starts[ARCHIVE] = archive_firsts
    expected_starts[LATEST] = first_file_starts(s3_server, LATEST)
    assert all(s >= 200 for s in expected_starts[LATEST].values()), "started at latest: past the 200 each held"

    options = {"AWS_ENDPOINT_URL": s3_server.endpoint, "AWS_ALLOW_HTTP": "true", **S3_ENV}
    delta = DeltaTable(f"s3://{BUCKET}/lake", storage_options=options)
    everything = delta.to_pyarrow_table(columns=["id", "src", "amount", "note"]).to_pylist()
    expected_rows = 0
    for topic, n in TOPICS.items():
        begins: dict[int, int] = {}
        for c in commits:
            if c.get("begins") and topic in c["begins"]:
                begins.update({int(p): at for p, at in c["begins"][topic].items()})
        rows = [r for r in everything if r["src"] == topic]
        want: list[dict[str, Any]] = []
        for p in range(n):
            tp = KafkaTP(topic, p)
            start = expected_starts[topic][p]
            assert connect[tp] == ends[tp], f"{tp}: Connect at {connect[tp]}, log end {ends[tp]}"
            assert delta.transaction_version(f"lakegate-{TABLE}-{topic}-{p}") == connect[tp]
            assert begins.get(p) == start, f"{tp}: the first commit records where its ledger began: {begins}"
            assert summary["starts"][f"{topic}-{p}"]["offset"] == start
            want += old[p] if topic == RETAINED else kafka_values(bootstrap, tp, start, ends[tp])
        if topic == RETAINED:  # and the topic made again, from 0 in its second ledger epoch
            for p in range(n):
                tp = KafkaTP(topic, p)
                assert new_connect[tp] == new_ends[tp] and new_ends[tp] > 0
                assert delta.transaction_version(f"lakegate-{TABLE}-{topic}~2-{p}") == new_connect[tp]
                assert after["offsets"][topic][str(p)] == new_ends[tp]
                want += new[p]
            assert after["epochs"] == {RETAINED: 2}
            assert {r["id"] for r in want} >= set(RECREATED)
        key = lambda r: (r["id"], r["src"])  # noqa: E731
        assert sorted(rows, key=key) == sorted(want, key=key), f"{topic}: every field of every record, once"
        expected_rows += len(want)
    assert len(everything) == expected_rows, "no row but those of the three topics' records"
    assert audit.status_code == 200 and audit.json()["ok"], audit.text
    assert audit_after.status_code == 200 and audit_after.json()["ok"], audit_after.text
    assert any("earlier ledger epoch" in f["message"] for f in audit_after.json()["findings"]), audit_after.text

    reasons: dict[str, str] = {}
    for c in commits:
        reasons.update(c.get("begin_reasons") or {})
    assert {reasons[f"{RETAINED}-{p}"] for p in range(2)} == {"first_file"}
    assert sum(c["files"] for c in commits) >= ARCHIVE_FILES - REMOVED
    assert len(commits) >= (ARCHIVE_FILES - REMOVED) // MAX_FILES
    assert max(c["files"] for c in commits) <= MAX_FILES, [c["files"] for c in commits]
    assert any(c.get("left") for c in commits), "the archive waited for rounds bounded by max_files"

    first = min(timed_commits, key=lambda c: c["version"])
    assert first["begins"] == {TIMED: {"0": 300}} and first["begin_reasons"] == {f"{TIMED}-0": "timestamp"}
    rows = DeltaTable(f"s3://{BUCKET}/timed", storage_options=options).to_pyarrow_table(columns=list(value(TIMED, 0)))
    assert sorted(rows.to_pylist(), key=lambda r: r["id"]) == kafka_values(bootstrap, KafkaTP(TIMED, 0), 300, 600)


def wait_offsets(service: ServiceProcess, ends: dict[KafkaTP, int], table: str = TABLE, timeout: float = 600) -> None:
    """Until ``table``'s offsets (of each topic's current ledger epoch) reach ``ends``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        offsets = service.call("GET", f"/v1/tables/{table}/offsets").json()
        if all(offsets.get(tp.topic, {}).get(str(tp.partition)) == end for tp, end in ends.items()):
            return
        time.sleep(2)
    raise AssertionError(f"the table's offsets {offsets} never reached the log ends {ends}")


def wait_connect(bootstrap: str, connector: str, topic: str, timeout: float = 180) -> None:
    """Until Connect's committed offsets of ``topic`` reach its log ends (the sink wrote it all)."""
    tps = [KafkaTP(topic, p) for p in range(PARTITIONS[topic])]
    ends = end_offsets(bootstrap, tps)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = committed_offsets(bootstrap, f"connect-{connector}")
        if all(done.get(tp) == ends[tp] for tp in tps):
            return
        time.sleep(0.5)
    raise AssertionError(f"{connector}: Connect's offsets {done} never reached {ends}")


def wait_assigned(bootstrap: str, connector: str, topic: str, timeout: float = 120) -> None:
    """Until the consumer group of ``connector`` holds every partition of ``topic`` (Connect reads
    each position as it is assigned: with auto.offset.reset=latest, the log end then)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    group, held = f"connect-{connector}", set()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            described = admin.describe_groups([group]).get(group, {})
            held = set(assignments(described.get("members", []), connector))
            if {TopicPartition(topic, p) for p in range(PARTITIONS[topic])} <= held:
                return
            time.sleep(0.5)
    finally:
        admin.close()
    raise AssertionError(f"{connector}'s tasks never held {topic}: {held}")
