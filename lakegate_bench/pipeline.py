"""Benchmark: end-to-end freshness and CPU cost of Lakegate's pipeline beside Spark Structured Streaming.

On one local stack (the S3 server, Kafka, one Connect worker), for each commit interval / trigger
in ``--intervals``, records are produced at ``--rate`` per second for ``--seconds`` (each carries
``produced_ms``), into a new 3-partition topic, and land in a new Delta table on the S3 server:

- **Lakegate**: the Connect S3 sink (Parquet, no envelope, Connect's offset flush every 2 s as
  the local stack sets it) -> one sidecar -> the service (``commit.interval_seconds`` = the interval),
  files added in place;
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

import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow.fs as pafs
import pyarrow.parquet as pq
from kafka import KafkaProducer

from lakegate_stack import procfs
from lakegate_stack import s3 as s3mod
from lakegate_stack.connect import ConnectWorker, s3_sink_config
from lakegate_stack.kafka import create_topic
from lakegate_stack.procfs import process_tree, tree_cpu_seconds
from lakegate_stack.services import ServiceProcess, SidecarProcess
from lakegate_stack.stack import LocalStack

BUCKET = "lake"
PARTITIONS = 3
S3_ENV = {"AWS_ACCESS_KEY_ID": s3mod.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": s3mod.SECRET_KEY, "AWS_REGION": s3mod.REGION}


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of these processes and all their descendants, now."""
    return tree_cpu_seconds(pids)


def jit_threads(pids: list[int]) -> dict[str, float]:
    """CPU seconds, now, of every JIT compiler thread (HotSpot's ``C1/C2 CompilerThread``) of these
    processes and their descendants, by ``pid/tid``. A compiler thread that exits between two
    readings takes its time with it, so a difference of two readings can only under-count."""
    found = {}
    for pid in process_tree(pids):
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                name = (task / "comm").read_text().strip()
            except OSError:
                continue
            if name.startswith(("C1 CompilerThre", "C2 CompilerThre")):
                found[f"{pid}/{task.name}"] = procfs.cpu_seconds(task / "stat")
    return found


def jit_seconds(before: dict[str, float], pids: list[int]) -> float:
    """CPU seconds the JIT compilers of ``pids`` used since ``before`` (a :func:`jit_threads`)."""
    return sum(cpu - before.get(thread, 0.0) for thread, cpu in jit_threads(pids).items())


@dataclass(eq=False)
class FreshnessPoller(threading.Thread):
    """One reader of a table, every 0.25 s: for every new commit, when it was first seen and the
    ``produced_ms`` of every record its added files hold. A format's poller gives :meth:`poll`."""

    seen_ms: list[tuple[int, int]] = field(default_factory=list)  # (produced_ms, visible_ms) per record
    # per record, where its time went, when the format's poller can tell: (produced_ms, the file's
    # last-modified ms on the S3 server, the commit's timestamp ms, visible_ms)
    stages_ms: list[tuple[int, int, int, int]] = field(default_factory=list)
    versions: set[str] = field(default_factory=set)
    warm_up_versions: int = 0  # of ``versions``, those committed before the measured run
    stop: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    def __post_init__(self) -> None:
        threading.Thread.__init__(self, name="freshness-poller", daemon=True)

    def run(self) -> None:
        try:
            while not self.stop.wait(0.25):
                self.poll()
            self.poll()
        except BaseException as exc:  # reported by the caller
            self.error = exc

    def poll(self) -> None:
        raise NotImplementedError


@dataclass(eq=False, kw_only=True)
class Poller(FreshnessPoller):
    """Lists a Delta table's log on the S3 server (its commits are the log's JSON files)."""

    s3: Any
    fs: pafs.S3FileSystem
    prefix: str  # the table's key prefix, ending in /

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
                if add is None:
                    continue
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


