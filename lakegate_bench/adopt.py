"""The ``adopt`` part of ``scripts/bench``: an archive older than Lakegate, committed from nothing.

All real but the sink's past: Kafka holds ``partitions`` x ``files`` records; the archive holds one
plain Parquet file per record (the sink's Aiven prefix naming, zero-padded), written into the
bucket by this bench as the sink would have; the connector's consumer group is set to the log end
before Connect starts it (the sink had written all of it), so nothing new arrives. Then a fresh
service (auth and fencing on) and one sidecar attach, and the bench measures:

- the catch-up: seconds from the sidecar's start (the service already up, its Spark session
  started, as when a team attaches a sidecar to a running service) until the table's offsets equal
  Connect's, files per second over it, the rounds (each at most ``commit.max_files``), the
  service's peak RSS (its process tree: gunicorn's worker and Spark's JVM) and the sidecar's;
  and the sustained rate: the files of every round after the first over the time from the first
  round's commit to the last's (the first round also pays the table's creation and the warm-up of
  Spark's commit jobs, a fixed cost that an archive of a million files makes small); and the
  CPU seconds each side used over the catch-up: Lakegate's (the service's process tree, Spark's
  JVM in it, and the sidecar) per file, and the S3 server's, which shares this machine's cores
  (its footer reads and listings are what a real store does on its own machines);
- the steady-state listing: once caught up, records trickle into the archive's topic and into a
  topic of as many partitions with no archive (``fresh``, its own connector), and the sidecar's
  own metrics (``lakegate_sidecar_listing_seconds`` / ``_requests`` by topic) give each topic's
  listing time per round: the archive's against the empty prefix's, in the same rounds; and a
  full listing of the archive's prefix timed here, which is what each round cost before.

The S3 server is SeaweedFS (``--adopt-store seaweedfs``, built by ``scripts/install-seaweedfs``),
or moto (``moto``), which answers one request at a time: its figures say little of a real store.
"""

from __future__ import annotations

import io
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from lakegate_bench.service_commit import PeakRss
from lakegate_stack.procfs import tree_cpu_seconds

TOPIC, CONNECTOR, BUCKET, TABLE = "adopt", "adopt-sink", "adopt", "adopt"
PREFIX = f"{TABLE}/landing/"  # inside the table's root: Parquet is added in place (placement: in_place)
FRESH, FRESH_CONNECTOR = "fresh", "fresh-sink"  # as many partitions, no archive: the steady baseline
STEADY_SECONDS = 30


def parquet_body(record_id: int, partition: int) -> bytes:
    """One record as the sink writes it in plain Parquet (``format.output.fields=value``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    table = pa.table({"id": pa.array([record_id], pa.int64()), "p": pa.array([partition], pa.int64())})
    pq.write_table(table, buf, compression="snappy")
    return buf.getvalue()


def produce(bootstrap: str, partitions: int, per_partition: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=20, batch_size=256 * 1024)
    try:
        for offset in range(per_partition):
            for p in range(partitions):
                record_id = p * per_partition + offset
                producer.send(TOPIC, value=json.dumps({"id": record_id, "p": p}).encode(), partition=p)
    finally:
        producer.flush(120)
        producer.close()


def write_archive(client: Any, partitions: int, per_partition: int, threads: int = 32) -> float:
    """Upload the archive (one file per record); returns seconds taken. Prints progress."""
    total = partitions * per_partition
    done = [0]
    lock = threading.Lock()
    started = time.monotonic()

    def upload(p: int) -> None:
        for offset in range(per_partition):
            key = f"{PREFIX}{TOPIC}-{p}-{offset:020d}"
            client.put_object(Bucket=BUCKET, Key=key, Body=parquet_body(p * per_partition + offset, p))
            with lock:
                done[0] += 1
                if done[0] % 20_000 == 0:
                    rate = done[0] / (time.monotonic() - started)
                    print(f"  archive: {done[0]:,} of {total:,} files ({rate:,.0f}/s)", flush=True)

    with ThreadPoolExecutor(min(threads, partitions)) as pool:
        list(pool.map(upload, range(partitions)))
    return time.monotonic() - started


def set_group_offsets(bootstrap: str, partitions: int, offset: int) -> None:
    """The connector's group at ``offset`` in every partition: the sink wrote everything below."""
    from kafka import KafkaConsumer, OffsetAndMetadata
    from kafka import TopicPartition as KafkaTP

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=f"connect-{CONNECTOR}", enable_auto_commit=False)
    try:
        consumer.commit({KafkaTP(TOPIC, p): OffsetAndMetadata(offset, "", -1) for p in range(partitions)})
    finally:
        consumer.close()


