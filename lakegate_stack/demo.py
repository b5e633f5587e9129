"""The local end-to-end demo behind ``scripts/demo``: everything real, on loopback.

S3 server + Kafka + Kafka Connect (S3 sink writing JSON lines with Aiven's defaults: gzip, each record
under ``value``, written under ``s3://lake/orders/data/``) +
``lakegate-service`` (table ``s3a://lake/orders``) + ``lakegate-sidecar``. It produces sample
orders, shows progress and every commit as it happens, prints a sample of the table read back with
delta-rs, tells where the Spark UI is, and stops everything on Ctrl-C (or when done, with
``--exit-when-done``). With ``--format iceberg`` the table is the Iceberg table ``demo.orders`` in
Apache Iceberg's REST catalog server (started too, its warehouse ``s3a://lake/warehouse/``), read
back with pyiceberg.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from lakegate_stack import s3 as s3mod
from lakegate_stack.connect import s3_sink_config
from lakegate_stack.errors import StackError
from lakegate_stack.iceberg_catalog import IcebergRestCatalog
from lakegate_stack.kafka import create_topic
from lakegate_stack.services import READ_TOKEN, ServiceProcess, SidecarProcess, sidecar_config
from lakegate_stack.spark_cluster import SparkCluster, executor_conf
from lakegate_stack.stack import LocalStack

TOPIC, CONNECTOR, BUCKET, PREFIX = "orders", "orders-sink", "lake", "orders/data/"
ICEBERG_TABLE, WAREHOUSE = "demo.orders", f"s3a://{BUCKET}/warehouse"
S3_ENV = {"AWS_ACCESS_KEY_ID": s3mod.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": s3mod.SECRET_KEY, "AWS_REGION": s3mod.REGION}


def say(text: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {text}", flush=True)


def produce(
    bootstrap: str,
    records: int,
    rate: int,
    partitions: int,
    done: threading.Event,
    stop: threading.Event,
    counter: list[int],
) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20)
    rng = random.Random(7)
    try:
        for i in range(records):
            if stop.is_set():
                return
            order = {
                "order_id": i,
                "customer": f"c{rng.randrange(100):03d}",
                "amount": round(rng.uniform(1, 500), 2),
                "ts": int(time.time() * 1000),
            }
            producer.send(TOPIC, key=str(i).encode(), value=json.dumps(order).encode(), partition=i % partitions)
            counter[0] = i + 1
            if rate and (i + 1) % max(1, rate // 10) == 0:
                time.sleep(0.1)
        producer.flush(60)
    finally:
        producer.close()
        done.set()


def show_commits(service: ServiceProcess, table: str, seen: set[int]) -> None:
    for c in reversed(service.call("GET", f"/v1/commits?table={table}&limit=100").json()["commits"]):
        if c["version"] not in seen:
            seen.add(c["version"])
            offsets = ", ".join(f"{p}:{o}" for p, o in c["offsets"].get(TOPIC, {}).items())
            say(
                f"commit v{c['version']}: {c['files']} files, {c['records']} records, "
                f"next offsets {{{offsets}}}, {c['duration_ms']} ms"
            )


def print_sample(s3_endpoint: str, catalog: IcebergRestCatalog | None) -> tuple[int, int]:
    """Print a sample of the table (read back by delta-rs, or pyiceberg through the catalog);
    return (rows, distinct order ids)."""
    if catalog is None:
        from deltalake import DeltaTable

        table = DeltaTable(
            f"s3://{BUCKET}/orders",
            storage_options={"AWS_ENDPOINT_URL": s3_endpoint, "AWS_ALLOW_HTTP": "true", **S3_ENV},
        )
        data = table.to_pyarrow_table()
        where = f"Delta table s3a://{BUCKET}/orders at version {table.version()}"
        reader = "delta-rs"
    else:
        from pyiceberg.catalog import load_catalog

        props = {
            "s3.endpoint": s3_endpoint,
            "s3.access-key-id": s3mod.ACCESS_KEY,
            "s3.secret-access-key": s3mod.SECRET_KEY,
            "s3.region": s3mod.REGION,
        }
        iceberg = load_catalog("demo", type="rest", uri=catalog.uri, **props).load_table(ICEBERG_TABLE)
        data = iceberg.scan().to_arrow()
        snapshots = len(iceberg.snapshots())
        where = f"Iceberg table {ICEBERG_TABLE} ({iceberg.location()}) with {snapshots} snapshots"
        reader = f"pyiceberg through the REST catalog {catalog.uri}"
    say(f"{where}: {data.num_rows} rows, columns {data.column_names}; read back with {reader}. A sample:")
    for row in data.sort_by("order_id").slice(0, 5).to_pylist():
        print("    " + json.dumps(row, default=str))
    return data.num_rows, len(set(data.column("order_id").to_pylist()))


def demo_table(args: argparse.Namespace) -> dict[str, object]:
    """The demo's one table: Delta at ``s3a://lake/orders``, or Iceberg ``demo.orders``."""
    table: dict[str, object] = {"topics": [TOPIC], "commit": {"interval_seconds": args.commit_interval}}
    if args.format == "iceberg":
        return {**table, "name": ICEBERG_TABLE, "format": "iceberg", "path": f"{WAREHOUSE}/demo/orders"}
    return {**table, "name": "orders", "path": f"s3a://{BUCKET}/orders"}


