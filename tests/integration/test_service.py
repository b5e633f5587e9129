"""The commit service as users run it: ``lakegate-service`` under gunicorn, real Spark, a Delta
table or an Iceberg table in Apache Iceberg's own REST catalog server.

Tables are read back by readers other than Lakegate's (delta-rs and delta-spark; pyiceberg through
the same REST catalog), every field of every record against what the sink files hold; the Spark
UI's REST API shows the labelled commit jobs. A test the same for both formats is one test
parametrized by format.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import requests
from deltalake import DeltaTable
from pyiceberg.catalog import Catalog, load_catalog

from lakegate_stack.datafiles import manifest_entry
from lakegate_stack.iceberg_catalog import IcebergRestCatalog
from lakegate_stack.procfs import process_tree, thp_enabled
from lakegate_stack.services import ADMIN_TOKEN
from tests.http_counter import CountingProxy
from tests.service_helpers import ServiceProcess, manifest, race_commits, write_parquet

TOPIC = TABLE = "orders"  # the topic, and the Delta table's name
OFFSETS = {TOPIC: {"0": 200, "1": 200, "2": 200}}


@pytest.fixture(scope="module")
def rest_catalog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IcebergRestCatalog]:
    workdir = tmp_path_factory.mktemp("iceberg-rest")
    server = IcebergRestCatalog(workdir, (workdir / "warehouse").as_uri()).start()
    yield server
    server.stop()


def pyiceberg(rest_catalog: IcebergRestCatalog) -> Catalog:
    return load_catalog("check", type="rest", uri=rest_catalog.uri)


@dataclass
class ServedTable:
    """One table the service under test commits into, in its format: six sink files of 100
    records each (three partitions, offsets 0..199), and its rows as an independent reader sees them."""

    format: str
    name: str
    root: Path  # a Delta table's directory, an Iceberg table's location
    files: list[dict[str, Any]]
    tables: list[dict[str, Any]]
    roots: list[str]
    catalogs: list[dict[str, Any]] | None
    rows: Callable[[], list[dict[str, Any]]]

    def service(self, tmp_path: Path, name: str) -> ServiceProcess:
        return ServiceProcess(tmp_path, self.tables, self.roots, name=name, catalogs=self.catalogs)

    def assert_holds_once(self, extra: Sequence[dict[str, Any]] = ()) -> None:
        """The reader sees each record the sink files hold exactly once, every field as written."""
        want = {r["id"]: r for r in [*written(self.files), *extra]}
        rows = self.rows()
        assert len(rows) == len({r["id"] for r in rows}) == len(want), f"{len(rows)} rows, {len(want)} records"
        for row in rows:
            assert row == want[row["id"]], row


def written(files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every record the sink files hold."""
    return [r for f in files for r in pq.read_table(f["path"][len("file://") :]).to_pylist()]


def command(pid: int) -> str:
    """The program ``pid`` runs (``python``, ``java``), from its command line's first word ("": gone)."""
    try:
        line = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # a helper the JVM ran has exited
        return ""
    return Path(line.split(b"\0")[0].decode()).name.rstrip("0123456789.")


