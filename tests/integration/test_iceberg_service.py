"""The commit service with an Iceberg table in Apache Iceberg's own REST catalog server: manifests
in, one snapshot per round, the offsets read back by a restarted service, two services racing on
one table never landing a round twice. pyiceberg, through the same REST catalog, reads every row.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import Catalog, load_catalog

from lakegate_stack.datafiles import manifest_entry
from lakegate_stack.iceberg_catalog import IcebergRestCatalog
from lakegate_stack.services import ADMIN_TOKEN
from tests.service_helpers import ServiceProcess, manifest, race_commits, write_parquet

TOPIC, TABLE = "orders", "sales.orders"


@pytest.fixture(scope="module")
def rest_catalog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IcebergRestCatalog]:
    workdir = tmp_path_factory.mktemp("iceberg-rest")
    server = IcebergRestCatalog(workdir, (workdir / "warehouse").as_uri()).start()
    yield server
    server.stop()


@pytest.fixture
def layout(tmp_path: Path, rest_catalog: IcebergRestCatalog) -> dict[str, Any]:
    landing = tmp_path / "landing"
    files = [write_parquet(landing / f"{TOPIC}-{p}-{s}", TOPIC, p, s, 100) for p in range(3) for s in (0, 100)]
    tables = [
        {
            "name": TABLE,
            "format": "iceberg",
            "path": str(tmp_path / "lake" / "sales" / "orders"),
            "topics": [TOPIC],
            "commit": {"interval_seconds": 3600},
        }
    ]
    catalogs = [{"name": "lake", "type": "rest", "uri": rest_catalog.uri}]
    return {"files": files, "tables": tables, "catalogs": catalogs, "roots": [f"file://{tmp_path}/"]}


def service(tmp_path: Path, layout: dict[str, Any], name: str) -> ServiceProcess:
    return ServiceProcess(tmp_path, layout["tables"], layout["roots"], name=name, catalogs=layout["catalogs"])


def reader(rest_catalog: IcebergRestCatalog) -> Catalog:
    return load_catalog("check", type="rest", uri=rest_catalog.uri)


def written(files: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every record the sink files hold, by id."""
    rows = (r for f in files for r in pq.read_table(f["path"][len("file://") :]).to_pylist())
    return {r["id"]: r for r in rows}


def assert_holds_once(rest_catalog: IcebergRestCatalog, files: list[dict[str, Any]]) -> list[Any]:
    """pyiceberg reads each record exactly once with every field as written; the table's snapshots."""
    table = reader(rest_catalog).load_table(TABLE)
    rows = table.scan().to_arrow().to_pylist()
    want = written(files)
    assert len(rows) == len({r["id"] for r in rows}) == len(want), f"{len(rows)} rows, {len(want)} records"
    for row in rows:
        assert row == want[row["id"]], row
    return list(table.snapshots())


def test_manifests_commit_into_an_iceberg_table_and_a_restart_reads_the_offsets_back(
    tmp_path: Path, layout: dict[str, Any], rest_catalog: IcebergRestCatalog
) -> None:
    svc = service(tmp_path, layout, "service").start()
    try:
        r = svc.call("POST", "/v1/manifests", json=manifest("m1", layout["files"]))
        assert r.status_code == 202 and {f["status"] for f in r.json()["files"]} == {"accepted"}, r.json()
        record = svc.commit_now(TABLE)
        assert record["committed"] and record["files"] == 6 and record["records"] == 600, record
        assert svc.call("GET", f"/v1/tables/{TABLE}/offsets").json() == {TOPIC: {"0": 200, "1": 200, "2": 200}}
        assert any(d.startswith(f"lakegate commit {TABLE}") for d in svc.spark_job_descriptions())
    finally:
        svc.stop()
    [snapshot] = assert_holds_once(rest_catalog, layout["files"])
    assert json.loads(snapshot.summary["lakegate.offsets"]) == {TOPIC: {"0": 200, "1": 200, "2": 200}}
    assert snapshot.summary["lakegate.commit-id"] == record["commit_id"]

    again = service(tmp_path, layout, "service-2").start()
    try:
        assert again.call("GET", f"/v1/tables/{TABLE}/offsets").json() == {TOPIC: {"0": 200, "1": 200, "2": 200}}
        r = again.call("POST", "/v1/manifests", json=manifest("m1", layout["files"]))
        assert {f["status"] for f in r.json()["files"]} == {"already_committed"}
        assert again.commit_now(TABLE)["committed"] is False
    finally:
        again.stop()
    assert len(assert_holds_once(rest_catalog, layout["files"])) == 1


