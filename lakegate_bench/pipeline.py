"""Benchmark: end-to-end freshness and CPU cost of Lakegate's pipeline beside Spark Structured Streaming.

On one local stack (the S3 server, Kafka, one Connect worker), for each commit interval / trigger
in ``--intervals``, records are produced at ``--rate`` per second for ``--seconds`` (each carries
``produced_ms``), into a new 3-partition topic, and land in a new Delta table on the S3 server:

- **Lakegate**: the Connect S3 sink (Connect's offset flush every 2 s as the local stack sets it)
  -> one sidecar -> the service (``commit.interval_seconds`` = the interval). With ``sink``
  ``parquet`` (the default) the sink writes Parquet without an envelope, added to the table in
  place; with ``aiven`` it writes what Aiven's sink writes by default, gzip JSON lines in its
  envelope (with the fields the doctor asks for, ``key,value,offset,timestamp``), rewritten by
  the service as Parquet. ``mode`` ``upsert`` makes the table an upsert table keyed by ``id``
  (every produced id is new, so each record is one row and every round still runs its merge:
  the table read for the round's keys);
- **Spark Structured Streaming** (the peer): ``readStream.format("kafka")`` -> ``from_json`` ->
  ``writeStream.format("delta")`` with a checkpoint, ``trigger(processingTime=<interval>)``, in
  its own process (``lakegate_bench/spark_streaming.py``).

A poller lists the table's ``_delta_log`` every 0.25 s; a record's freshness is the time its
commit was first seen minus ``produced_ms`` (p50/p99 over every record). CPU is the user+system
time of the processes doing the work over the run (``/proc``): for Lakegate the Connect worker,
the sidecar and the service (with its JVM), and Lakegate's marginal part (sidecar + service)
apart; for Spark its driver JVM and Python. Writes ``pipeline.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from lakegate_bench.figures import figures
from lakegate_bench.freshness import PARTITIONS, FreshnessPoller, produce, wait_for, warm_up
from lakegate_bench.lakegate_knobs import SIDECAR_POLL_SECONDS, catch_up_by_interval, catch_up_for
from lakegate_bench.process_cpu import by_process, cpu_seconds, jit_seconds, jit_threads
from lakegate_bench.s3_requests import S3RequestLog
from lakegate_stack import s3 as s3mod
from lakegate_stack.connect import ConnectWorker, s3_sink_config
from lakegate_stack.kafka import create_topic
from lakegate_stack.services import ServiceProcess, SidecarProcess
from lakegate_stack.stack import LocalStack

BUCKET = "lake"
SINKS = ("parquet", "aiven")  # what the storage sink writes (see the module's docstring)
MODES = ("append", "upsert")
S3_ENV = {"AWS_ACCESS_KEY_ID": s3mod.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": s3mod.SECRET_KEY, "AWS_REGION": s3mod.REGION}


@dataclass(eq=False, kw_only=True)
class Poller(FreshnessPoller):
    """Lists a Delta table's log on the S3 server (its commits are the log's JSON files)."""

    s3: Any
    fs: pafs.S3FileSystem
    prefix: str  # the table's key prefix, ending in /
    added: set[str] = field(default_factory=set)  # the data files seen added, by the log's path

    def written(self) -> dict[str, int]:
        """The table's data files, by key: when the S3 server last wrote each (ms)."""
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=self.prefix)
        return {
            o["Key"]: int(o["LastModified"].timestamp() * 1000)
            for page in pages
            for o in page.get("Contents", [])
            if "/_delta_log/" not in o["Key"]
        }

    def poll(self) -> None:
        now_ms = int(time.time() * 1000)
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"{self.prefix}_delta_log/")
        new = sorted(
            o["Key"]
            for page in pages
            for o in page.get("Contents", [])
            if o["Key"].endswith(".json") and o["Key"] not in self.versions
        )
        written = self.written() if new else {}
        for key in new:
            self.versions.add(key)
            body = self.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read().decode()
            actions = [json.loads(line) for line in body.splitlines()]
            committed_ms = next((a["commitInfo"]["timestamp"] for a in actions if "commitInfo" in a), now_ms)
            for action in actions:
                add = action.get("add")
                if add is None or add["path"] in self.added:  # a file re-added with a deletion vector
                    continue
                self.added.add(add["path"])
                path = add["path"]
                if "://" in path:
                    path = path.split("://", 1)[1].split("/", 1)[1]
                else:
                    path = self.prefix + path
                column = pq.read_table(f"{BUCKET}/{unquote(path)}", columns=["produced_ms"], filesystem=self.fs)
                produced = [int(p) for p in column.column(0).to_pylist()]
                self.seen_ms.extend((p, now_ms) for p in produced)
                if unquote(path) in written:  # files outside the prefix (none here) have no stages
                    self.stages_ms.extend((p, written[unquote(path)], committed_ms, now_ms) for p in produced)


