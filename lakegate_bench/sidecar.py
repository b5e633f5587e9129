"""Benchmark: the sidecar's memory (RSS) and CPU while it follows a connector of N partitions (100).

Brings up the real local stack, N partitions (`--partitions`) over `--topics` topics (Kafka creates
at most some 10,000 partitions in one request: 10,000 partitions take 100 topics of 100), one
table of them all, a sink connector (4 tasks), the service and
one sidecar (poll every second), produces records for the whole run, and samples the sidecar's
RSS and CPU time from /proc from the first commit on, and how many times it sent each file (the
service's receipts, over the whole run: a file sent while the service held it is a duplicate). Prints a summary and writes JSON (default
.lakegate/bench/sidecar-<N>.json).
Run through ``scripts/bench-sidecar``.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

from kafka import KafkaProducer

from lakegate_bench.result import report, work_dir
from lakegate_stack import s3 as s3mod
from lakegate_stack.connect import s3_sink_config
from lakegate_stack.kafka import create_topic
from lakegate_stack.procfs import process_cpu_seconds, rss_mib
from lakegate_stack.services import ServiceProcess, SidecarProcess
from lakegate_stack.stack import LocalStack


def sample(pid: int) -> tuple[float, float]:
    """(RSS in MiB, CPU seconds user+system) of a process, children not included."""
    return rss_mib(pid), process_cpu_seconds(pid)


def receipts(port: int) -> dict[str, int]:
    """The service's verdicts on the files the sidecar sent, by status
    (``lakegate_sidecar_file_receipts_total``)."""
    import re

    import requests

    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    pattern = r'^lakegate_sidecar_file_receipts_total\{status="(\w+)"\} (\S+)$'
    return {status: int(float(n)) for status, n in re.findall(pattern, text, re.M)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/bench-sidecar", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--topics", type=int, default=1, help="topics the partitions are spread over (default 1)")
    parser.add_argument("--seconds", type=int, default=60, help="measured run length (default 60)")
    parser.add_argument("--rate", type=int, default=1000, help="records per second produced (default 1000)")
    parser.add_argument("--out", type=Path, help="JSON result (default .lakegate/bench/sidecar-<partitions>.json)")
    args = parser.parse_args(argv)
    if args.topics < 1 or args.partitions % args.topics:
        parser.error("--partitions must be a multiple of --topics")
    per_topic = args.partitions // args.topics
    topics = ["bench"] if args.topics == 1 else [f"bench{t:03d}" for t in range(args.topics)]
    args.out = args.out or Path(f".lakegate/bench/sidecar-{args.partitions}.json")
    work = work_dir("lakegate-bench-sidecar-")
    env = {"AWS_ACCESS_KEY_ID": s3mod.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": s3mod.SECRET_KEY}
    with LocalStack(work, buckets=("lake",)) as stack:
        assert stack.s3 and stack.kafka
        worker = stack.workers[0]
        service = ServiceProcess(
            work,
            [{"name": "bench", "path": "s3a://lake/bench", "topics": topics, "commit": {"interval_seconds": 5}}],
            ["s3a://lake/bench/data/"],
            s3={"endpoint": stack.s3.endpoint, "access_key": s3mod.ACCESS_KEY, "secret_key": s3mod.SECRET_KEY},
        ).start()
        for topic in topics:
            create_topic(stack.kafka.bootstrap_servers, topic, per_topic)
        worker.client().put_connector(
            "bench-sink",
            s3_sink_config(
                topics, "lake", stack.s3.endpoint, s3mod.ACCESS_KEY, s3mod.SECRET_KEY, prefix="bench/data/", tasks=4
            ),
        )
        worker.client().wait_running("bench-sink", tasks=4)
        sidecar = SidecarProcess(
            work,
            "sidecar",
            {
                "worker_id": worker.worker_id,
                "connect": {"url": worker.url, "connectors": ["bench-sink"]},
                "kafka": {"bootstrap_servers": stack.kafka.bootstrap_servers},
                "storage": {"kind": "s3", "bucket": "lake", "prefix": "bench/data/", "endpoint": stack.s3.endpoint},
                "service": {"url": service.url, "token": "${LAKEGATE_SIDECAR_TOKEN}"},
                "poll_interval_seconds": 1,
            },
            env=env,
        ).start()
        pid = sidecar.process.pid
        assert pid is not None
        stop = threading.Event()
        bootstrap = stack.kafka.bootstrap_servers

        def produce() -> None:
            producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50)
            i = 0
            while not stop.is_set():
                for _ in range(args.rate // 10):
                    topic, partition = topics[i % len(topics)], (i // len(topics)) % per_topic
                    producer.send(topic, value=json.dumps({"id": i}).encode(), partition=partition)
                    i += 1
                time.sleep(0.1)
            producer.close()

        threading.Thread(target=produce, daemon=True).start()
        # Measure the steady state: from the first commit of the sidecar's files on.
        deadline = time.monotonic() + 900
        while service.call("GET", "/v1/tables/bench").json()["version"] < 0:
            if time.monotonic() > deadline:
                raise SystemExit("no commit within 900 s; see the service and sidecar logs in " + str(work))
            print("waiting for the first commit ...", flush=True)
            time.sleep(5)
        rss0, cpu0 = sample(pid)
        samples = []
        started = time.monotonic()
        while time.monotonic() - started < args.seconds:
            time.sleep(2)
            rss, cpu = sample(pid)
            samples.append(rss)
            print(f"t={time.monotonic() - started:4.0f}s rss={rss:6.1f} MiB cpu={cpu - cpu0:6.2f}s", flush=True)
        elapsed = time.monotonic() - started
        rss_end, cpu_end = sample(pid)
        stop.set()
        tables = service.call("GET", "/v1/tables/bench").json()
        verdicts = receipts(sidecar.port)
        commits = service.call("GET", "/v1/commits?table=bench&limit=1000").json()["commits"]
        committed = sum(c["files"] for c in commits)
        distinct = sum(verdicts.values()) - verdicts.get("duplicate", 0)
        sidecar.stop()
        service.stop()
    result = {
        "benchmark": "sidecar",
        "partitions": args.partitions,
        "topics": args.topics,
        "seconds": round(elapsed, 1),
        "rss_mib_start": round(rss0, 1),
        "rss_mib_max": round(max(samples), 1),
        "rss_mib_end": round(rss_end, 1),
        "cpu_seconds": round(cpu_end - cpu0, 2),
        "cpu_percent_of_one_core": round(100 * (cpu_end - cpu0) / elapsed, 1),
        "table_version": tables["version"],
        "partitions_in_table": sum(len(v) for v in tables["offsets"].values()),
        # over the whole run, from the service's receipts: a file sent again while the service held
        # it comes back "duplicate"; files sent per distinct file = all / (all - duplicates)
        "receipts": verdicts,
        "files_sent_per_distinct_file": round(sum(verdicts.values()) / distinct, 3) if distinct else None,
        "files_committed": committed,
        "commits_counted": len(commits),
    }
    report(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
