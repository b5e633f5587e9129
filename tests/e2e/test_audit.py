"""The audit through the whole pipeline: a clean table passes it, and each breach seeded into the
table afterwards is reported (and makes ``lakegate-audit`` exit 1).

Records go Kafka -> the S3 sink on a real Connect worker (JSON lines) -> a sidecar -> the service,
into a Delta table on the local disk, partitioned by the day of each record's Kafka timestamp (a
generated column, which the value audit does not compare with the record: the table computes
it). With the connector gone, the table's log is edited as a
careless writer would: a data file added a second time under another name, a value edited in a
rewritten file, and a partition's offset moved past records Kafka holds that were never written.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from lakegate_stack.connect import ConnectWorker
from lakegate_stack.kafka import KafkaBroker
from lakegate_stack.s3 import S3Server
from lakegate_stack.services import ADMIN_TOKEN, READ_TOKEN, ServiceProcess
from tests.kafka_helpers import create_topic
from tests.pipeline_helpers import produce, sink_with_sidecar, wait_committed

BUCKET, TOPIC, TABLE, PARTITIONS, RECORDS = "lake-audit", "audited", "audited", 3, 90
SKIPPED = 5  # records produced to partition 0 after the connector is gone, then "committed" by hand


def value(i: int) -> dict[str, Any]:
    return {"uid": f"u{i}", "name": f"näme {i}", "qty": i, "flag": i % 2 == 0, "tags": ["a", f"t{i % 3}"]}


def audit(service: ServiceProcess) -> dict[str, Any]:
    response = service.call("GET", f"/v1/tables/{TABLE}/audit?sample=1000&seed=7", READ_TOKEN)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def cli(service: ServiceProcess) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "lakegate-audit"
    return subprocess.run(
        [str(script), "--service", service.url, "--token", READ_TOKEN, "--sample", "1000", TABLE],
        capture_output=True,
        text=True,
        timeout=600,
    )


def renamed(path: str, prefix: str) -> str:
    """A data file's path with ``prefix`` before its name (in its partition's directory)."""
    folder, _, name = path.rpartition("/")
    return f"{folder}/{prefix}{name}" if folder else prefix + name


def log_actions(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted(log.glob("*.json")) for line in f.read_text().splitlines() if line]


def write_commit(log: Path, actions: list[dict[str, Any]]) -> int:
    version = max(int(f.stem) for f in log.glob("*.json")) + 1
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE", "operationParameters": {}}}
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in [info, *actions]) + "\n")
    return version


def test_a_clean_table_passes_and_each_seeded_breach_is_reported(
    tmp_path: Path, kafka_broker: KafkaBroker, connect_worker: ConnectWorker, s3_server: S3Server
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, TOPIC, PARTITIONS)
    s3_server.create_bucket(BUCKET)
    root = tmp_path / "lake" / TABLE
    tables = [
        {
            "name": TABLE,
            "path": str(root),
            "topics": [TOPIC],
            "partition_by": ["day(_kafka_timestamp)"],
            "commit": {"interval_seconds": 2},
        }
    ]
    service = ServiceProcess(
        tmp_path, tables, [(tmp_path / "lake").as_uri() + "/", f"s3a://{BUCKET}/"], s3=_s3(s3_server), kafka=bootstrap
    ).start()
    try:
        sidecar = sink_with_sidecar(
            tmp_path, connect_worker, s3_server, BUCKET, service, bootstrap, "audit-sink", TOPIC, {"output": "jsonl"}
        )
        try:
            for batch in (range(RECORDS // 2), range(RECORDS // 2, RECORDS)):  # two commits: two data files
                produce(bootstrap, TOPIC, [(i % PARTITIONS, f"k{i}", value(i)) for i in batch])
                wait_committed(service, bootstrap, [TOPIC], [TABLE], PARTITIONS)
        finally:
            sidecar.stop()
            connect_worker.client().delete_connector("audit-sink")

        clean = audit(service)
        assert clean["ok"], clean["findings"]
        assert clean["counts"]["sampled"] == clean["counts"]["matched"] == clean["counts"]["rows"] == RECORDS
        assert clean["counts"]["offsets"] == RECORDS
        assert not [f for f in clean["findings"] if f["severity"] != "info"], clean["findings"]
        ran = cli(service)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert f"{TABLE} (delta" in ran.stdout and "OK" in ran.stdout

        log = root / "_delta_log"
        adds = [a["add"] for a in log_actions(log) if "add" in a]
        assert len(adds) >= 2, adds
        # 1. a data file added again under another name
        assert all(set(a["partitionValues"]) == {"_kafka_timestamp_day"} for a in adds), adds
        dup = dict(adds[0], path=renamed(adds[0]["path"], "dup-"), dataChange=True)
        shutil.copy(root / adds[0]["path"], root / dup["path"])
        write_commit(log, [{"add": dup}])
        # 2. one value edited in a rewritten file (a compaction that changed data)
        source = adds[-1]
        rows = pq.read_table(root / source["path"]).to_pylist()
        edited_offset = rows[0]["_kafka_offset"]
        rows[0]["name"] = "edited"
        edited = dict(source, path=renamed(source["path"], "edited-"), dataChange=False)
        pq.write_table(pq.read_table(root / source["path"]).from_pylist(rows), root / edited["path"])
        edited["size"] = (root / edited["path"]).stat().st_size
        removed = {"path": source["path"], "deletionTimestamp": int(time.time() * 1000), "dataChange": False}
        write_commit(log, [{"remove": removed}, {"add": edited}])
        # 3. partition 0 moved past records Kafka holds but no file has
        held = service.call("GET", f"/v1/tables/{TABLE}/offsets").json()[TOPIC]["0"]
        produce(bootstrap, TOPIC, [(0, f"late{i}", value(1000 + i)) for i in range(SKIPPED)])
        txn = {
            "appId": f"lakegate-{TABLE}-{TOPIC}-0",
            "version": held + SKIPPED,
            "lastUpdated": int(time.time() * 1000),
        }
        write_commit(log, [{"txn": txn}])

        broken = audit(service)
        assert not broken["ok"]
        by_kind: dict[str, list[dict[str, Any]]] = {}
        for f in broken["findings"]:
            by_kind.setdefault(f["kind"], []).append(f)
        assert {f["severity"] for f in by_kind["foreign_rows"]} == {"breach"}, by_kind
        dup_rows = pq.read_table(root / dup["path"]).column("_kafka_offset").to_pylist()
        twice = {o for f in by_kind["offsets_held_twice"] for o in range(*f["offsets"])}
        assert twice == set(dup_rows), (twice, dup_rows)
        differs = by_kind["value_differs"]
        assert [(f["offsets"], sorted(f["details"]["fields"])) for f in differs] == [
            ([edited_offset, edited_offset + 1], ["name"])
        ], differs
        assert differs[0]["details"]["fields"]["name"]["table"] == "edited"
        lost = by_kind["lost"]
        assert [f["offsets"] for f in lost] == [[held, held + SKIPPED]], lost

        ran = cli(service)
        assert ran.returncode == 1, ran.stdout + ran.stderr
        for kind in ("foreign_rows", "offsets_held_twice", "value_differs", "lost"):
            assert kind in ran.stdout, ran.stdout
        status = service.call("GET", "/", ADMIN_TOKEN)
        assert status.status_code == 200 and "BREACH" in status.text
    finally:
        service.stop()


def _s3(s3_server: S3Server) -> dict[str, Any]:
    from lakegate_stack import s3 as s3mod

    return {"endpoint": s3_server.endpoint, "access_key": s3mod.ACCESS_KEY, "secret_key": s3mod.SECRET_KEY}