@dataclass
class LakegateRun:
    """Lakegate's pipeline for one topic: the storage sink connector on the stack's worker, a
    sidecar following it, a service committing its files; stopped by :meth:`stop`."""

    worker: ConnectWorker
    sidecar: SidecarProcess
    service: ServiceProcess
    connector: str

    def pids(self) -> dict[str, int]:
        """The processes doing the work, by role (each with its descendants: the service's JVM)."""
        assert self.worker.process is not None
        pids = {
            "connect": self.worker.process.pid,
            "sidecar": self.sidecar.process.pid,
            "service": self.service.process.pid,
        }
        running = {role: pid for role, pid in pids.items() if pid is not None}
        assert len(running) == len(pids), f"a process of the pipeline is not running: {pids}"
        return running

    def stop(self) -> None:
        self.worker.client().delete_connector(self.connector)
        self.sidecar.stop()
        self.service.stop()


def start_lakegate(
    stack: LocalStack,
    work: Path,
    bucket: str,
    name: str,
    table: dict[str, Any],
    catalogs: list[dict[str, Any]] | None = None,
    spark_conf: dict[str, str] | None = None,
    sink: str = "parquet",
    sidecar_poll: float = SIDECAR_POLL_SECONDS,
) -> LakegateRun:
    """Topic ``name`` (made here) landed by the S3 sink under ``<bucket>/<name>/data/`` (Aiven's
    naming) as ``sink`` says (:data:`SINKS`), followed by a sidecar, committed by a service of
    ``table`` (one entry of its ``tables``; ``catalogs`` for an Iceberg table; ``spark_conf``: the
    service's ``spark.conf``; ``sidecar_poll``: the sidecar's ``poll_interval_seconds``)."""
    assert stack.s3 is not None and stack.kafka is not None
    create_topic(stack.kafka.bootstrap_servers, name, PARTITIONS)
    service = ServiceProcess(work, [table], [f"s3a://{bucket}/"], name="service", s3={"endpoint": stack.s3.endpoint},
                             env=S3_ENV, catalogs=catalogs, spark_conf=spark_conf)  # fmt: skip
    service.start()
    service.spark_ui()
    worker = stack.workers[0]
    landing = {"kind": "s3", "bucket": bucket, "prefix": f"{name}/data/", "endpoint": stack.s3.endpoint,
               "naming": "aiven"}  # fmt: skip
    sidecar = SidecarProcess(
        work,
        "sidecar",
        {
            "worker_id": worker.worker_id,
            "connect": {"url": worker.url, "connectors": [name]},
            "kafka": {"bootstrap_servers": stack.kafka.bootstrap_servers},
            "storage": landing,
            "service": {"url": service.url, "token": "${LAKEGATE_SIDECAR_TOKEN}"},
            "poll_interval_seconds": sidecar_poll,
        },
        env=S3_ENV,
    ).start()
    if sink == "aiven":  # Aiven's default output: gzip JSON lines in the envelope
        output: dict[str, Any] = {"output": "jsonl", "compression": None,
                                  "format.output.fields": "key,value,offset,timestamp"}  # fmt: skip
    else:
        output = {"format.output.envelope": "false"}
    config = s3_sink_config([name], bucket, stack.s3.endpoint, s3mod.ACCESS_KEY, s3mod.SECRET_KEY,
                            prefix=f"{name}/data/", tasks=PARTITIONS, **output)  # fmt: skip
    connect = worker.client()
    connect.put_connector(name, config)
    connect.wait_running(name, PARTITIONS)
    return LakegateRun(worker, sidecar, service, name)


@dataclass(frozen=True)
class Measured:
    """What :func:`measure` saw in the measured window of one run."""

    cpu_by_process: dict[str, float]  # CPU seconds by role, each process with its descendants
    jit_by_process: dict[str, float]  # of each, its JIT compilers' seconds
    produced: int
    s3_requests: dict[str, int] | None  # by HTTP method, when an S3 request log was given

    @property
    def jit_cpu(self) -> float:
        """The JIT compilers' seconds of all the processes."""
        return sum(self.jit_by_process.values())