def produce(bootstrap: str, topic: str, rate: int, seconds: int) -> int:
    """``rate`` records per second for ``seconds``, paced by the clock; returns how many."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, acks="all")
    total, started = rate * seconds, time.monotonic()
    base = int(time.time() * 1000) * 1000  # ids unique across calls (the warm-up, then the run)
    for n in range(total):
        due = started + n / rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        value = {"id": base + n, "produced_ms": int(time.time() * 1000), "amount": n * 0.25, "note": f"record {n}"}
        producer.send(topic, key=str(n).encode(), value=json.dumps(value).encode(), partition=n % PARTITIONS)
    producer.flush()
    producer.close()
    return total


def quantiles(values: list[float]) -> dict[str, float]:
    """p50 / p99 / max of ``values`` (seconds), rounded to 10 ms."""
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 2),
        "p99": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 2),
        "max": round(ordered[-1], 2),
    }


def stage_figures(stages_ms: list[tuple[int, int, int, int]]) -> dict[str, dict[str, float]]:
    """Where a record's freshness went, per stage (p50 / p99 / max over the records, s): until its
    file was on the S3 server (the sink: Connect's flush), until the commit that added it (the
    committer: for Lakegate the sidecar's poll, the wait for the round and the commit), until the
    poller saw that commit (the reader's own poll)."""
    if not stages_ms:
        return {}
    return {
        "to_file": quantiles([(w - p) / 1000 for p, w, _, _ in stages_ms]),
        "file_to_commit": quantiles([(c - w) / 1000 for _, w, c, _ in stages_ms]),
        "commit_to_seen": quantiles([(v - c) / 1000 for _, _, c, v in stages_ms]),
    }


def figures(
    poller: FreshnessPoller, expected: int, cpu: float, marginal: float | None, rate: int, jit: float
) -> dict[str, Any]:
    """A run's freshness and CPU; ``jit`` is the part of ``cpu`` its JIT compilers used."""
    fresh = [(v - p) / 1000 for p, v in poller.seen_ms]
    if len(fresh) != expected:
        raise SystemExit(f"the table holds {len(fresh)} records, {expected} were produced")
    q = quantiles(fresh)
    out = {
        "records": expected,
        "rate": rate,
        "commits": len(poller.versions) - poller.warm_up_versions,  # in the measured run
        "freshness_p50_s": q["p50"],
        "freshness_p99_s": q["p99"],
        "freshness_max_s": q["max"],
        **({"stages_s": stage_figures(poller.stages_ms)} if poller.stages_ms else {}),
        "cpu_s": round(cpu, 1),
        "cpu_s_per_million": round(cpu / expected * 1e6, 1),
        "jit_cpu_s": round(jit, 1),
    }
    if marginal is not None:
        out.update(marginal_cpu_s=round(marginal, 1), marginal_cpu_s_per_million=round(marginal / expected * 1e6, 1))
    return out


WARM_UP = 300  # records produced and waited for before the measured run: first commits load code


def warm_up(poller: FreshnessPoller, bootstrap: str, topic: str, rate: int, seconds: int) -> None:
    """Produce a few records and wait until they are in the table (the first commit of either
    system is seconds of class loading and planning that no steady state has), then, with
    ``seconds``, that many seconds at the measured rate (what the JVMs compile for this load is
    compiled before the measurement, as in a pipeline that has run for a while); forget them."""
    expected = produce(bootstrap, topic, WARM_UP, 1)
    if seconds:
        print(f"    warming up: {rate}/s for {seconds} s, not measured ...", flush=True)
        expected += produce(bootstrap, topic, rate, seconds)
    wait_for(poller, expected, timeout=300 + seconds, stop=False)
    poller.seen_ms.clear()
    poller.stages_ms.clear()
    poller.warm_up_versions = len(poller.versions)


def wait_for(poller: FreshnessPoller, expected: int, timeout: float, *, stop: bool = True) -> None:
    deadline = time.monotonic() + timeout
    while len(poller.seen_ms) < expected:
        if poller.error is not None:
            raise poller.error
        if time.monotonic() > deadline:
            raise SystemExit(f"only {len(poller.seen_ms)} of {expected} records visible after {timeout:.0f} s")
        time.sleep(0.5)
    if stop:
        poller.stop.set()
        poller.join(10)


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
) -> LakegateRun:
    """Topic ``name`` (made here) landed by the S3 sink as Parquet without an envelope under
    ``<bucket>/<name>/data/`` (Aiven's naming), followed by a sidecar, committed by a service of
    ``table`` (one entry of its ``tables``; ``catalogs`` for an Iceberg table)."""
    assert stack.s3 is not None and stack.kafka is not None
    create_topic(stack.kafka.bootstrap_servers, name, PARTITIONS)
    service = ServiceProcess(work, [table], [f"s3a://{bucket}/"], name="service", s3={"endpoint": stack.s3.endpoint},
                             env=S3_ENV, catalogs=catalogs)  # fmt: skip
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
            "poll_interval_seconds": 1,
        },
        env=S3_ENV,
    ).start()
    config = s3_sink_config([name], bucket, stack.s3.endpoint, s3mod.ACCESS_KEY, s3mod.SECRET_KEY,
                            prefix=f"{name}/data/", tasks=PARTITIONS)  # fmt: skip
    connect = worker.client()
    connect.put_connector(name, {**config, "format.output.envelope": "false"})
    connect.wait_running(name, PARTITIONS)
    return LakegateRun(worker, sidecar, service, name)