@pytest.fixture(params=["delta", "iceberg"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> ServedTable:
    """The test's table in each format (an Iceberg table named after the test: the catalog outlives it)."""
    commit = {"interval_seconds": 3600}
    if request.param == "delta":
        root = tmp_path / "lake" / "orders"
        files = [
            write_parquet(root / "data" / f"{TOPIC}-{p}-{s}", TOPIC, p, s, 100) for p in range(3) for s in (0, 100)
        ]
        tables = [{"name": "orders", "path": str(root), "topics": [TOPIC], "commit": commit}]
        return ServedTable(
            "delta",
            "orders",
            root,
            files,
            tables,
            [f"file://{tmp_path}/lake/"],
            None,
            lambda: DeltaTable(str(root)).to_pyarrow_table().to_pylist(),
        )
    rest_catalog: IcebergRestCatalog = request.getfixturevalue("rest_catalog")
    name = f"sales.{request.node.originalname[5:40]}"
    root = tmp_path / "lake" / "sales" / "orders"
    landing = tmp_path / "landing"
    files = [write_parquet(landing / f"{TOPIC}-{p}-{s}", TOPIC, p, s, 100) for p in range(3) for s in (0, 100)]
    tables = [{"name": name, "format": "iceberg", "path": str(root), "topics": [TOPIC], "commit": commit}]
    catalogs = [{"name": "lake", "type": "rest", "uri": rest_catalog.uri}]
    return ServedTable(
        "iceberg",
        name,
        root,
        files,
        tables,
        [f"file://{tmp_path}/"],
        catalogs,
        lambda: pyiceberg(rest_catalog).load_table(name).scan().to_arrow().to_pylist(),
    )


def test_commit_restart_and_resubmit(tmp_path: Path, served: ServedTable, request: pytest.FixtureRequest) -> None:
    t = served
    svc = t.service(tmp_path, "service").start()
    try:
        assert svc.call("GET", "/v1/tables").status_code == 200
        assert requests.get(f"{svc.url}/v1/tables", timeout=10).status_code == 401
        bad = manifest("bad", [{**t.files[0], "path": "file:///etc/passwd"}])
        assert svc.call("POST", "/v1/manifests", json=bad).status_code == 400
        r = svc.call("POST", "/v1/manifests", json=manifest("m1", t.files))
        assert r.status_code == 202 and {f["status"] for f in r.json()["files"]} == {"accepted"}, r.json()
        record = svc.commit_now(t.name)
        assert record["committed"] and record["files"] == 6 and record["records"] == 600, record
        # where the commit's time went, in order, within its duration
        assert list(record["phases_ms"]) == ["facts", "open", "write", "commit"], record
        assert 0 < sum(record["phases_ms"].values()) <= record["duration_ms"], record
        assert svc.call("GET", f"/v1/tables/{t.name}/offsets").json() == OFFSETS
        descriptions = svc.spark_job_descriptions()
        label = f"lakegate commit {t.name} v"
        assert any(d.startswith(label) and ": 6 files, 600 records" in d for d in descriptions), descriptions
        metrics = requests.get(f"{svc.url}/metrics", timeout=10).text
        assert f'lakegate_records_committed_total{{table="{t.name}"}} 600.0' in metrics
        assert svc.process.pid is not None
        # the worker and the Spark JVM it started run without transparent huge pages (Arrow's
        # allocator zeroes a 2 MiB page at each region's first touch with them: docs/configuration.md)
        huge_pages = {
            comm: thp_enabled(pid)
            for pid in process_tree([svc.process.pid])[1:]
            if (comm := command(pid)) in ("python", "java")
        }
        assert set(huge_pages) == {"python", "java"} and not any(huge_pages.values()), huge_pages
    finally:
        svc.stop()
    t.assert_holds_once()
    if t.format == "delta":
        table = DeltaTable(str(t.root))
        assert table.version() == 0
        for p in range(3):
            assert table.transaction_version(f"lakegate-orders-{TOPIC}-{p}") == 200
        meta = json.loads(table.history()[0]["userMetadata"])
        assert meta["offsets"] == OFFSETS and meta["files"] == 6
        assert "phases_ms" not in meta and "duration_ms" not in meta
        spark = request.getfixturevalue("spark")
        assert spark.sql(f"DESCRIBE HISTORY delta.`{t.root}`").collect()[0]["operation"] == "STREAMING UPDATE"
        assert spark.read.format("delta").load(str(t.root)).count() == 600
    else:
        [snapshot] = pyiceberg(request.getfixturevalue("rest_catalog")).load_table(t.name).snapshots()
        assert json.loads(snapshot.summary["lakegate.offsets"]) == OFFSETS
        assert snapshot.summary["lakegate.commit-id"] == record["commit_id"]

    again = t.service(tmp_path, "service-2").start()
    try:
        assert again.call("GET", f"/v1/tables/{t.name}/offsets").json() == OFFSETS
        r = again.call("POST", "/v1/manifests", json=manifest("m1", t.files))
        assert {f["status"] for f in r.json()["files"]} == {"already_committed"}
        assert again.commit_now(t.name)["committed"] is False
        assert again.call("GET", f"/v1/tables/{t.name}").json()["version"] == record["version"]
    finally:
        again.stop()
    t.assert_holds_once()


def test_two_services_racing_on_one_table_never_duplicate(tmp_path: Path, served: ServedTable) -> None:
    a, b = served.service(tmp_path, "svc-a"), served.service(tmp_path, "svc-b")
    a.spawn()
    b.spawn()
    try:
        a.wait_ready()
        b.wait_ready()
        halves = [served.files[::2], served.files]  # b gets every file, a half of them
        for svc, files, mid in ((a, halves[0], "ma"), (b, halves[1], "mb")):
            assert svc.call("POST", "/v1/manifests", json=manifest(mid, files)).status_code == 202
        results = race_commits({"a": a, "b": b}, served.name)
        assert all(code in (200, 409) for codes in results.values() for code in codes), results
    finally:
        a.stop()
        b.stop()
    served.assert_holds_once()  # no offset committed twice or lost, every field as written


@pytest.mark.parametrize("served", ["iceberg"], indirect=True)
def test_a_recreated_topic_begins_a_new_ledger_epoch(
    tmp_path: Path, served: ServedTable, rest_catalog: IcebergRestCatalog
) -> None:
    """After the topic is made again, its offsets 0.. land beside the old ones (keys ``orders~2``
    in ``lakegate.offsets``), and a restart reads the epoch back. (Delta's: tests/e2e/test_first_day.py.)"""
    t = served
    svc = t.service(tmp_path, "svc-epoch").start()
    new = tmp_path / "landing-2" / f"{TOPIC}-0-0"
    new.parent.mkdir(parents=True)
    rows = [{"id": f"e2-{o}", "offset": o, "amount": o * 0.75} for o in range(50)]
    pq.write_table(pa.Table.from_pylist(rows), new)
    entry = {**manifest_entry(new, TOPIC, 0, 0, 50, "parquet"), "record_count": 50}
    try:
        assert svc.call("POST", "/v1/manifests", json=manifest("m1", t.files)).status_code == 202
        assert svc.commit_now(t.name)["committed"]
        assert svc.call("POST", "/v1/manifests", json=manifest("m2", [entry])).json()["files"][0]["status"] == (
            "already_committed"
        )
        opened = svc.call("POST", f"/v1/tables/{t.name}/epochs", ADMIN_TOKEN, json={"topic": TOPIC, "force": True})
        assert opened.status_code == 200 and opened.json()["offsets"] == {f"{TOPIC}~2": {"0": 0, "1": 0, "2": 0}}
        assert svc.call("POST", "/v1/manifests", json=manifest("m3", [entry])).json()["files"][0]["status"] == (
            "accepted"
        )
        assert svc.commit_now(t.name)["offsets"] == {f"{TOPIC}~2": {"0": 50}}
    finally:
        svc.stop()
    t.assert_holds_once(rows)
    summary = pyiceberg(rest_catalog).load_table(t.name).current_snapshot().summary
    assert json.loads(summary["lakegate.offsets"]) == {**OFFSETS, f"{TOPIC}~2": {"0": 50, "1": 0, "2": 0}}
    again = t.service(tmp_path, "svc-epoch-2").start()
    try:
        assert again.call("GET", f"/v1/tables/{t.name}/offsets").json() == {TOPIC: {"0": 50, "1": 0, "2": 0}}
        assert again.call("GET", f"/v1/tables/{t.name}").json()["epochs"] == {TOPIC: 2}
    finally:
        again.stop()


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


def test_an_iceberg_round_costs_the_rest_catalog_its_own_commit_alone(
    tmp_path: Path, rest_catalog: IcebergRestCatalog
) -> None:
    """A round of an Iceberg table costs its REST catalog Iceberg's own commit and nothing more:
    Lakegate does not load the table again (the last round's commit left its metadata in the table
    it holds), no request asks first whether the table exists, none reads again what the commit
    answered, and no metrics report follows it. Counted by a proxy in front of the real catalog
    server; the rows are read back through it."""
    name = "sales.catalog_requests"
    landing = tmp_path / "landing"
    rounds = [[write_parquet(landing / f"{TOPIC}-{p}-{s}", TOPIC, p, s, 100) for p in range(3)] for s in (0, 100, 200)]
    with CountingProxy(rest_catalog.uri) as proxy:
        tables = [
            {
                "name": name,
                "format": "iceberg",
                "path": str(tmp_path / "lake" / "t"),
                "topics": [TOPIC],
                "commit": {"interval_seconds": 3600},
            }
        ]
        catalogs = [{"name": "lake", "type": "rest", "uri": proxy.url}]
        svc = ServiceProcess(tmp_path, tables, [f"file://{tmp_path}/"], name="svc-requests", catalogs=catalogs).start()
        try:
            costs = []
            for i, files in enumerate(rounds):
                assert svc.call("POST", "/v1/manifests", json=manifest(f"m{i}", files)).status_code == 202
                before = proxy.counts()
                assert svc.commit_now(name)["committed"]
                costs.append(proxy.counts() - before)
        finally:
            svc.stop()
    path = "/v1/namespaces/sales/tables/catalog_requests"
    # Iceberg's own commit only: a refresh before the snapshot is made, the commit, a refresh after it
    one_round = {("GET", path): 2, ("POST", path): 1}
    assert costs[1:] == [Counter(one_round)] * 2, costs
    want = {r["id"]: r for r in written([f for files in rounds for f in files])}
    rows = pyiceberg(rest_catalog).load_table(name).scan().to_arrow().to_pylist()
    assert sorted(r["id"] for r in rows) == sorted(want) and all(r == want[r["id"]] for r in rows)