def measure(
    pids: dict[str, int],
    poller: FreshnessPoller,
    stack: LocalStack,
    topic: str,
    rate: int,
    seconds: int,
    warm_up_seconds: int,
    label: str,
    s3_log: S3RequestLog | None = None,
) -> Measured:
    """Warm ``topic``'s pipeline up, then produce ``rate``/s for ``seconds`` and wait until every
    record is visible to ``poller`` (started here, stopped at the end); ``s3_log`` counts the S3
    requests of that window."""
    assert stack.kafka is not None
    poller.start()
    warm_up(poller, stack.kafka.bootstrap_servers, topic, rate, warm_up_seconds)
    before = {k: cpu_seconds([p]) for k, p in pids.items()}
    jit_before = {k: jit_threads([p]) for k, p in pids.items()}
    mark = s3_log.mark() if s3_log else 0
    print(f"  {label}: producing {rate}/s for {seconds} s ...", flush=True)
    produced = produce(stack.kafka.bootstrap_servers, topic, rate, seconds)
    wait_for(poller, produced, timeout=seconds + 180)
    used = {k: cpu_seconds([p]) - before[k] for k, p in pids.items()}
    requests = s3_log.count_since(mark) if s3_log else None
    jit = {k: jit_seconds(jit_before[k], [p]) for k, p in pids.items()}
    return Measured(used, jit, produced, requests)


def lakegate_row(interval: int, rate: int, poller: FreshnessPoller, seen: Measured) -> dict[str, Any]:
    """Lakegate's result for one interval: its CPU by process, and its figures with the marginal
    part (the sidecar and the service, what Lakegate adds to Connect)."""
    used = seen.cpu_by_process
    marginal = used["sidecar"] + used["service"]
    return {
        "system": "lakegate",
        "interval_s": interval,
        "cpu_by_process_s": {k: round(v, 1) for k, v in used.items()},
        "jit_by_process_s": {k: round(v, 1) for k, v in seen.jit_by_process.items()},
        **figures(poller, seen.produced, sum(used.values()), marginal, rate, seen.jit_cpu),
    }