@dataclass(frozen=True)
class Measured:
    """What :func:`measure` saw in the measured window of one run."""

    cpu_by_process: dict[str, float]  # CPU seconds by role, each process with its descendants
    jit_cpu: float  # of their sum, the JIT compilers' seconds
    produced: int
    s3_requests: dict[str, int] | None  # by HTTP method, when an S3 request log was given


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
    measured = list(pids.values())
    before = {k: cpu_seconds([p]) for k, p in pids.items()}
    jit_before = jit_threads(measured)
    mark = s3_log.mark() if s3_log else 0
    print(f"  {label}: producing {rate}/s for {seconds} s ...", flush=True)
    produced = produce(stack.kafka.bootstrap_servers, topic, rate, seconds)
    wait_for(poller, produced, timeout=seconds + 180)
    used = {k: cpu_seconds([p]) - before[k] for k, p in pids.items()}
    requests = s3_log.count_since(mark) if s3_log else None
    return Measured(used, jit_seconds(jit_before, measured), produced, requests)


ANSI_COLOUR = re.compile(r"\x1b\[[0-9;]*m")  # moto's log colours some methods


@dataclass(frozen=True)
class S3RequestLog:
    """The S3 server's request log (moto's, one line per request: ``"<METHOD> /<bucket>/..."``),
    counted for one bucket. Who sent a request is not in the log: a bucket is one system's."""

    path: Path
    bucket: str

    def mark(self) -> int:
        """Where the log ends now."""
        return self.path.stat().st_size

    def count_since(self, mark: int) -> dict[str, int]:
        """Requests to the bucket logged after ``mark``, by HTTP method."""
        counts: dict[str, int] = {}
        with self.path.open("rb") as log:
            log.seek(mark)
            for line in log:
                _, sep, rest = ANSI_COLOUR.sub("", line.decode(errors="replace")).partition('"')
                method, _, target = rest.partition(" ")
                if sep and (target.startswith(f"/{self.bucket}/") or target.startswith(f"/{self.bucket}?")):
                    counts[method] = counts.get(method, 0) + 1
        return counts


def lakegate_row(interval: int, rate: int, poller: FreshnessPoller, seen: Measured) -> dict[str, Any]:
    """Lakegate's result for one interval: its CPU by process, and its figures with the marginal
    part (the sidecar and the service, what Lakegate adds to Connect)."""
    used = seen.cpu_by_process
    marginal = used["sidecar"] + used["service"]
    return {
        "system": "lakegate",
        "interval_s": interval,
        "cpu_by_process_s": {k: round(v, 1) for k, v in used.items()},
        **figures(poller, seen.produced, sum(used.values()), marginal, rate, seen.jit_cpu),
    }


class Pipeline:
    """The shared stack and the two systems' runs."""

    def __init__(self, work: Path, warm_up_seconds: int = 0, catch_up_seconds: float = 0.0) -> None:
        self.work = work
        self.warm_up_seconds = warm_up_seconds
        self.catch_up_seconds = catch_up_seconds
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
        }
        run = start_lakegate(self.stack, self.work / name, BUCKET, name, table)
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


def catch_up_for(catch_up: float, interval: float) -> float:
    """``commit.catch_up_seconds`` for a table of ``interval``: ``catch_up``, at most half the interval."""
    return min(catch_up, interval / 2)


def catch_up_by_interval(catch_up: float, intervals: list[int]) -> dict[str, float]:
    """The result JSON's record of :func:`catch_up_for` at each interval."""
    return {str(i): catch_up_for(catch_up, i) for i in intervals}


def run(
    work: Path,
    intervals: list[int],
    rate: int,
    seconds: int,
    warm_up_seconds: int = 0,
    systems: tuple[str, ...] = SYSTEMS,
    catch_up_seconds: float = 0.0,
) -> dict[str, Any]:
    rows = []
    with Pipeline(work, warm_up_seconds, catch_up_seconds) as pipeline:
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
                for stage, q in row.get("stages_s", {}).items():
                    print(f"  {'':>26} {stage:>15}: p50 {q['p50']} s, p99 {q['p99']} s, max {q['max']} s")
    return {
        "rate": rate,
        "seconds": seconds,
        "warm_up_seconds": warm_up_seconds,
        "catch_up_seconds": catch_up_by_interval(catch_up_seconds, intervals),
        "connect_offset_flush_ms": flush_ms,
        "results": rows,
    }
