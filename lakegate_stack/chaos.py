"""The chaos run: the real pipeline under seeded faults, checked for exactly-once at quiesce.

Used by ``scripts/chaos`` (the command) and ``tests/e2e/test_chaos.py`` (a short fixed-seed run in
CI). The stack is all real: Kafka, three Kafka Connect workers in one group running three S3 sink
connectors (the stand-in for Aiven's sink: ``chaos-parquet`` writes Parquet, ``chaos-jsonl`` and
``chaos-upsert`` gzip JSON lines, all with the ``offset`` field), the S3 server, one
``lakegate-sidecar`` per worker and the ``lakegate-service`` with fencing on. Three topics of six
partitions route to three Delta tables: two append tables and one ``mode: upsert`` table (key
``id``, deletion vectors). Two :class:`~lakegate_stack.proxy.FaultProxy` sit in the way: sidecars
-> service, and everyone -> S3.

A producer thread writes ``records`` records with unique ids at a paced rate (every
:data:`UPSERT_EVERY`-th one also changes one of :data:`UPSERT_KEYS` keys of the upsert topic) and
stops at each fault's *gate* (a record count drawn from the seed) until the fault is injected:
where a fault falls is decided by progress, never by racing the producer. Each fault then waits
for an observed outcome (the service process died at its crash point, the tasks moved, the sink
logged its split) within a bounded deadline, and recovers. At the end every fault is undone, the
harness waits for every table to hold Kafka's log end, and checks, with delta-rs and (when given)
delta-spark:

- every produced id is in its append table exactly once (``lost``, ``duplicated``);
- the upsert table holds one row per key, at the key's last change (``upsert_mismatches``);
- each partition's ``txn`` version equals the ``connect-<connector>`` group's committed offset;
- every file the tables reference lies under the table's root (nothing from outside the roots).

The report (:class:`ChaosReport`) is JSON: records, loss, duplicates, the upsert table's
mismatches, faults by kind, commits, duration, the seed, and ``recovery_s`` (SIGKILL of the
service to ready again).
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import statistics
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import requests

from lakegate_stack import s3 as s3mod
from lakegate_stack.connect import ConnectWorker, s3_sink_config
from lakegate_stack.delta_read import live_rows
from lakegate_stack.errors import StackError
from lakegate_stack.kafka import KafkaBroker, create_topic
from lakegate_stack.proxy import FaultProxy
from lakegate_stack.s3 import S3Server
from lakegate_stack.services import SIDECAR_TOKEN, ServiceProcess, SidecarProcess, sidecar_config

logger = logging.getLogger(__name__)

FAULT_KINDS = (
    "service_kill",  # SIGKILL of the service at a random moment, restart
    "service_kill_before_commit",  # SIGKILL between footer reads and the Delta commit
    "service_kill_after_commit",  # SIGKILL between the Delta commit landing and the HTTP answer
    "sidecar_kill",  # SIGKILL of a sidecar, restart
    "sidecar_zombie",  # a sidecar frozen while its worker's partitions move away, then thawed
    "worker_stop_start",  # graceful stop of a Connect worker (rebalance), start again
    "worker_kill",  # SIGKILL of a Connect worker, restart
    "task_restart",  # restart a sink task through the Connect REST API
    "sink_rewrite",  # a sink task fails after uploading: the range is re-written, an orphan stays
    "rogue_manifests",  # replayed, duplicated and reordered manifests from an outside client
    "service_unreachable",  # the sidecars cannot reach the service for 30 s
    "slow_s3",  # every S3 response delayed
)
PARTITIONS = 6
CONNECTORS = {
    "chaos-parquet": ("a", "parquet", "snappy"),
    "chaos-jsonl": ("b", "jsonl", "gzip"),
    "chaos-upsert": ("c", "jsonl", "gzip"),
}
UPSERT_EVERY = 4  # every 4th record also changes a key of the upsert topic c
UPSERT_KEYS = 500  # the keys those changes cycle through: each is changed many times
UPSERT_TABLE = "chaos_c"  # mode: upsert, key [id]: one row per key of topic c, its last seq
S3_ENV = {"AWS_ACCESS_KEY_ID": s3mod.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": s3mod.SECRET_KEY, "AWS_REGION": s3mod.REGION}


class ChaosError(StackError):
    """The run could not be carried out (a fault's outcome never came, the stack did not start);
    distinct from a run that finished and found loss or duplicates."""


@dataclass(frozen=True)
class ChaosSettings:
    """One run's parameters (``scripts/chaos --help`` describes each)."""

    seed: int = 1
    records: int = 50_000
    faults: int = 10
    kinds: tuple[str, ...] = FAULT_KINDS
    rate: int = 2_000  # records per second the producer aims at
    workers: int = 3
    interval_seconds: float = 2.0  # the tables' commit interval
    outage_seconds: float = 30.0  # how long service_unreachable lasts
    slow_s3_seconds: float = 20.0
    slow_s3_delay: float = 0.2
    quiesce_timeout: float = 600.0
    offset_check: str = "required"  # the tables' orphan guard; "off" shows what it prevents

    def __post_init__(self) -> None:
        unknown = set(self.kinds) - set(FAULT_KINDS)
        if unknown or not self.kinds:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(FAULT_KINDS)}")
        if self.records < 2 * PARTITIONS * 10 or self.faults < 0 or self.rate <= 0 or not 2 <= self.workers <= 5:
            raise ValueError("records must be >= 120, faults >= 0, rate > 0, workers 2..5")