class Pipeline:
    """The shared stack and the two systems' runs."""

    def __init__(
        self,
        work: Path,
        warm_up_seconds: int = 0,
        catch_up_seconds: float = 0.0,
        sink: str = "parquet",
        mode: str = "append",
        service_conf: dict[str, str] | None = None,
        sidecar_poll: float = SIDECAR_POLL_SECONDS,
    ) -> None:
        """``service_conf``, ``sidecar_poll``: the service's ``spark.conf``, the sidecar's poll interval."""
        self.work = work
        self.service_conf = dict(service_conf or {})
        self.sidecar_poll = sidecar_poll
        self.warm_up_seconds = warm_up_seconds
        self.catch_up_seconds = catch_up_seconds
        self.sink = sink
        self.mode = mode
        self.stack = LocalStack(work / "stack", buckets=(BUCKET,))

    def __enter__(self) -> Pipeline:
        print("starting the S3 server, Kafka and a Connect worker ...", flush=True)
        self.stack.start()
        assert self.stack.s3 is not None and self.stack.kafka is not None
        self.s3 = self.stack.s3.client()
        host = self.stack.s3.endpoint.split("://", 1)[1]
        self.fs = pafs.S3FileSystem(
            endpoint_override=host,
            scheme="http",
            access_key=s3mod.ACCESS_KEY,
            secret_key=s3mod.SECRET_KEY,
            region=s3mod.REGION,
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self.stack.stop()

    def lakegate(self, interval: int, rate: int, seconds: int) -> dict[str, Any]:
        name = f"lg{interval}"
        table = {
            "name": name,
            "path": f"s3a://{BUCKET}/{name}",
            "topics": [name],
            "commit": {
                "interval_seconds": interval,
                "timeout_seconds": interval,
                "catch_up_seconds": catch_up_for(self.catch_up_seconds, interval),
            },
            **({"mode": "upsert", "key": ["id"]} if self.mode == "upsert" else {}),
        }
        run = start_lakegate(
            self.stack, self.work / name, BUCKET, name, table, None, self.service_conf, self.sink, self.sidecar_poll
        )
        poller = Poller(s3=self.s3, fs=self.fs, prefix=f"{name}/")
        try:
            seen = measure(run.pids(), poller, self.stack, name, rate, seconds, self.warm_up_seconds,
                           f"lakegate, commit interval {interval} s")  # fmt: skip
        finally:
            run.stop()
        return lakegate_row(interval, rate, poller, seen)

    def spark(self, interval: int, rate: int, seconds: int) -> dict[str, Any]:
        assert self.stack.s3 is not None and self.stack.kafka is not None
        name = f"ss{interval}"
        create_topic(self.stack.kafka.bootstrap_servers, name, PARTITIONS)
        script = Path(__file__).parent / "spark_streaming.py"
        log = (self.work / f"{name}.log").open("w")
        ready = self.work / f"{name}.ready"
        proc = subprocess.Popen(
            [
                sys.executable,
                str(script),
                "--bootstrap", self.stack.kafka.bootstrap_servers,
                "--topic", name,
                "--table", f"s3a://{BUCKET}/{name}",
                "--checkpoint", str(self.work / f"{name}-checkpoint"),
                "--trigger-seconds", str(interval),
                "--s3-endpoint", self.stack.s3.endpoint,
                "--ready-file", str(ready),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **S3_ENV},
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 300
            while not ready.exists():  # the query has started (and read the empty topic once)
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the Spark streaming job did not start: see {log.name}")
                time.sleep(0.5)
            poller = Poller(s3=self.s3, fs=self.fs, prefix=f"{name}/")
            poller.start()
            warm_up(poller, self.stack.kafka.bootstrap_servers, name, rate, self.warm_up_seconds)
            before = cpu_seconds([proc.pid])
            jit_before = jit_threads([proc.pid])
            print(
                f"  spark structured streaming, trigger {interval} s: producing {rate}/s for {seconds} s ...",
                flush=True,
            )
            produced = produce(self.stack.kafka.bootstrap_servers, name, rate, seconds)
            wait_for(poller, produced, timeout=seconds + 180)
            used = cpu_seconds([proc.pid]) - before
            jit = jit_seconds(jit_before, [proc.pid])
        finally:
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()
        return {
            "system": "spark-structured-streaming",
            "interval_s": interval,
            **figures(poller, produced, used, None, rate, jit),
        }


SYSTEMS = ("lakegate", "spark")


def pipeline_options(parser: argparse.ArgumentParser) -> None:
    """The ``pipeline`` part's options of ``scripts/bench`` (its rate, duration and catch-up are
    shared with ``iceberg-peer`` and stay in ``lakegate_bench/run.py``)."""
    parser.add_argument(
        "--intervals",
        type=int,
        nargs="+",
        default=[2, 10],
        help="pipeline: commit intervals / triggers, s (default 2 10)",
    )
    parser.add_argument(
        "--pipeline-systems",
        nargs="+",
        choices=SYSTEMS,
        default=list(SYSTEMS),
        help="pipeline: which systems to run (default both; one alone for a quicker look, not a comparison)",
    )
    parser.add_argument(
        "--pipeline-sink",
        choices=SINKS,
        default="parquet",
        help="pipeline: what the storage sink writes for Lakegate: Parquet without an envelope (default, added in "
        "place) or aiven, Aiven's default gzip JSON lines in the envelope (rewritten)",
    )
    parser.add_argument(
        "--pipeline-mode",
        choices=MODES,
        default="append",
        help="pipeline: Lakegate's table, append (default) or upsert keyed by id",
    )


def run(
    work: Path,
    intervals: list[int],
    rate: int,
    seconds: int,
    warm_up_seconds: int = 0,
    systems: tuple[str, ...] = SYSTEMS,
    catch_up_seconds: float = 0.0,
    sink: str = "parquet",
    mode: str = "append",
    service_conf: dict[str, str] | None = None,
    sidecar_poll: float = SIDECAR_POLL_SECONDS,
) -> dict[str, Any]:
    """Each of ``systems`` at each of ``intervals``; ``sink``, ``mode`` and ``service_conf`` (its
    ``spark.conf``) are Lakegate's (:data:`SINKS`, :data:`MODES`): the peer always reads the topic
    itself into an append table."""
    rows = []
    with Pipeline(work, warm_up_seconds, catch_up_seconds, sink, mode, service_conf, sidecar_poll) as pipeline:
        flush_ms = pipeline.stack.workers[0].offset_flush_interval_ms
        for interval in intervals:
            for system in systems:
                row = getattr(pipeline, system)(interval, rate, seconds)
                rows.append(row)
                print(
                    f"  {row['system']:>26} {interval:>3} s: freshness p50 {row['freshness_p50_s']} s, "
                    f"p99 {row['freshness_p99_s']} s; {row['cpu_s_per_million']} CPU-s per million records "
                    f"({row['jit_cpu_s']} of its {row['cpu_s']} CPU-s in JIT compilers)",
                    flush=True,
                )
                if "cpu_by_process_s" in row:
                    print(f"  {'':>26} {by_process(row)}")
                for stage, q in row.get("stages_s", {}).items():
                    print(f"  {'':>26} {stage:>15}: p50 {q['p50']} s, p99 {q['p99']} s, max {q['max']} s")
    return {
        "rate": rate,
        "seconds": seconds,
        "warm_up_seconds": warm_up_seconds,
        "catch_up_seconds": catch_up_by_interval(catch_up_seconds, intervals),
        "connect_offset_flush_ms": flush_ms,
        "lakegate_sink": sink,
        "lakegate_mode": mode,
        "service_conf": dict(service_conf or {}),
        "sidecar_poll_seconds": sidecar_poll,
        "results": rows,
    }
