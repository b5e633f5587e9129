"""One chaos run (:class:`ChaosRun`): the stack built, the producer started, each fault of the
seed's plan injected at its gate, then the end (``lakegate_stack.chaos.verify``)."""

from __future__ import annotations

import logging
import random
import signal
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

from lakegate_stack import s3 as s3mod
from lakegate_stack.chaos.faults import FAULTS
from lakegate_stack.chaos.producer import Producer
from lakegate_stack.chaos.report import ChaosReport, FaultRecord
from lakegate_stack.chaos.settings import (
    CONNECTORS,
    ICEBERG_CATALOG,
    ICEBERG_TABLE,
    PARTITIONS,
    PEER_TABLE,
    PEER_TASKS,
    S3_ENV,
    UPSERT_TABLE,
    ChaosError,
    ChaosSettings,
    SparkCheck,
    TableRef,
    signal_process,
)
from lakegate_stack.chaos.verify import quiesce, verify
from lakegate_stack.connect import SINK_PLUGIN_GROUP, ConnectWorker, s3_sink_config
from lakegate_stack.iceberg_catalog import IcebergRestCatalog
from lakegate_stack.iceberg_peer import PEER_PLUGIN_GROUP, create_control_topic, create_namespace, peer_sink_config
from lakegate_stack.kafka import KafkaBroker, create_topic
from lakegate_stack.proxy import FaultProxy
from lakegate_stack.s3 import S3Server
from lakegate_stack.services import ServiceProcess, SidecarProcess, sidecar_config

logger = logging.getLogger(__name__)


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
        self.tables = {"chaos_a": self.topics[0], ICEBERG_TABLE: self.topics[1], UPSERT_TABLE: self.topics[2]}
        self.catalog: IcebergRestCatalog | None = None
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
        self.catalog_proxy: FaultProxy | None = None
        self.peer_connector = f"chaos-peer-{self.run_id}" if settings.peer else None
        self.peer_wait_s: float | None = None  # how long the end waited for the peer's table
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
        # the Iceberg table's catalog writes its metadata to S3 itself, past the fault proxy
        self.catalog = IcebergRestCatalog(
            self.workdir / "iceberg-rest", f"s3a://{self.lake}/warehouse", self.s3
        ).start()
        self.catalog_proxy = FaultProxy("127.0.0.1", self.catalog.port, name="catalog").start()
        tables = [
            {
                "name": name,
                "path": self.table_uri(name),
                "topics": [topic],
                "placement": "copy_into_table",
                "offset_check": self.settings.offset_check,
                "commit": {"interval_seconds": self.settings.interval_seconds, "timeout_seconds": 10},
                **({"mode": "upsert", "key": ["id"]} if name == UPSERT_TABLE else {}),
                **({"format": "iceberg"} if name == ICEBERG_TABLE else {}),
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
            catalogs=[{"name": ICEBERG_CATALOG, "type": "rest", "uri": self.catalog_proxy.url}],
        ).start()
        self.service_proxy = FaultProxy("127.0.0.1", self.service.port, name="service").start()
        group = f"chaos-connect-{self.run_id}"
        for i in range(1, self.settings.workers + 1):
            worker = ConnectWorker(
                self.workdir / "connect",
                self.kafka.bootstrap_servers,
                name=f"chaos-w{i}",
                group_id=group,
                heap="768m" if self.settings.peer else "512m",
                plugins=(SINK_PLUGIN_GROUP, PEER_PLUGIN_GROUP) if self.settings.peer else (SINK_PLUGIN_GROUP,),
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
        if self.peer_connector is not None:
            self._start_peer()
        for i, worker in enumerate(self.workers, start=1):
            self.sidecars.append(self._sidecar(i, worker).start())

    def _start_peer(self) -> None:
        """Apache Iceberg's sink on topics a and b, committing into :data:`PEER_TABLE` every
        interval, through the same S3 and catalog proxies as the service."""
        assert self.kafka and self.s3_proxy and self.catalog_proxy and self.peer_connector
        control = f"chaos-{self.run_id}-control"
        create_control_topic(self.kafka.bootstrap_servers, control)
        assert self.catalog is not None
        create_namespace(self.catalog.uri, PEER_TABLE.split(".")[0])
        config = peer_sink_config(
            list(self.topics[:2]),
            PEER_TABLE,
            self.catalog_proxy.url,
            self.s3_proxy.url,
            control_topic=control,
            commit_interval_ms=int(self.settings.interval_seconds * 1000),
            tasks=PEER_TASKS,
        )
        client = self.workers[0].client()
        client.put_connector(self.peer_connector, config)
        client.wait_running(self.peer_connector, tasks=PEER_TASKS, timeout=180)

    def all_connectors(self) -> list[str]:
        """Every connector of the run: the storage sinks', then the peer's."""
        return [*self.connectors, *([self.peer_connector] if self.peer_connector else [])]

    def table_uri(self, name: str) -> str:
        """Where a table lives: ``s3a://<lake>/<name>``, an Iceberg table under the catalog's warehouse."""
        if name == ICEBERG_TABLE:
            return f"s3a://{self.lake}/warehouse/{name.replace('.', '/')}"
        return f"s3a://{self.lake}/{name}"

    def table_ref(self, name: str) -> TableRef:
        """How a Spark reader finds table ``name`` (see :class:`TableRef`)."""
        if name == ICEBERG_TABLE:
            assert self.catalog is not None
            return TableRef(name, self.table_uri(name), self.catalog.uri)
        return TableRef(name, self.table_uri(name))

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
                signal_process(sidecar.process.pid, signal.SIGCONT)
            sidecar.stop()
        for worker in self.workers:
            worker.stop()
        for proxy in (self.service_proxy, self.s3_proxy, self.catalog_proxy):
            if proxy is not None:
                proxy.stop()
        if self.service is not None:
            self.service.stop()
        if self.catalog is not None:
            self.catalog.stop()
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
            producer = self.producer
            producer.start()
            for n, (gate, kind) in enumerate(plan, start=1):
                producer.wait_for(gate)
                record = FaultRecord(kind, gate, round(time.monotonic() - producer.started_at, 1))
                t0 = time.monotonic()
                FAULTS[kind](self, record, producer.opened[gate].set)
                producer.opened[gate].set()
                record.took_s = round(time.monotonic() - t0, 1)
                self.faults.append(record)
                print(
                    f"  fault {n}/{len(plan)} {kind} at record {gate:,}: {record.detail} ({record.took_s}s)", flush=True
                )
            self.producer.join(timeout=max(600.0, 5 * self.settings.records / self.settings.rate))
            if self.producer.is_alive() or self.producer.error is not None:
                raise ChaosError(f"the producer did not finish: {self.producer.error!r}")
            print(f"chaos: all {self.settings.records:,} records produced; waiting for the tables", flush=True)
            quiesce(self)
            return verify(self, time.monotonic() - started)
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