@dataclass
class FaultRecord:
    """One injected fault: what, at which record, and how long it took to recover."""

    kind: str
    at_record: int
    at_s: float  # seconds since the producer started
    detail: str = ""
    took_s: float = 0.0
    recovery_s: float | None = None  # service faults: SIGKILL (or death) to ready again


@dataclass
class ChaosReport:
    """What ``scripts/chaos --report`` writes."""

    seed: int
    records_produced: int
    records_in_table: int
    lost: int
    duplicated: int
    faults_by_kind: dict[str, int]
    commits: int
    duration_s: float
    recovery_s: float | None  # the slowest service recovery (None: no service fault)
    recovery_s_all: list[float] = field(default_factory=list)
    txn_mismatches: list[str] = field(default_factory=list)
    outside_roots: list[str] = field(default_factory=list)
    spark_checked: bool = False
    spark_mismatches: list[str] = field(default_factory=list)
    faults: list[FaultRecord] = field(default_factory=list)
    orphans_made: int = 0
    proxies: dict[str, Any] = field(default_factory=dict)
    upsert_keys: int = 0  # rows of the upsert table
    upsert_mismatches: list[str] = field(default_factory=list)  # keys whose row is not their last change

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.duplicated
            or self.txn_mismatches
            or self.outside_roots
            or self.spark_mismatches
            or self.upsert_mismatches
        ) and (self.records_in_table == self.records_produced)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


SparkCheck = Callable[[str], list[int]]  # table URI (s3a://) -> every id in it, read by delta-spark