def sidecar_listing(url: str) -> dict[str, tuple[float, float]]:
    """The sidecar's listing counters by topic: (seconds, requests); and its rounds under ``""``."""
    import re

    import requests

    text = requests.get(f"{url}/metrics", timeout=10).text
    out: dict[str, tuple[float, float]] = {}
    for name, index in (("lakegate_sidecar_listing_seconds_total", 0), ("lakegate_sidecar_listing_requests_total", 1)):
        for topic, value in re.findall(rf'^{name}{{topic="([^"]+)"}} (\S+)$', text, re.M):
            pair = list(out.get(topic, (0.0, 0.0)))
            pair[index] = float(value)
            out[topic] = (pair[0], pair[1])
    rounds = re.search(r"^lakegate_sidecar_rounds_total (\S+)$", text, re.M)
    out[""] = (float(rounds.group(1)) if rounds else 0.0, 0.0)
    return out


def trickle(bootstrap: str, partitions: int, seconds: float, first_id: int) -> None:
    """One record a second into each partition of both topics, for ``seconds``."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5)
    try:
        end = time.monotonic() + seconds
        i = first_id
        while time.monotonic() < end:
            for topic in (TOPIC, FRESH):
                for p in range(partitions):
                    producer.send(topic, value=json.dumps({"id": i, "p": p}).encode(), partition=p)
                    i += 1
            producer.flush(30)
            time.sleep(1)
    finally:
        producer.close()


def full_listing_seconds(client: Any) -> tuple[float, int]:
    """A full listing of the archive's prefix (every round's cost before): seconds and keys."""
    started, keys = time.perf_counter(), 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"{PREFIX}{TOPIC}-"):
        keys += len(page.get("Contents", []))
    return time.perf_counter() - started, keys


def run(work: Path, partitions: int, per_partition: int, max_files: int, store: str) -> dict[str, Any]:
    from lakegate_stack import s3 as s3mod
    from lakegate_stack.connect import ConnectWorker, s3_sink_config
    from lakegate_stack.kafka import KafkaBroker, create_topic
    from lakegate_stack.services import ServiceProcess, SidecarProcess, sidecar_config

    total = partitions * per_partition
    work.mkdir(parents=True, exist_ok=True)
    if store == "seaweedfs":
        from lakegate_stack.seaweedfs import SeaweedS3Server

        s3: Any = SeaweedS3Server(work / "s3").start()
    else:
        s3 = s3mod.S3Server(work / "s3").start()
    kafka = KafkaBroker(work / "kafka").start()
    worker = service = sidecar = None
    env = {"AWS_ACCESS_KEY_ID": s3mod.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": s3mod.SECRET_KEY}
    try:
        client = s3.client()
        client.create_bucket(Bucket=BUCKET)
        for topic in (TOPIC, FRESH):
            create_topic(kafka.bootstrap_servers, topic, partitions)
        print(f"producing {total:,} records over {partitions} partitions ...", flush=True)
        produce(kafka.bootstrap_servers, partitions, per_partition)
        print(f"writing the archive: {total:,} files on {store} ...", flush=True)
        archive_s = write_archive(client, partitions, per_partition)
        print(f"  written in {archive_s:.0f} s ({total / archive_s:,.0f} files/s)", flush=True)
        set_group_offsets(kafka.bootstrap_servers, partitions, per_partition)
        worker = ConnectWorker(work / "connect", kafka.bootstrap_servers, name="adopt-w1", group_id="adopt-connect")
        worker.start()
        for name, topic in ((CONNECTOR, TOPIC), (FRESH_CONNECTOR, FRESH)):
            sink = s3_sink_config(
                [topic], BUCKET, s3.endpoint, s3mod.ACCESS_KEY, s3mod.SECRET_KEY, prefix=PREFIX, tasks=2
            )
            worker.client().put_connector(name, sink)
            worker.client().wait_running(name, tasks=2)
        table = {
            "name": TABLE,
            "path": f"s3a://{BUCKET}/{TABLE}",
            "topics": [TOPIC, FRESH],
            "commit": {"interval_seconds": 10, "max_files": max_files},
        }
        s3_section = {"endpoint": s3.endpoint, "access_key": s3mod.ACCESS_KEY, "secret_key": s3mod.SECRET_KEY}
        service = ServiceProcess(work, [table], [f"s3a://{BUCKET}/"], s3=s3_section, kafka=kafka.bootstrap_servers)
        service.start()
        spark_started = time.monotonic()
        service.spark_ui()  # a running service: its Spark session is up before a sidecar attaches
        spark_s = time.monotonic() - spark_started
        assert service.process.pid is not None
        storage = {"kind": "s3", "bucket": BUCKET, "prefix": PREFIX, "endpoint": s3.endpoint, "naming": "aiven"}
        config = sidecar_config(worker, [CONNECTOR, FRESH_CONNECTOR], kafka.bootstrap_servers, storage, service.url)
        others = {"service": service.process.pid, "store": s3.process.pid}
        with PeakRss(service.process.pid) as service_rss:
            cpu_before = {k: tree_cpu_seconds([pid]) for k, pid in others.items()}
            started = time.monotonic()
            sidecar = SidecarProcess(work, "adopt-sidecar", config, env=env).start()
            assert sidecar.process.pid is not None
            with PeakRss(sidecar.process.pid) as sidecar_rss:
                caught_up_s = wait_caught_up(service, partitions, per_partition, started, total)
            cpu = {k: tree_cpu_seconds([pid]) - cpu_before[k] for k, pid in others.items()}
            cpu["sidecar"] = tree_cpu_seconds([sidecar.process.pid])  # since its start
        commits = service.call("GET", f"/v1/commits?table={TABLE}&limit=1000").json()["commits"]
        metrics_url = f"http://127.0.0.1:{sidecar.port}"
        print(f"steady state: records trickling into {TOPIC} and {FRESH} for {STEADY_SECONDS} s ...", flush=True)
        before = sidecar_listing(metrics_url)
        trickle(kafka.bootstrap_servers, partitions, STEADY_SECONDS, total)
        after = sidecar_listing(metrics_url)
        full_s, keys = full_listing_seconds(client)
    finally:
        for proc in (sidecar, service, worker):
            if proc is not None:
                proc.stop()
        kafka.stop()
        s3.stop()
    rounds = after[""][0] - before[""][0]
    steady = {
        topic: {
            "listing_ms_per_round": round(1000 * (after[topic][0] - before.get(topic, (0, 0))[0]) / rounds, 2),
            "requests_per_round": round((after[topic][1] - before.get(topic, (0, 0))[1]) / rounds, 1),
        }
        for topic in (TOPIC, FRESH)
        if topic in after
    }
    archive_ms = steady.get(TOPIC, {}).get("listing_ms_per_round", 0.0)
    fresh_ms = steady.get(FRESH, {}).get("listing_ms_per_round", 0.0)
    files_per_round = [c["files"] for c in commits if c.get("left") or c["files"] >= max_files]
    rounds_in_order = sorted((c for c in commits if c.get("committed_at_ms")), key=lambda c: c["version"])
    sustained = None
    if len(rounds_in_order) > 1:
        span_s = (rounds_in_order[-1]["committed_at_ms"] - rounds_in_order[0]["committed_at_ms"]) / 1000
        sustained = round(sum(c["files"] for c in rounds_in_order[1:]) / span_s) if span_s > 0 else None
    result = {
        "store": store,
        "partitions": partitions,
        "files": total,
        "records_per_file": 1,
        "max_files": max_files,
        "archive_write_s": round(archive_s, 1),
        "caught_up_s": round(caught_up_s, 1),
        "files_per_s": round(total / caught_up_s),
        "sustained_files_per_s": sustained,
        "spark_start_s": round(spark_s, 1),
        "rounds": len(commits),
        "largest_round_files": max((c["files"] for c in commits), default=0),
        "bounded_rounds": len(files_per_round),
        # CPU over the catch-up: Lakegate's (the service with Spark's JVM, and the sidecar) per
        # file, and the S3 server's (on this machine it shares the two cores: its footer reads
        # and listings are a real store's work, not Lakegate's)
        "catch_up_cpu_s": {k: round(v, 1) for k, v in cpu.items()},
        "lakegate_cpu_ms_per_file": round(1000 * (cpu["service"] + cpu["sidecar"]) / total, 3),
        "store_cpu_ms_per_file": round(1000 * cpu["store"] / total, 3),
        "files_per_lakegate_cpu_s": round(total / (cpu["service"] + cpu["sidecar"])),
        "service_peak_rss_mib": round(service_rss.peak_mib),
        "service_jvm_peak_mib": round(service_rss.peak_by_kind.get("java", 0)),
        "sidecar_peak_rss_mib": round(sidecar_rss.peak_mib),
        "steady_rounds": rounds,
        "steady": steady,
        "steady_archive_over_fresh": round(archive_ms / fresh_ms, 2) if fresh_ms else None,
        "full_listing_s": round(full_s, 3),
        "full_listing_keys": keys,
    }
    print(json.dumps(result, indent=2), flush=True)
    return result


def wait_caught_up(service: Any, partitions: int, per_partition: int, started: float, total: int) -> float:
    """Seconds until every partition's table offset is ``per_partition``; prints progress."""
    deadline = started + 6 * 3600
    last = 0.0
    while time.monotonic() < deadline:
        offsets = service.call("GET", f"/v1/tables/{TABLE}/offsets").json().get(TOPIC, {})
        done = sum(offsets.values())
        if len(offsets) == partitions and all(v == per_partition for v in offsets.values()):
            return time.monotonic() - started
        if time.monotonic() - last >= 15:
            last = time.monotonic()
            elapsed = last - started
            rate = done / elapsed if elapsed else 0
            left = (total - done) / rate if rate else float("nan")
            print(
                f"  caught up {done:,} of {total:,} records in {elapsed:.0f} s ({rate:,.0f}/s, ~{left:.0f} s left)",
                flush=True,
            )
        time.sleep(1)
    raise AssertionError("the archive was not caught up in 6 hours")
