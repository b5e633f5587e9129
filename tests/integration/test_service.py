"""The commit service as users run it: ``lakegate-service`` under gunicorn, real Spark + Delta.

Tables are verified with delta-rs (``deltalake``) and delta-spark; the Spark UI's REST API shows
the labelled commit jobs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests
from deltalake import DeltaTable

from tests.service_helpers import ServiceProcess, manifest, race_commits, write_parquet

TOPIC, TABLE = "orders", "orders"


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Any]:
    table_root = tmp_path / "lake" / TABLE
    files = [
        write_parquet(table_root / "data" / f"{TOPIC}-{p}-{s}", TOPIC, p, s, 100) for p in range(3) for s in (0, 100)
    ]
    tables = [{"name": TABLE, "path": str(table_root), "topics": [TOPIC], "commit": {"interval_seconds": 3600}}]
    return {"root": table_root, "files": files, "tables": tables, "roots": [f"file://{tmp_path}/lake/"]}


def test_commit_restart_and_resubmit(tmp_path: Path, layout: dict[str, Any], spark: Any) -> None:
    svc = ServiceProcess(tmp_path, layout["tables"], layout["roots"]).start()
    try:
        assert svc.call("GET", "/v1/tables").status_code == 200
        assert requests.get(f"{svc.url}/v1/tables", timeout=10).status_code == 401
        bad = manifest("bad", [{**layout["files"][0], "path": "file:///etc/passwd"}])
        assert svc.call("POST", "/v1/manifests", json=bad).status_code == 400
        r = svc.call("POST", "/v1/manifests", json=manifest("m1", layout["files"]))
        assert r.status_code == 202 and {f["status"] for f in r.json()["files"]} == {"accepted"}
        record = svc.commit_now(TABLE)
        assert record["version"] == 0 and record["files"] == 6 and record["records"] == 600

        descriptions = svc.spark_job_descriptions()
        assert any(d.startswith("lakegate commit orders v0: 6 files, 600 records") for d in descriptions), descriptions
        metrics = requests.get(f"{svc.url}/metrics", timeout=10).text
        assert 'lakegate_records_committed_total{table="orders"} 600.0' in metrics
    finally:
        svc.stop()

    table = DeltaTable(str(layout["root"]))
    assert table.version() == 0
    ids = table.to_pyarrow_table().column("id").to_pylist()
    assert len(ids) == len(set(ids)) == 600
    for p in range(3):
        assert table.transaction_version(f"lakegate-{TABLE}-{TOPIC}-{p}") == 200
    meta = json.loads(table.history()[0]["userMetadata"])
    assert meta["offsets"] == {TOPIC: {"0": 200, "1": 200, "2": 200}} and meta["files"] == 6
    history = spark.sql(f"DESCRIBE HISTORY delta.`{layout['root']}`").collect()
    assert history[0]["operation"] == "STREAMING UPDATE"
    assert spark.read.format("delta").load(str(layout["root"])).count() == 600

    again = ServiceProcess(tmp_path, layout["tables"], layout["roots"], name="service-2").start()
    try:
        assert again.call("GET", f"/v1/tables/{TABLE}/offsets").json() == {TOPIC: {"0": 200, "1": 200, "2": 200}}
        r = again.call("POST", "/v1/manifests", json=manifest("m1", layout["files"]))
        assert {f["status"] for f in r.json()["files"]} == {"already_committed"}
        assert again.commit_now(TABLE)["committed"] is False
        assert again.call("GET", f"/v1/tables/{TABLE}").json()["version"] == 0
    finally:
        again.stop()
    assert DeltaTable(str(layout["root"])).version() == 0


def test_two_services_racing_on_one_table_never_duplicate(tmp_path: Path, layout: dict[str, Any]) -> None:
    a = ServiceProcess(tmp_path, layout["tables"], layout["roots"], name="svc-a")
    b = ServiceProcess(tmp_path, layout["tables"], layout["roots"], name="svc-b")
    a.spawn()
    b.spawn()
    try:
        a.wait_ready()
        b.wait_ready()
        halves = [layout["files"][::2], layout["files"]]  # b gets every file, a half of them
        for svc, files, mid in ((a, halves[0], "ma"), (b, halves[1], "mb")):
            assert svc.call("POST", "/v1/manifests", json=manifest(mid, files)).status_code == 202
        results = race_commits({"a": a, "b": b}, TABLE)
        assert all(code in (200, 409) for codes in results.values() for code in codes), results
    finally:
        a.stop()
        b.stop()
    data = DeltaTable(str(layout["root"])).to_pyarrow_table().to_pydict()
    seen = list(zip(data["id"], data["offset"], strict=True))
    assert len(seen) == len(set(seen)) == 600, "an offset was committed twice or lost"


def test_hostile_files_never_wedge_the_table(tmp_path: Path, spark: Any) -> None:
    """The reported wedges, against the real service: a space (and '+', '=', '%') in a name, a
    symlink to /etc/passwd, a double-encoded '..', offsets past 64 bits. The good files commit,
    the link is quarantined (durably: it outlives a restart) and an admin releases its range."""
    root = tmp_path / "lake" / TABLE
    odd = write_parquet(root / "data" / "orders 0+0=100%.parquet", TOPIC, 0, 0, 100)
    odd["path"] = f"file://{quote(odd['path'][len('file://') :])}"  # sent percent-encoded, as the sidecar does
    plain = write_parquet(root / "data" / f"{TOPIC}-2-0", TOPIC, 2, 0, 100)
    link = root / "data" / f"{TOPIC}-1-0"
    link.symlink_to("/etc/passwd")
    linked = {**plain, "path": f"file://{link}", "partition": 1, "format": "csv", "size_bytes": link.stat().st_size}
    tables = [{"name": TABLE, "path": str(root), "topics": [TOPIC], "commit": {"interval_seconds": 3600}}]
    roots = [f"file://{tmp_path}/lake/"]
    svc = ServiceProcess(tmp_path, tables, roots).start()
    try:
        escape = {**plain, "partition": 3, "path": f"file://{root}/data/%252e%252e/%252e%252e/outside.parquet"}
        assert svc.call("POST", "/v1/manifests", json=manifest("escape", [escape])).status_code == 202  # a literal name
        too_far = {**plain, "start_offset": 2**63 - 101, "end_offset": 2**63 - 1}
        assert svc.call("POST", "/v1/manifests", json=manifest("far", [too_far])).status_code == 400
        r = svc.call("POST", "/v1/manifests", json=manifest("m1", [odd, linked, plain]))
        assert [f["status"] for f in r.json()["files"]] == ["accepted"] * 3, r.json()
        refusals = []
        for _ in range(2):  # each bad file fails one round and is quarantined
            r = svc.call("POST", f"/v1/tables/{TABLE}/commit", "admin-token-for-tests-000001")
            assert r.status_code == 422 and "Traceback" not in r.text and "py4j" not in r.text, r.text
            refusals.append(r.json()["error"]["message"])
        assert any("symbolic link" in m for m in refusals) and any("does not exist" in m for m in refusals)
        record = svc.commit_now(TABLE)  # the bad files are out of the buffer: everything else commits
        assert record["committed"] and record["files"] == 2 and record["offsets"] == {TOPIC: {"0": 100, "2": 100}}
        letters = svc.call("GET", "/v1/dead-letters").json()["dead_letters"]
        assert sorted((d["file"]["partition"], d["code"]) for d in letters) == [
            (1, "bad_data_file"),
            (3, "bad_data_file"),
        ]
        (letter,) = [d for d in letters if d["file"]["partition"] == 1]
        assert (root / "_lakegate" / "dead-letters" / f"{letter['id']}.json").is_file()
    finally:
        svc.stop()
    ids = sorted(DeltaTable(str(root)).to_pyarrow_table().column("id").to_pylist())
    assert ids == sorted(f"{TOPIC}-{p}-{o}" for p in (0, 2) for o in range(100))
    assert spark.read.format("delta").load(str(root)).count() == 200

    again = ServiceProcess(tmp_path, tables, roots, name="service-2").start()
    try:
        assert again.call("GET", f"/v1/tables/{TABLE}").json()["dead_letters"] == 2
        released = again.call("POST", f"/v1/dead-letters/{letter['id']}/release", "admin-token-for-tests-000001")
        assert released.status_code == 200 and released.json()["offsets"] == {TOPIC: {"1": 100}}
        assert again.call("GET", "/v1/dead-letters?state=released").json()["dead_letters"][0]["id"] == letter["id"]
    finally:
        again.stop()
    table = DeltaTable(str(root))
    assert table.transaction_version(f"lakegate-{TABLE}-{TOPIC}-1") == 100
    assert json.loads(table.history()[0]["userMetadata"])["released"] == [letter["id"]]
    assert table.to_pyarrow_table().num_rows == 200