def test_a_recreated_topic_begins_a_new_ledger_epoch_in_an_iceberg_table(
    tmp_path: Path, layout: dict[str, Any], rest_catalog: IcebergRestCatalog
) -> None:
    """After the topic is made again, its offsets 0.. land beside the old ones (keys ``orders~2``
    in ``lakegate.offsets``), and a restart reads the epoch back."""
    table = layout["tables"][0]["name"] = TABLE + "_epoch"
    svc = service(tmp_path, layout, "svc-epoch").start()
    new = tmp_path / "landing-2" / f"{TOPIC}-0-0"
    new.parent.mkdir(parents=True)
    rows = [{"id": f"e2-{o}", "offset": o, "amount": o * 0.75} for o in range(50)]
    pq.write_table(pa.Table.from_pylist(rows), new)
    entry = {**manifest_entry(new, TOPIC, 0, 0, 50, "parquet"), "record_count": 50}
    try:
        assert svc.call("POST", "/v1/manifests", json=manifest("m1", layout["files"])).status_code == 202
        assert svc.commit_now(table)["committed"]
        assert svc.call("POST", "/v1/manifests", json=manifest("m2", [entry])).json()["files"][0]["status"] == (
            "already_committed"
        )
        opened = svc.call("POST", f"/v1/tables/{table}/epochs", ADMIN_TOKEN, json={"topic": TOPIC, "force": True})
        assert opened.status_code == 200 and opened.json()["offsets"] == {f"{TOPIC}~2": {"0": 0, "1": 0, "2": 0}}
        assert svc.call("POST", "/v1/manifests", json=manifest("m3", [entry])).json()["files"][0]["status"] == (
            "accepted"
        )
        assert svc.commit_now(table)["offsets"] == {f"{TOPIC}~2": {"0": 50}}
    finally:
        svc.stop()
    loaded = reader(rest_catalog).load_table(table)
    got = loaded.scan().to_arrow().to_pylist()
    assert sorted(got, key=lambda r: r["id"]) == sorted(
        [*written(layout["files"]).values(), *rows], key=lambda r: r["id"]
    )
    summary = loaded.current_snapshot().summary
    assert json.loads(summary["lakegate.offsets"]) == {
        TOPIC: {"0": 200, "1": 200, "2": 200},
        f"{TOPIC}~2": {"0": 50, "1": 0, "2": 0},
    }
    again = service(tmp_path, layout, "svc-epoch-2").start()
    try:
        assert again.call("GET", f"/v1/tables/{table}/offsets").json() == {TOPIC: {"0": 50, "1": 0, "2": 0}}
        assert again.call("GET", f"/v1/tables/{table}").json()["epochs"] == {TOPIC: 2}
    finally:
        again.stop()


def test_two_services_racing_on_one_iceberg_table_never_duplicate(
    tmp_path: Path, layout: dict[str, Any], rest_catalog: IcebergRestCatalog
) -> None:
    table = layout["tables"][0]["name"] = TABLE + "_race"
    a, b = service(tmp_path, layout, "svc-a"), service(tmp_path, layout, "svc-b")
    a.spawn()
    b.spawn()
    try:
        a.wait_ready()
        b.wait_ready()
        halves = [layout["files"][::2], layout["files"]]  # b gets every file, a half of them
        for svc, files, mid in ((a, halves[0], "ma"), (b, halves[1], "mb")):
            assert svc.call("POST", "/v1/manifests", json=manifest(mid, files)).status_code == 202
        results = race_commits({"a": a, "b": b}, table)
        assert all(code in (200, 409) for codes in results.values() for code in codes), results
    finally:
        a.stop()
        b.stop()
    rows = reader(rest_catalog).load_table(table).scan().to_arrow().to_pylist()
    seen = [(r["id"], r["offset"]) for r in rows]
    assert len(seen) == len(set(seen)) == 600, "an offset was committed twice or lost"