class Producer(threading.Thread):
    """Produces ids ``0..records-1`` at about ``rate``/s, stopping at each gate until it is opened.

    Record ``i`` goes to topic ``a`` or ``b`` (``i % 2``), partition ``(i // 2) % 6``. Every
    :data:`UPSERT_EVERY`-th record also sets key :func:`upsert_key` of topic ``c`` (the upsert
    table's) to ``seq = i``, in partition ``key % 6``. At a gate the producer flushes (so every
    record below it is in Kafka) and waits: the fault lands exactly there.
    """

    def __init__(self, bootstrap: str, topics: tuple[str, str, str], records: int, rate: int, gates: list[int]) -> None:
        super().__init__(name="chaos-producer", daemon=True)
        self.bootstrap, self.topics, self.records, self.rate = bootstrap, topics, records, rate
        self.reached = {n: threading.Event() for n in gates}
        self.opened = {n: threading.Event() for n in gates}
        self.stop_now = threading.Event()
        self.started_at = time.monotonic()
        self.produced = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._produce()
        except BaseException as exc:  # surfaced through wait_for / the final check
            self.error = exc

    def _produce(self) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=20, retries=10)
        batch = max(1, self.rate // 20)
        try:
            self.started_at = time.monotonic()
            for i in range(self.records):
                if i in self.reached:
                    producer.flush(120)
                    self.produced = i
                    self.reached[i].set()
                    while not self.opened[i].wait(0.5):
                        if self.stop_now.is_set():
                            return
                topic, partition = self.topics[i % 2], (i // 2) % PARTITIONS
                value = json.dumps({"id": i, "src": topic, "amount": i * 0.01}).encode()
                producer.send(topic, key=str(i).encode(), value=value, partition=partition)
                if i % UPSERT_EVERY == 0:
                    key = upsert_key(i)
                    change = json.dumps({"id": key, "seq": i}).encode()
                    producer.send(self.topics[2], key=str(key).encode(), value=change, partition=key % PARTITIONS)
                if i % batch == batch - 1:
                    time.sleep(batch / self.rate)
                if self.stop_now.is_set():
                    return
            producer.flush(120)
            self.produced = self.records
        finally:
            producer.close()

    def wait_for(self, gate: int, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while not self.reached[gate].wait(1):
            if self.error is not None:
                raise ChaosError(f"the producer failed: {self.error!r}")
            if time.monotonic() > deadline:
                raise ChaosError(f"the producer did not reach record {gate} in {timeout:.0f}s")


def upsert_key(i: int) -> int:
    """The key of topic ``c`` that record ``i`` changes (``i`` a multiple of :data:`UPSERT_EVERY`)."""
    return (i // UPSERT_EVERY) % UPSERT_KEYS


def upsert_model(produced: int) -> dict[int, int]:
    """The upsert table once the first ``produced`` records are committed: key -> its last ``seq``."""
    return {upsert_key(i): i for i in range(0, produced, UPSERT_EVERY)}


def wait_until(what: str, check: Callable[[], bool], timeout: float, poll: float = 1.0) -> float:
    """Poll ``check`` until true; returns the seconds it took, raises :class:`ChaosError` at the deadline."""
    started = time.monotonic()
    while True:
        try:
            if check():
                return time.monotonic() - started
        except Exception as exc:  # the thing being waited for may be down: keep polling
            logger.debug("waiting for %s: %s", what, exc)
        if time.monotonic() - started > timeout:
            raise ChaosError(f"{what}: not within {timeout:.0f}s")
        time.sleep(poll)


class ChaosRun:
    """One chaos run over ``workdir``. Kafka and the S3 server may be given (the tests share theirs);
    otherwise the run starts its own."""

    def __init__(
        self,
        settings: ChaosSettings,
        workdir: Path,
        *,
        kafka: KafkaBroker | None = None,
        s3: S3Server | None = None,
        spark_check: SparkCheck | None = None,
    ) -> None:
        self.settings = settings
        self.workdir = workdir
        self.rng = random.Random(settings.seed)
        self.run_id = uuid.uuid4().hex[:6]
        self.spark_check = spark_check
        self._own_kafka, self._own_s3 = kafka is None, s3 is None
        self.kafka, self.s3 = kafka, s3
        self.landing, self.lake = f"chaos-landing-{self.run_id}", f"chaos-lake-{self.run_id}"
        self.topics = (f"chaos-{self.run_id}-a", f"chaos-{self.run_id}-b", f"chaos-{self.run_id}-c")
        self.tables = {"chaos_a": self.topics[0], "chaos_b": self.topics[1], UPSERT_TABLE: self.topics[2]}
        self.connectors = {
            f"{name}-{self.run_id}": (self.topics["abc".index(t)], fmt, codec)
            for name, (t, fmt, codec) in CONNECTORS.items()
        }
        self.fault_dir = workdir / "faults"
        self.service_faults = workdir / "service-faults"
        self.workers: list[ConnectWorker] = []
        self.sidecars: list[SidecarProcess] = []
        self.service: ServiceProcess | None = None
        self.s3_proxy: FaultProxy | None = None
        self.service_proxy: FaultProxy | None = None
        self.faults: list[FaultRecord] = []
        self.producer: Producer | None = None

    # -- the stack --------------------------------------------------------------------------

    def _start_stack(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.fault_dir.mkdir(exist_ok=True)
        self.service_faults.mkdir(exist_ok=True)
        if self.s3 is None:
            self.s3 = S3Server(self.workdir).start()
        for bucket in (self.landing, self.lake):
            self.s3.create_bucket(bucket)
        s3_url = urlparse(self.s3.endpoint)
        self.s3_proxy = FaultProxy(s3_url.hostname or "127.0.0.1", s3_url.port or 80, name="s3").start()
        if self.kafka is None:
            self.kafka = KafkaBroker(self.workdir / "kafka").start()
        for topic in self.topics:
            create_topic(self.kafka.bootstrap_servers, topic, PARTITIONS)
        tables = [
            {
                "name": name,
                "path": f"s3a://{self.lake}/{name}",
                "topics": [topic],
                "placement": "copy_into_table",
                "offset_check": self.settings.offset_check,
                "commit": {"interval_seconds": self.settings.interval_seconds, "timeout_seconds": 10},
                **({"mode": "upsert", "key": ["id"]} if name == UPSERT_TABLE else {}),
            }
            for name, topic in self.tables.items()
        ]
        self.service = ServiceProcess(
            self.workdir,
            tables,
            [f"s3a://{self.landing}/"],
            s3={"endpoint": self.s3_proxy.url, "access_key": s3mod.ACCESS_KEY, "secret_key": s3mod.SECRET_KEY},
            kafka=self.kafka.bootstrap_servers,
            env={"LAKEGATE_TEST_FAULT_DIR": str(self.service_faults)},
        ).start()
        self.service_proxy = FaultProxy("127.0.0.1", self.service.port, name="service").start()
        group = f"chaos-connect-{self.run_id}"
        for i in range(1, self.settings.workers + 1):
            worker = ConnectWorker(
                self.workdir / "connect", self.kafka.bootstrap_servers, name=f"chaos-w{i}", group_id=group, heap="512m"
            )
            self.workers.append(worker.start())
        client = self.workers[0].client()
        for name, (topic, fmt, codec) in self.connectors.items():
            config = s3_sink_config(
                [topic],
                self.landing,
                self.s3_proxy.url,
                s3mod.ACCESS_KEY,
                s3mod.SECRET_KEY,
                prefix="landing/",
                output=fmt,
                compression=codec,
                tasks=3,
                **{
                    "format.output.fields": "key,value,offset,timestamp",
                    "lakegate.test.fault.dir": str(self.fault_dir),
                },
            )
            client.put_connector(name, config)
            client.wait_running(name, tasks=3, timeout=180)
        for i, worker in enumerate(self.workers, start=1):
            self.sidecars.append(self._sidecar(i, worker).start())

    def _sidecar(self, i: int, worker: ConnectWorker) -> SidecarProcess:
        assert self.kafka and self.s3_proxy and self.service_proxy
        return SidecarProcess(
            self.workdir,
            f"chaos-sidecar-{i}",
            sidecar_config(
                worker,
                list(self.connectors),
                self.kafka.bootstrap_servers,
                {
                    "kind": "s3",
                    "bucket": self.landing,
                    "prefix": "landing/",
                    "endpoint": self.s3_proxy.url,
                    "naming": "aiven",
                },
                self.service_proxy.url,
            ),
            env=S3_ENV,
        )

    def _stop_stack(self) -> None:
        if self.producer is not None:
            self.producer.stop_now.set()
        for sidecar in self.sidecars:
            if sidecar.process.pid:
                _signal(sidecar.process.pid, signal.SIGCONT)
            sidecar.stop()
        for worker in self.workers:
            worker.stop()
        for proxy in (self.service_proxy, self.s3_proxy):
            if proxy is not None:
                proxy.stop()
        if self.service is not None:
            self.service.stop()
        if self._own_kafka and self.kafka is not None:
            self.kafka.stop()
        if self._own_s3 and self.s3 is not None:
            self.s3.stop()

    # -- the run ----------------------------------------------------------------------------

    def run(self) -> ChaosReport:
        started = time.monotonic()
        try:
            self._start_stack()
            plan = self._plan()
            print(
                f"chaos: seed {self.settings.seed}, {self.settings.records:,} records, faults: "
                + ", ".join(f"{k}@{g:,}" for g, k in plan),
                flush=True,
            )
            assert self.kafka is not None
            self.producer = Producer(
                self.kafka.bootstrap_servers,
                self.topics,
                self.settings.records,
                self.settings.rate,
                [g for g, _ in plan],
            )
            self.producer.start()
            for n, (gate, kind) in enumerate(plan, start=1):
                self.producer.wait_for(gate)
                record = FaultRecord(kind, gate, round(time.monotonic() - self.producer.started_at, 1))
                t0 = time.monotonic()
                getattr(self, f"_fault_{kind}")(record, lambda g=gate: self.producer.opened[g].set())  # type: ignore[union-attr]
                self.producer.opened[gate].set()
                record.took_s = round(time.monotonic() - t0, 1)
                self.faults.append(record)
                print(
                    f"  fault {n}/{len(plan)} {kind} at record {gate:,}: {record.detail} ({record.took_s}s)", flush=True
                )
            self.producer.join(timeout=max(600.0, 5 * self.settings.records / self.settings.rate))
            if self.producer.is_alive() or self.producer.error is not None:
                raise ChaosError(f"the producer did not finish: {self.producer.error!r}")
            print(f"chaos: all {self.settings.records:,} records produced; waiting for the tables", flush=True)
            self._quiesce()
            return self._verify(time.monotonic() - started)
        finally:
            self._stop_stack()

    def _plan(self) -> list[tuple[int, str]]:
        """Fault gates (record counts) and kinds from the seed: every kind once before any repeats."""
        n = self.settings.faults
        low, high = self.settings.records // 20, self.settings.records * 19 // 20
        gates = sorted(self.rng.sample(range(low, high), n))
        kinds: list[str] = []
        while len(kinds) < n:
            batch = list(self.settings.kinds)
            self.rng.shuffle(batch)
            kinds.extend(batch)
        return list(zip(gates, kinds[:n], strict=True))

    # -- faults: each injects, opens the gate when the producer may go on, and recovers ------

    def _restart_service(self, record: FaultRecord, died_at: float) -> None:
        assert self.service is not None
        self.service.process.kill()  # reaps what is left; a no-op when the group is already gone
        self.service.start(timeout=300)
        record.recovery_s = round(time.monotonic() - died_at, 1)

    def _fault_service_kill(self, record: FaultRecord, go: Callable[[], None]) -> None:
        assert self.service is not None
        go()
        killed = time.monotonic()
        self.service.kill()
        self._restart_service(record, killed)
        record.detail = f"ready {record.recovery_s}s after SIGKILL"

    def _crash_point(self, record: FaultRecord, go: Callable[[], None], point: str) -> None:
        assert self.service is not None
        (self.service_faults / point).touch()
        go()  # commits need new data
        service = self.service
        wait_until(f"a commit reaching {point}", lambda: not service.process.running(), 300, poll=0.1)
        died = time.monotonic()
        self._restart_service(record, died)
        record.detail = f"died at {point}, ready {record.recovery_s}s later"

    def _fault_service_kill_before_commit(self, record: FaultRecord, go: Callable[[], None]) -> None:
        self._crash_point(record, go, "commit.before_delta")

    def _fault_service_kill_after_commit(self, record: FaultRecord, go: Callable[[], None]) -> None:
        self._crash_point(record, go, "commit.after_delta")

    def _fault_sidecar_kill(self, record: FaultRecord, go: Callable[[], None]) -> None:
        i = self.rng.randrange(len(self.sidecars))
        self.sidecars[i].kill()
        go()
        self.sidecars[i].start()
        record.detail = f"sidecar {i + 1} SIGKILLed and restarted"

    def _all_tasks_running_elsewhere(self, worker: ConnectWorker) -> bool:
        live = next(w for w in self.workers if w is not worker and w.process and w.process.running())
        for name in self.connectors:
            tasks = live.client().status(name)["tasks"]
            if len(tasks) != 3 or any(t["state"] != "RUNNING" or t["worker_id"] == worker.worker_id for t in tasks):
                return False
        return True

    def _fault_sidecar_zombie(self, record: FaultRecord, go: Callable[[], None]) -> None:
        i = self.rng.randrange(len(self.workers))
        worker, sidecar = self.workers[i], self.sidecars[i]
        pid = sidecar.process.pid
        assert pid is not None
        _signal(pid, signal.SIGSTOP)
        worker.stop()  # its partitions move while its sidecar is frozen mid-round
        go()
        moved = wait_until("the frozen sidecar's tasks to move", lambda: self._all_tasks_running_elsewhere(worker), 180)
        _signal(pid, signal.SIGCONT)  # the zombie wakes up with a stale view and sends it
        worker.start()
        record.detail = f"sidecar {i + 1} frozen; its worker's tasks moved in {moved:.0f}s; thawed"

    def _worker_down(self, record: FaultRecord, go: Callable[[], None], *, kill: bool) -> None:
        """Stop (or SIGKILL) a random worker, wait for its tasks to move, start it again."""
        i = self.rng.randrange(len(self.workers))
        worker = self.workers[i]
        if kill:
            assert worker.process is not None
            worker.process.kill()
        else:
            worker.stop()
        go()
        how = "SIGKILLed" if kill else "stopped"
        check = lambda: self._all_tasks_running_elsewhere(worker)  # noqa: E731
        moved = wait_until(f"the {how} worker's tasks to move", check, 240 if kill else 180)
        worker.start()
        record.detail = f"worker {i + 1} {how} (tasks moved in {moved:.0f}s) and started again"

    def _fault_worker_stop_start(self, record: FaultRecord, go: Callable[[], None]) -> None:
        self._worker_down(record, go, kill=False)

    def _fault_worker_kill(self, record: FaultRecord, go: Callable[[], None]) -> None:
        self._worker_down(record, go, kill=True)

    def _fault_task_restart(self, record: FaultRecord, go: Callable[[], None]) -> None:
        name = self.rng.choice(sorted(self.connectors))
        task = self.rng.randrange(3)
        live = next(w for w in self.workers if w.process and w.process.running())
        response = requests.post(f"{live.url}/connectors/{name}/tasks/{task}/restart", timeout=60)
        if response.status_code not in (200, 202, 204):
            raise ChaosError(f"task restart of {name}/{task}: {response.status_code} {response.text}")
        go()
        wait_until(
            f"{name} task {task} RUNNING again",
            lambda: live.client().status(name)["tasks"][task]["state"] == "RUNNING",
            120,
        )
        record.detail = f"{name} task {task} restarted through the REST API"

    def _claimed(self) -> list[str]:
        log = self.fault_dir / "claimed.log"
        return log.read_text().splitlines() if log.exists() else []

    def _fault_sink_rewrite(self, record: FaultRecord, go: Callable[[], None]) -> None:
        before = len(self._claimed())
        (self.fault_dir / "crash-after-upload").touch()
        go()
        wait_until("a sink task to take the crash-after-upload fault", lambda: len(self._claimed()) > before, 180)
        record.detail = "split and failed: " + "; ".join(self._claimed()[before:])

    def _fault_rogue_manifests(self, record: FaultRecord, go: Callable[[], None]) -> None:
        go()
        record.detail = RogueClient(self).attack(self.rng)

    def _fault_service_unreachable(self, record: FaultRecord, go: Callable[[], None]) -> None:
        assert self.service_proxy is not None
        self.service_proxy.cut()
        go()
        time.sleep(self.settings.outage_seconds)  # the fault's length, not a wait for progress
        self.service_proxy.restore()
        record.detail = f"sidecars cut off from the service for {self.settings.outage_seconds:.0f}s"

    def _fault_slow_s3(self, record: FaultRecord, go: Callable[[], None]) -> None:
        assert self.s3_proxy is not None
        self.s3_proxy.slow(self.settings.slow_s3_delay)
        go()
        time.sleep(self.settings.slow_s3_seconds)
        self.s3_proxy.slow(0)
        record.detail = f"S3 responses delayed {self.settings.slow_s3_delay}s for {self.settings.slow_s3_seconds:.0f}s"

    # -- quiesce and verify -------------------------------------------------------------------

    def _ends(self) -> dict[tuple[str, int], int]:
        from kafka import KafkaAdminClient, TopicPartition
        from kafka.admin import OffsetSpec

        assert self.kafka is not None
        admin = KafkaAdminClient(bootstrap_servers=self.kafka.bootstrap_servers)
        try:
            tps = [TopicPartition(t, p) for t in self.topics for p in range(PARTITIONS)]
            result = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in tps})
            return {(tp.topic, tp.partition): int(getattr(v, "offset", v)) for tp, v in result.items()}
        finally:
            admin.close()

    def _connect_committed(self) -> dict[tuple[str, int], int]:
        from kafka import KafkaAdminClient

        assert self.kafka is not None
        admin = KafkaAdminClient(bootstrap_servers=self.kafka.bootstrap_servers)
        try:
            out: dict[tuple[str, int], int] = {}
            for name in self.connectors:
                group = f"connect-{name}"
                for tp, meta in admin.list_group_offsets({group: None})[group].items():
                    out[(tp.topic, tp.partition)] = meta.offset
            return out
        finally:
            admin.close()

    def _table_offsets(self) -> dict[tuple[str, int], int]:
        assert self.service is not None
        out: dict[tuple[str, int], int] = {}
        for table in self.tables:
            body = self.service.call("GET", f"/v1/tables/{table}/offsets").json()
            for topic, parts in body.items():
                out.update({(topic, int(p)): int(o) for p, o in parts.items()})
        return out

    def _quiesce(self) -> None:
        """Undo every fault still in effect, then wait for every table to hold Kafka's log ends."""
        assert self.service is not None and self.service_proxy and self.s3_proxy
        self.service_proxy.restore()
        self.s3_proxy.slow(0)
        for sidecar in self.sidecars:
            if sidecar.process.pid:
                _signal(sidecar.process.pid, signal.SIGCONT)
        if not self.service.process.running():
            self.service.start(timeout=300)
        for worker in self.workers:
            if not (worker.process and worker.process.running()):
                worker.start()
        for i, sidecar in enumerate(self.sidecars):
            if not sidecar.process.running():
                self.sidecars[i] = sidecar.start()
        ends = self._ends()
        last: dict[tuple[str, int], int] = {}

        def caught_up() -> bool:
            nonlocal last
            last = self._table_offsets()
            return all(last.get(tp, 0) == end for tp, end in ends.items())

        try:
            bound = max(self.settings.quiesce_timeout, self.settings.records / 250)  # a backlog takes longer
            took = wait_until("the tables to reach Kafka's log ends", caught_up, bound, 2)
        except ChaosError:
            behind = {f"{t}-{p}": (last.get((t, p), 0), e) for (t, p), e in ends.items() if last.get((t, p), 0) != e}
            print(f"chaos: the tables did not catch up; (table, log end) per partition behind: {behind}", flush=True)
            return  # verified as it stands: what is missing is reported as lost
        print(f"chaos: tables caught up {took:.0f}s after the last record", flush=True)

    def _verify(self, duration: float) -> ChaosReport:
        from deltalake import DeltaTable

        assert self.s3 is not None and self.service is not None and self.producer is not None
        options = {"AWS_ENDPOINT_URL": self.s3.endpoint, "AWS_ALLOW_HTTP": "true", **S3_ENV}
        connect = self._connect_committed()
        produced_by_topic = Counter(self.topics[i % 2] for i in range(self.producer.produced))
        ids_all: list[int] = []
        txn_mismatches: list[str] = []
        outside: list[str] = []
        spark_mismatches: list[str] = []
        upsert_rows: list[dict[str, Any]] = []
        for table, topic in self.tables.items():
            uri = f"s3://{self.lake}/{table}"
            dt = DeltaTable(uri, storage_options=options)
            if table == UPSERT_TABLE:
                upsert_rows = live_rows(dt, ["id", "seq"])
                ids = [r["id"] for r in upsert_rows]
            else:
                ids = [r["id"] for r in live_rows(dt, ["id"])]
                ids_all.extend(ids)
            for path in dt.file_uris():
                if not path.startswith(f"{uri}/"):
                    outside.append(path)
            for p in range(PARTITIONS):
                version = dt.transaction_version(f"lakegate-{table}-{topic}-{p}")
                if version != connect.get((topic, p)):
                    txn_mismatches.append(f"{topic}-{p}: txn {version}, connect {connect.get((topic, p))}")
            if self.spark_check is not None:
                spark_ids = self.spark_check(f"s3a://{self.lake}/{table}")
                if sorted(spark_ids) != sorted(ids):
                    spark_mismatches.append(f"{table}: delta-spark read {len(spark_ids)} ids, delta-rs {len(ids)}")
            logger.info("table %s: %d ids (%d produced)", table, len(ids), produced_by_topic.get(topic, 0))
        counts = Counter(ids_all)
        produced = self.producer.produced
        lost = sum(1 for i in range(produced) if i not in counts)
        duplicated = sum(c - 1 for c in counts.values() if c > 1)
        commits = sum(DeltaTable(f"s3://{self.lake}/{t}", storage_options=options).version() + 1 for t in self.tables)
        upsert_mismatches = upsert_mismatches_of(upsert_rows, upsert_model(produced))
        recoveries = [f.recovery_s for f in self.faults if f.recovery_s is not None]
        assert self.s3_proxy and self.service_proxy
        return ChaosReport(
            seed=self.settings.seed,
            records_produced=produced,
            records_in_table=len(ids_all),
            lost=lost,
            duplicated=duplicated,
            faults_by_kind=dict(Counter(f.kind for f in self.faults)),
            commits=commits,
            duration_s=round(duration, 1),
            recovery_s=max(recoveries) if recoveries else None,
            recovery_s_all=recoveries,
            txn_mismatches=txn_mismatches,
            outside_roots=outside,
            spark_checked=self.spark_check is not None,
            spark_mismatches=spark_mismatches,
            faults=self.faults,
            orphans_made=len(self._claimed()),
            proxies={p.name: asdict(p.stats()) for p in (self.s3_proxy, self.service_proxy)},
            upsert_keys=len(upsert_rows),
            upsert_mismatches=upsert_mismatches,
        )


class RogueClient:
    """An outside client with a sidecar token: replays, duplicates and reorders manifests.

    It derives ranges from the landing area's names alone (no orphan guard of its own), claims
    leases as a second sidecar of a live worker, and sends each manifest twice, in shuffled order,
    with one manifest id reused for different files and one already-committed range replayed.
    The service must take none of it as new data beyond what the real sidecars would send.
    """

    def __init__(self, run: ChaosRun) -> None:
        self.run = run

    def attack(self, rng: random.Random) -> str:
        run = self.run
        assert run.service is not None and run.s3 is not None
        committed = run._connect_committed()
        listing = self._listing()
        files: list[dict[str, Any]] = []
        for (topic, partition), starts in listing.items():
            limit = committed.get((topic, partition), 0)
            complete = sorted(s for s in starts if s < limit)
            for j, start in enumerate(complete):
                end = (complete[j + 1] if j + 1 < len(complete) else limit) - 1
                files.append(self._file(topic, partition, start, end, listing[(topic, partition)][start]))
        if not files:
            return "nothing listed yet"
        rng.shuffle(files)
        statuses: Counter[str] = Counter()
        sidecar = {"id": f"rogue-{uuid.uuid4().hex[:6]}", "worker": "127.0.0.1:1"}  # the workers' host
        epochs = self._claim(sidecar)
        for f in files:
            if (f["topic"], f["partition"]) in epochs:
                f["lease_epoch"] = epochs[(f["topic"], f["partition"])]
        batches = [files[i : i + 50] for i in range(0, len(files), 50)]
        for batch in batches:
            body = {"manifest_id": f"rogue-{uuid.uuid4()}", "sidecar": sidecar, "files": batch}
            for _ in range(2):  # duplicated
                statuses.update(self._send(body))
        replay = {"manifest_id": f"rogue-{uuid.uuid4()}", "sidecar": sidecar, "files": batches[0]}
        statuses.update(self._send(replay))
        reused = {**replay, "files": batches[-1][:1] if len(batches) > 1 else batches[0][:1]}
        answer = run.service.call("POST", "/v1/manifests", SIDECAR_TOKEN, json=reused)
        statuses[f"http_{answer.status_code}"] += 1
        return f"{len(files)} files in {len(batches)} manifests x2 + replays: {dict(statuses)}"

    def _claim(self, sidecar: dict[str, str]) -> dict[tuple[str, int], int]:
        """Lease every partition as a second sidecar on the workers' host (the real sidecars take
        them back on their next round): the epoch each grant carries."""
        assert self.run.service is not None
        epochs: dict[tuple[str, int], int] = {}
        for name, (topic, _, _) in self.run.connectors.items():
            body = {
                "sidecar": sidecar,
                "connector": name,
                "tasks": [0, 1, 2],
                "partitions": [{"topic": topic, "partition": p} for p in range(PARTITIONS)],
            }
            answer = self.run.service.call("POST", "/v1/leases", SIDECAR_TOKEN, json=body)
            if answer.status_code != 200:
                continue
            for grant in answer.json().get("leases", []):
                if grant.get("granted"):
                    epochs[(grant["topic"], grant["partition"])] = grant["epoch"]
        return epochs

    def _listing(self) -> dict[tuple[str, int], dict[int, int]]:
        run = self.run
        assert run.s3 is not None
        client = run.s3.client()
        out: dict[tuple[str, int], dict[int, int]] = {}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=run.landing, Prefix="landing/"):
            for obj in page.get("Contents", []):
                name = obj["Key"][len("landing/") :]
                topic, _, rest = name.rpartition("-")
                topic, _, partition = topic.rpartition("-")
                if topic in run.topics and partition.isdigit() and rest.isdigit():
                    out.setdefault((topic, int(partition)), {})[int(rest)] = int(obj["Size"])
        return out

    def _file(self, topic: str, partition: int, start: int, end: int, size: int) -> dict[str, Any]:
        fmt = next(f for t, f, _ in self.run.connectors.values() if t == topic)
        key = f"landing/{topic}-{partition}-{start:020d}"
        return {
            "path": f"s3a://{self.run.landing}/{key}",
            "topic": topic,
            "partition": partition,
            "start_offset": start,
            "end_offset": end,
            "size_bytes": size,
            "format": fmt,
        }

    def _send(self, body: dict[str, Any]) -> list[str]:
        assert self.run.service is not None
        answer = self.run.service.call("POST", "/v1/manifests", SIDECAR_TOKEN, json=body)
        if answer.status_code != 202:
            return [f"http_{answer.status_code}"]
        return [f["status"] for f in answer.json()["files"]]


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def upsert_mismatches_of(rows: list[dict[str, Any]], model: dict[int, int]) -> list[str]:
    """How the upsert table's rows differ from the model (key -> last seq): the first 20, then how many more."""
    got: dict[int, int] = {}
    out: list[str] = []
    for r in rows:
        if r["id"] in got:
            out.append(f"key {r['id']} is in the table twice")
        got[r["id"]] = r["seq"]
    for key in sorted(set(got) | set(model)):
        if got.get(key) != model.get(key):
            out.append(f"key {key}: seq {got.get(key)} in the table, {model.get(key)} last produced")
    return out if len(out) <= 20 else [*out[:20], f"... and {len(out) - 20} more"]


def summary(report: ChaosReport) -> str:
    """The report as a few lines for a person."""
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(report.faults_by_kind.items()))
    recov = (
        f"recovery_s max {report.recovery_s}, median {statistics.median(report.recovery_s_all):.1f} "
        f"over {len(report.recovery_s_all)} service restarts"
        if report.recovery_s_all
        else "no service restart"
    )
    spark = (
        "not run"
        if not report.spark_checked
        else "DISAGREES with delta-rs"
        if report.spark_mismatches
        else "agrees with delta-rs"
    )
    return "\n".join(
        [
            f"chaos seed {report.seed}: {'OK' if report.ok else 'FAILED'} in {report.duration_s:.0f}s",
            f"  records produced {report.records_produced:,}, in the tables {report.records_in_table:,}, "
            f"lost {report.lost}, duplicated {report.duplicated}",
            f"  faults {sum(report.faults_by_kind.values())}: {kinds}",
            f"  commits {report.commits}; orphans made by the sink {report.orphans_made}; {recov}",
            f"  txn mismatches {len(report.txn_mismatches)}, files outside the roots {len(report.outside_roots)}, "
            f"delta-spark {spark}",
            f"  upsert table: {report.upsert_keys} keys, {len(report.upsert_mismatches)} not at their last change",
        ]
    )