def run(args: argparse.Namespace, workdir: Path) -> int:
    started = time.monotonic()
    with LocalStack(workdir, connect_workers=1, buckets=(BUCKET,)) as stack:
        assert stack.s3 and stack.kafka
        worker = stack.workers[0]
        catalog: IcebergRestCatalog | None = None
        catalogs: list[dict[str, object]] = []
        if args.format == "iceberg":
            catalog = IcebergRestCatalog(workdir / "iceberg-rest", WAREHOUSE, stack.s3).start()
            catalogs = [{"name": "lake", "type": "rest", "uri": catalog.uri}]
            say(f"Iceberg REST catalog up at {catalog.uri} (warehouse {WAREHOUSE}/)")
        cluster: SparkCluster | None = None
        spark: dict[str, object] = {}
        if args.spark_cluster:
            cluster = SparkCluster(workdir / "spark-cluster", workers=2, cores=1, memory="1g").start()
            spark = {"master": cluster.master_url}
            say(f"Spark standalone cluster up: {cluster.master_url} (2 workers; master UI {cluster.ui_url})")
        say("stack up: S3 server, Kafka, Kafka Connect; starting lakegate-service (Spark warms up) ...")
        table = demo_table(args)
        name = str(table["name"])
        service = ServiceProcess(
            workdir,
            [table],
            [f"s3a://{BUCKET}/{PREFIX}"],
            s3={"endpoint": stack.s3.endpoint, "access_key": s3mod.ACCESS_KEY, "secret_key": s3mod.SECRET_KEY},
            kafka=stack.kafka.bootstrap_servers,
            catalogs=catalogs,
            spark=spark,
            spark_conf=executor_conf(memory="512m", cores=1, max_cores=2) if cluster is not None else None,
        )
        sidecar: SidecarProcess | None = None
        stop = threading.Event()
        try:
            service.start()
            create_topic(stack.kafka.bootstrap_servers, TOPIC, args.partitions)
            worker.client().put_connector(
                CONNECTOR,
                # JSON lines, uncompressed, in Aiven's envelope with each record's offset (what the
                # doctor recommends: the orphan guard checks every file's range); prefix naming
                {
                    **s3_sink_config(
                        [TOPIC],
                        BUCKET,
                        stack.s3.endpoint,
                        s3mod.ACCESS_KEY,
                        s3mod.SECRET_KEY,
                        prefix=PREFIX,
                        output="jsonl",
                        compression=None,
                    ),
                    "format.output.fields": "key,value,offset,timestamp",
                },
            )
            worker.client().wait_running(CONNECTOR, tasks=2)
            sidecar = SidecarProcess(
                workdir,
                "sidecar",
                sidecar_config(
                    worker,
                    [CONNECTOR],
                    stack.kafka.bootstrap_servers,
                    {"kind": "s3", "bucket": BUCKET, "prefix": PREFIX, "endpoint": stack.s3.endpoint},
                    service.url,
                    resend_after_seconds=10,
                ),
                env=S3_ENV,
            ).start()
            say(
                f"ready in {time.monotonic() - started:.0f}s.\n"
                f"  status page   {service.url}/   (open it in a browser; sign in with the read token {READ_TOKEN})\n"
                f"  lakegate API  {service.url}   (tokens in {service.config_path})\n"
                f"  Spark UI      {service.spark_ui()}   (jobs named 'lakegate commit {name} v<N>: ...')\n"
                f"  Connect REST  {worker.url}   Kafka {stack.kafka.bootstrap_servers}   S3 {stack.s3.endpoint}\n"
                f"  logs          {workdir}"
            )
            done, counter = threading.Event(), [0]
            threading.Thread(
                target=produce,
                daemon=True,
                args=(stack.kafka.bootstrap_servers, args.records, args.rate, args.partitions, done, stop, counter),
            ).start()
            say(f"producing {args.records} orders to topic '{TOPIC}' ({args.partitions} partitions) ...")
            seen: set[int] = set()
            deadline = time.monotonic() + args.timeout
            while time.monotonic() < deadline:
                time.sleep(2)
                show_commits(service, name, seen)
                committed = sum(service.call("GET", f"/v1/tables/{name}/offsets").json().get(TOPIC, {}).values())
                say(f"produced {counter[0]}/{args.records}, committed to the table {committed}")
                if done.is_set() and committed >= args.records:
                    break
            else:
                say(f"not all records were committed within {args.timeout}s; see the logs in {workdir}")
                return 1
            show_commits(service, name, seen)
            rows, distinct = print_sample(stack.s3.endpoint, catalog)
            if rows != args.records or distinct != args.records:
                say(f"MISMATCH: {rows} rows, {distinct} distinct order ids, {args.records} produced")
                return 1
            kind = "Iceberg snapshots" if catalog is not None else "Delta commits"
            say(f"all {args.records} records committed exactly once, in {len(seen)} {kind}.")
            if args.exit_when_done:
                return 0
            say(f"status page: {service.url}/  Spark UI: {service.spark_ui()} -- press Ctrl-C to stop everything.")
            while True:
                time.sleep(3600)
        finally:
            stop.set()
            say("stopping sidecar, service, Connect, Kafka, S3 ...")
            if sidecar is not None:
                sidecar.stop()
            service.stop()
            if catalog is not None:
                catalog.stop()
            if cluster is not None:
                cluster.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/demo", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=5000, help="orders to produce (default 5000)")
    parser.add_argument(
        "--rate", type=int, default=500, help="orders per second, 0 = as fast as possible (default 500)"
    )
    parser.add_argument("--partitions", type=int, default=3, help="partitions of the topic (default 3)")
    parser.add_argument("--commit-interval", type=float, default=5.0, help="table commit interval, s (default 5)")
    parser.add_argument("--timeout", type=float, default=600, help="give up after this many seconds (default 600)")
    parser.add_argument("--exit-when-done", action="store_true", help="stop once every record is committed")
    parser.add_argument(
        "--format",
        choices=("delta", "iceberg"),
        default="delta",
        help="the table format: delta (default), or iceberg (in a REST catalog the demo starts)",
    )
    parser.add_argument(
        "--spark-cluster",
        action="store_true",
        help="run the service's Spark work on a standalone cluster the demo starts (a master and two workers)",
    )
    parser.add_argument("--workdir", type=Path, help="configs, data and logs (default: a temp dir, removed at exit)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="lakegate-demo-"))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        return run(args, workdir)
    except KeyboardInterrupt:
        return 0
    except StackError as exc:
        print(f"demo failed: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
        say("stopped.")


if __name__ == "__main__":
    sys.exit(main())
