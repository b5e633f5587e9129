"""An upsert table through the real service (gunicorn, Spark, Delta), SIGKILLed inside a round.

The service is killed at two armed crash points (:mod:`commit_service.faults`): after an upsert
round wrote its new files but before the Delta commit (``commit.mid_merge``), and right after the
commit landed (``commit.after``). After each restart the sidecar's resend is simulated; at
the end the table, read by delta-rs, equals the model computed from the records (one row per live
key, latest value) and every partition's ``txn`` equals the offsets sent: no round lost, none
applied twice.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import requests
from deltalake import DeltaTable

from commit_service import faults
from commit_service.delta.txn import app_id
from lakegate_core.types import TopicPartition
from lakegate_stack.datafiles import manifest_entry
from lakegate_stack.delta_read import live_rows
from tests.service_helpers import ADMIN_TOKEN, ServiceProcess, manifest

TOPIC, TABLE = "users", "users"
PER_ROUND = 30


def land(root: Path, partition: int, start: int, round_no: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One JSON-lines file as the sink writes it (fields key,value,offset): keys of this partition
    updated again and again, every fifth record a tombstone."""
    envelopes = []
    for i in range(PER_ROUND):
        key = (i * 7 + round_no) % 12 * 2 + partition  # 12 keys per partition, each its own partition's
        value = None if i % 5 == 4 else {"id": key, "name": f"r{round_no}-{i}"}
        envelopes.append({"key": {"id": key}, "value": value, "offset": start + i})
    path = root / "landing" / f"{TOPIC}-{partition}-{start}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in envelopes))
    return manifest_entry(path, TOPIC, partition, start, PER_ROUND, "jsonl"), envelopes


def model(records: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for r in sorted(records, key=lambda r: r["offset"]):
        if r["value"] is None:
            out.pop(r["key"]["id"], None)
        else:
            out[r["value"]["id"]] = r["value"]
    return out


def table_rows(path: Path) -> dict[int, dict[str, Any]]:
    rows = live_rows(DeltaTable(str(path)), ["id", "name"])
    assert len({r["id"] for r in rows}) == len(rows), "a key is in the table twice"
    return {r["id"]: r for r in rows}


def start_service(tmp_path: Path, table: Path, fault_dir: Path) -> ServiceProcess:
    tables = [
        {
            "name": TABLE,
            "path": str(table),
            "topics": [TOPIC],
            "mode": "upsert",
            "key": ["id"],
            "delete_on_tombstone": True,
            "commit": {"interval_seconds": 3600},
        }
    ]
    env = {faults.ENV: str(fault_dir)}
    return ServiceProcess(tmp_path, tables, [f"file://{tmp_path}/"], env=env).start()


def crash_on(svc: ServiceProcess, fault_dir: Path, point: str) -> None:
    """Arm ``point``, force a commit, and wait (bounded) until the service is gone."""
    (fault_dir / point).touch()
    try:
        svc.call("POST", f"/v1/tables/{TABLE}/commit", ADMIN_TOKEN)
    except requests.RequestException:
        pass  # the connection dies with the process
    deadline = time.monotonic() + 60
    while svc.process.running():
        assert time.monotonic() < deadline, "the armed service did not crash"
        time.sleep(0.2)
    assert not (fault_dir / point).exists(), f"{point} was not reached"


def send(svc: ServiceProcess, mid: str, files: list[dict[str, Any]]) -> set[str]:
    r = svc.call("POST", "/v1/manifests", json=manifest(mid, files))
    assert r.status_code == 202, r.text
    return {f["status"] for f in r.json()["files"]}


def test_an_upsert_round_killed_mid_merge_or_after_commit_lands_exactly_once(tmp_path: Path) -> None:
    table, fault_dir = tmp_path / "lake" / TABLE, tmp_path / "faults"
    fault_dir.mkdir()
    sent: list[dict[str, Any]] = []
    rounds = []
    for round_no in range(3):
        files = []
        for partition in (0, 1):
            f, envelopes = land(tmp_path, partition, round_no * PER_ROUND, round_no)
            files.append(f)
            sent.extend(envelopes)
        rounds.append(files)
    through = [model(sent[: 2 * PER_ROUND * (n + 1)]) for n in range(3)]

    svc = start_service(tmp_path, table, fault_dir)
    try:
        assert send(svc, "r0", rounds[0]) == {"accepted"}
        assert svc.commit_now(TABLE)["version"] == 0
        assert table_rows(table) == through[0]

        # killed after the round's new files are written, before the Delta commit
        assert send(svc, "r1", rounds[1]) == {"accepted"}
        crash_on(svc, fault_dir, faults.MID_MERGE)
        assert DeltaTable(str(table)).version() == 0 and table_rows(table) == through[0]
        svc = start_service(tmp_path, table, fault_dir)
        assert send(svc, "r1", rounds[1]) == {"accepted"}  # the sidecar sends again
        assert svc.commit_now(TABLE)["version"] == 1
        assert table_rows(table) == through[1]

        # killed right after the Delta commit, before the service noted it
        assert send(svc, "r2", rounds[2]) == {"accepted"}
        crash_on(svc, fault_dir, faults.AFTER_COMMIT)
        assert DeltaTable(str(table)).version() == 2 and table_rows(table) == through[2]
        svc = start_service(tmp_path, table, fault_dir)
        assert send(svc, "r2", rounds[2]) == {"already_committed"}
        assert svc.call("POST", f"/v1/tables/{TABLE}/commit", ADMIN_TOKEN).json()["committed"] is False
    finally:
        svc.stop()

    t = DeltaTable(str(table))
    assert t.version() == 2 and table_rows(table) == model(sent)
    for partition in (0, 1):
        assert t.transaction_version(app_id(TABLE, TopicPartition(TOPIC, partition))) == 3 * PER_ROUND
