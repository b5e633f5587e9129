"""The service's heavy work on a Spark standalone cluster (a master and two workers, each its own
JVM, on loopback): JSON-lines rewrites, an upsert merge and compaction run as tasks on the
executors, and exactly once holds when an executor is killed in the middle of a rewrite.

The real service (gunicorn, the driver in its process) with ``spark.master: spark://...``; every
table is read back with delta-rs and compared record by record, value by value.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import requests
from deltalake import DeltaTable

from lakegate_core.protocol import FileFormat
from lakegate_stack.delta_read import live_rows
from lakegate_stack.services import ADMIN_TOKEN, ServiceProcess
from lakegate_stack.spark_cluster import SparkCluster, executor_conf
from tests.service_helpers import manifest
from tests.upsert_helpers import Landing, Record, upsert_model


def event(partition: int, i: int) -> dict[str, Any]:
    return {"id": f"e{partition}-{i}", "n": i, "name": f"näme {i}", "amount": i * 0.25, "tags": ["a", f"t{i % 3}"]}


class Driver:
    """The service's Spark application as its UI's REST API shows it."""

    def __init__(self, service: ServiceProcess, timeout: float = 180) -> None:
        self.base = f"http://127.0.0.1:{service.ui_port}/api/v1/applications"
        deadline = time.monotonic() + timeout
        while True:  # the service is ready before its SparkSession is (it starts Spark after)
            try:
                self.app = requests.get(self.base, timeout=10).json()[0]["id"]
                return
            except requests.RequestException:
                assert time.monotonic() < deadline, "the service's Spark UI never came up"
                time.sleep(1)

    def executor_tasks(self) -> int:
        """Tasks run on executors (not the driver), dead executors included."""
        executors = requests.get(f"{self.base}/{self.app}/allexecutors", timeout=10).json()
        return sum(int(e["totalTasks"]) for e in executors if e["id"] != "driver")

    def running_tasks(self) -> int:
        stages = requests.get(f"{self.base}/{self.app}/stages", params={"status": "active"}, timeout=10).json()
        return sum(int(s.get("numActiveTasks", 0)) for s in stages)


def offer(service: ServiceProcess, name: str, pendings: list[Any]) -> None:
    response = service.call("POST", "/v1/manifests", json=manifest(name, [p.file.to_dict() for p in pendings]))
    assert response.status_code == 202, response.text
    assert all(f["status"] == "accepted" for f in response.json()["files"]), response.text


def commit(service: ServiceProcess, table: str, timeout: float = 300) -> dict[str, Any]:
    """Commit ``table`` now, again after a failed round (503), until a commit lands (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        response = service.call("POST", f"/v1/tables/{table}/commit", ADMIN_TOKEN)
        if response.status_code == 200 and response.json()["committed"]:
            return dict(response.json())
        assert time.monotonic() < deadline, response.text
        time.sleep(1)


def rows_by_offset(path: Path) -> dict[tuple[int, int], dict[str, Any]]:
    """Each row of an append table by (partition from its id, offset); a duplicate fails."""
    out: dict[tuple[int, int], dict[str, Any]] = {}
    for row in DeltaTable(str(path)).to_pyarrow_table().to_pylist():
        key = (int(row["id"].split("-")[0][1:]), row["_kafka_offset"])
        assert key not in out, f"offset {key} twice"
        out[key] = row
    return out


def assert_events(path: Path, produced: list[tuple[int, Record]]) -> None:
    rows = rows_by_offset(path)
    assert len(rows) == len(produced)
    for partition, r in produced:
        row = rows[(partition, r["offset"])]
        assert {k: row[k] for k in r["value"]} == r["value"], (row, r)


def test_rewrites_merges_and_compaction_run_on_executors_and_an_executor_kill_lands_nothing_twice(
    tmp_path: Path,
) -> None:
    cluster = SparkCluster(tmp_path / "cluster", workers=2, cores=1, memory="1g").start()
    lake = tmp_path / "lake"
    tables = [
        {"name": "events", "path": str(lake / "events"), "topics": ["events"], "commit": {"interval_seconds": 3600}},
        {
            "name": "users",
            "path": str(lake / "users"),
            "topics": ["users"],
            "commit": {"interval_seconds": 3600},
            "mode": "upsert",
            "key": ["id"],
        },
    ]
    service = ServiceProcess(
        tmp_path,
        tables,
        [lake.as_uri() + "/"],
        spark={"master": cluster.master_url},
        spark_conf=executor_conf(memory="512m", cores=1, max_cores=2),
    ).start()
    try:
        driver = Driver(service)
        events, users = Landing(lake / "events", "events"), Landing(lake / "users", "users")
        produced: list[tuple[int, Record]] = []

        # JSON-lines rounds (two: two files for compaction below): each rewrite runs on the executors
        for partition in (0, 1):
            before = driver.executor_tasks()
            pending, records = events.write(
                partition, [(None, event(partition, i)) for i in range(2000)], FileFormat.JSONL
            )
            produced += [(partition, r) for r in records]
            offer(service, f"events-{partition}", [pending])
            commit(service, "events")
            assert driver.executor_tasks() > before, "the rewrite ran no task on an executor"
        assert_events(lake / "events", produced)

        # an upsert round: its merge runs on the executors
        before = driver.executor_tasks()
        changes = [({"id": i % 300}, {"id": i % 300, "v": i}) for i in range(1200)]
        pending, records = users.write(0, changes, FileFormat.JSONL)
        offer(service, "users-1", [pending])
        commit(service, "users")
        assert driver.executor_tasks() > before, "the merge ran no task on an executor"
        got = {r["id"]: r["v"] for r in live_rows(DeltaTable(str(lake / "users")))}
        assert got == {k: v["v"] for k, v in upsert_model(records, tombstones_delete=False).items()}

        # compaction: its rewrite runs on the executors, the rows stay
        before = driver.executor_tasks()
        run = service.call("POST", "/v1/tables/events/maintenance/compact", ADMIN_TOKEN)
        assert run.status_code == 200, run.text
        assert driver.executor_tasks() > before, "compaction ran no task on an executor"
        assert_events(lake / "events", produced)

        # an executor SIGKILLed while a rewrite's tasks run: the round is retried, nothing lands twice
        killed: list[int] = []
        for attempt in range(3):  # a round too quick to catch running is followed by a larger one
            pendings = []
            for partition in (0, 1):
                count = 60_000 * (attempt + 1)
                batch = [(None, event(partition, events.next.get(partition, 0) + i)) for i in range(count)]
                pending, records = events.write(partition, batch, FileFormat.JSONL)
                pendings.append(pending)
                produced += [(partition, r) for r in records]
            offer(service, f"events-big-{attempt}", pendings)
            committing = threading.Thread(target=commit, args=(service, "events"))
            committing.start()
            while committing.is_alive() and not killed:
                if driver.running_tasks() > 0 and (pids := cluster.executor_pids()):
                    os.kill(pids[0], signal.SIGKILL)
                    killed.append(pids[0])
                time.sleep(0.05)
            committing.join(600)
            assert not committing.is_alive()
            if killed:
                break
        assert killed, "three rewrites finished before any of their tasks was seen running"
        assert_events(lake / "events", produced)
    finally:
        service.stop()
        cluster.stop()
