"""HTTP API v1 over a fake committer (no JVM): auth, limits, validation, statuses, spec."""

from __future__ import annotations

import threading
import time
from typing import Any

import jsonschema
import pytest
from flask.testing import FlaskClient
from jsonschema import ValidationError
from openapi_schema_validator import OAS30Validator
from openapi_spec_validator import validate

from commit_service.config import ServiceConfig, TableConfig
from commit_service.domain.plan import CommitPlan
from commit_service.http.app import create_app
from commit_service.http.openapi import document
from commit_service.http.runtime import runtime
from lakegate_core.configfile import build
from lakegate_core.status import CommitRecord, MaintenanceKind, MaintenanceRecord
from tests.unit.fakes import ADMIN, CONFIG, FakeCommitter, h, lease, manifest, pending


def test_auth(client: FlaskClient) -> None:
    assert client.get("/v1/tables").status_code == 401
    r = client.get("/v1/tables", headers=h("wrong-token-000000000"))
    assert r.status_code == 401 and r.json["error"]["code"] == "unauthorized"  # type: ignore[index]
    assert client.post("/v1/tables/orders/commit", headers=h()).status_code == 403
    assert client.post("/v1/tables/orders/commit", headers=h(ADMIN)).status_code == 200
    for open_path in ("/healthz", "/metrics", "/openapi.json"):
        assert client.get(open_path).status_code == 200


def test_accept_commit_and_resubmit(client: FlaskClient, committer: FakeCommitter) -> None:
    r = client.post("/v1/manifests", json=manifest(), headers=h())
    assert r.status_code == 202
    assert r.json["files"] == [{"path": "s3a://landing/orders-0-0", "status": "accepted", "table": "orders"}]  # type: ignore[index]
    assert client.get("/v1/manifests/m1", headers=h()).json["status"] == "accepted"  # type: ignore[index]
    assert client.post("/v1/manifests", json=manifest(), headers=h()).json["files"][0]["status"] == "duplicate"  # type: ignore[index]
    r = client.post("/v1/tables/orders/commit", headers=h(ADMIN))
    assert r.json["committed"] is True and r.json["offsets"] == {"orders": {"0": 10}}  # type: ignore[index]
    assert client.get("/v1/manifests/m1", headers=h()).json == {
        "manifest_id": "m1",
        "status": "committed",  # type: ignore[index]
        "table": "orders",
        "version": 0,
    }
    again = client.post("/v1/manifests", json=manifest(), headers=h())
    assert again.json["files"][0]["status"] == "already_committed"  # type: ignore[index]
    assert client.get("/v1/tables/orders/offsets", headers=h()).json == {"orders": {"0": 10}}
    assert len(committer.commits) == 1
    commits = client.get("/v1/commits?table=orders&limit=5", headers=h()).json["commits"]  # type: ignore[index]
    assert [c["version"] for c in commits] == [0]
    assert client.post("/v1/tables/orders/commit", headers=h(ADMIN)).json["committed"] is False  # type: ignore[index]
    # only the accepted file was handed on to be read ahead (not the duplicate, not the committed one)
    assert [f.path for f in committer.prefetched] == ["s3a://landing/orders-0-0"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"manifest_id": "x"}, "sidecar"),
        ({**manifest(), "files": [{**manifest()["files"][0], "end_offset": -1}]}, "files[0].end_offset"),
        (
            {**manifest(), "files": [{**manifest()["files"][0], "start_offset": 5, "end_offset": 1}]},
            "files[0].end_offset",
        ),
        (manifest(path="s3a://other-bucket/orders-0-0"), "files[0].path"),
        (manifest(path="s3a://landing/../lake/orders/x"), "files[0].path"),
        (manifest(path="file:///etc/passwd"), "files[0].path"),
        (manifest(path="http://landing/x"), "files[0].path"),
    ],
)
def test_bad_input_is_400_and_changes_nothing(client: FlaskClient, body: dict[str, Any], field: str) -> None:
    client.post("/v1/manifests", json=manifest("base"), headers=h())
    before = client.get("/v1/tables/orders", headers=h()).json
    r = client.post("/v1/manifests", json=body, headers=h())
    assert r.status_code == 400, r.json
    assert r.json["error"]["details"]["field"] == field  # type: ignore[index]
    assert client.get("/v1/tables/orders", headers=h()).json == before


def test_not_json_and_too_large(client: FlaskClient) -> None:
    r = client.post("/v1/manifests", data="{not json", headers={**h(), "Content-Type": "application/json"})
    assert r.status_code == 400 and "not valid JSON" in r.json["error"]["message"]  # type: ignore[index]
    assert client.post("/v1/manifests", data="x", headers=h()).status_code == 400
    big = manifest()
    big["sidecar"]["id"] = "x" * 5000
    r = client.post("/v1/manifests", json=big, headers=h())
    assert r.status_code == 413 and r.json["error"]["code"] == "payload_too_large"  # type: ignore[index]
    assert pending(client) == 0


def test_overlap_and_unknown_topic_are_rejected_per_file(client: FlaskClient) -> None:
    client.post("/v1/manifests", json=manifest("a", 0, 9), headers=h())
    r = client.post("/v1/manifests", json=manifest("b", 5, 14, path="s3a://landing/other"), headers=h())
    assert r.status_code == 202 and r.json["files"][0]["status"] == "rejected"  # type: ignore[index]
    assert client.get("/v1/manifests/b", headers=h()).json["status"] == "rejected"  # type: ignore[index]
    r = client.post("/v1/manifests", json=manifest("c", topic="payments"), headers=h())
    assert r.json["files"][0] == {
        "path": "s3a://landing/payments-0-0",
        "status": "rejected",  # type: ignore[index]
        "reason": "no table takes topic 'payments'",
    }
    assert pending(client) == 1
    metrics = client.get("/metrics").data.decode()
    assert 'lakegate_manifest_files_rejected_total{reason="overlap"} 1.0' in metrics
    assert 'lakegate_pending_files{table="orders"} 1.0' in metrics


def test_failed_commit_keeps_files_and_reports(client: FlaskClient, committer: FakeCommitter) -> None:
    client.post("/v1/manifests", json=manifest(), headers=h())
    committer.fail_next = True
    r = client.post("/v1/tables/orders/commit", headers=h(ADMIN))
    assert r.status_code == 503 and r.json["error"]["code"] == "commit_failed"  # type: ignore[index]
    assert pending(client) == 1
    assert client.post("/v1/tables/orders/commit", headers=h(ADMIN)).json["committed"] is True  # type: ignore[index]
    assert pending(client) == 0
    metrics = client.get("/metrics").data.decode()
    assert 'lakegate_commits_total{result="ok",table="orders"} 1.0' in metrics
    assert 'lakegate_committed_offset{partition="0",table="orders",topic="orders"} 10.0' in metrics


def test_not_found_and_limits(client: FlaskClient) -> None:
    assert client.get("/v1/tables/nope", headers=h()).status_code == 404
    assert client.get("/v1/manifests/nope", headers=h()).status_code == 404
    assert client.get("/v1/commits?limit=0", headers=h()).status_code == 400
    assert client.get("/v1/nothing-here", headers=h()).status_code == 404


def test_readyz_waits_for_the_tables(committer: FakeCommitter) -> None:
    app = create_app(build(ServiceConfig, CONFIG), committer_factory=lambda t: committer, start=False)
    c = app.test_client()
    assert c.get("/readyz").status_code == 503
    assert c.post("/v1/manifests", json=manifest(), headers=h()).status_code == 503
    runtime(app).coordinator.load()
    assert c.get("/readyz").status_code == 200


def test_start_thread_loads_and_commits_on_interval(committer: FakeCommitter) -> None:
    cfg = build(ServiceConfig, {**CONFIG, "tables": [{**CONFIG["tables"][0], "commit": {"interval_seconds": 0.2}}]})
    app = create_app(cfg, committer_factory=lambda t: committer)
    c = app.test_client()
    deadline = time.monotonic() + 10
    while c.get("/readyz").status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    c.post("/v1/manifests", json=manifest(), headers=h())
    while not committer.commits and time.monotonic() < deadline:
        time.sleep(0.05)
    runtime(app).coordinator.stop()
    assert committer.offsets == {("orders", 0): 10}


def test_unexpected_error_is_a_500_without_trace(client: FlaskClient, monkeypatch: pytest.MonkeyPatch) -> None:
    coordinator = runtime(client.application).coordinator
    monkeypatch.setattr(coordinator, "summaries", lambda: 1 / 0)
    r = client.get("/v1/tables", headers=h())
    assert r.status_code == 500 and "Traceback" not in r.data.decode() and "ZeroDivision" not in r.data.decode()


def test_openapi_is_valid_and_matches_the_protocol() -> None:
    doc = document()
    validate(doc)
    schema = {**doc["components"]["schemas"]["Manifest"], "components": doc["components"]}
    resolver_doc = {"components": doc["components"], **schema}
    jsonschema.validate(manifest(), resolver_doc)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**manifest(), "files": [{**manifest()["files"][0], "start_offset": -1}]}, resolver_doc)


def conforms(doc: dict[str, Any], model: str, body: Any) -> None:
    """``body`` validates against the generated schema ``model`` (OpenAPI 3.0 flavour: nullable)."""
    schema = {**doc["components"]["schemas"][model], "components": doc["components"]}
    OAS30Validator(schema).validate(body)


def test_every_answer_matches_its_generated_schema(client: FlaskClient, committer: FakeCommitter) -> None:
    doc = document()
    assert not any(
        "additionalProperties" in s and s.get("type") == "object" and not s.get("properties")
        for name, s in doc["components"]["schemas"].items()
        if name != "PartitionOffsets"
    )
    paths = doc["paths"]
    r = client.post("/v1/manifests", json=manifest(), headers=h())
    assert paths["/v1/manifests"]["post"]["responses"]["202"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ManifestReceipt"
    }
    conforms(doc, "ManifestReceipt", r.json)
    conforms(doc, "LeaseResponse", lease(client, "sc-a", "10.0.0.1:8083", [0], [0]))
    conforms(doc, "ManifestStatus", client.get("/v1/manifests/m1", headers=h()).json)
    conforms(doc, "TableList", client.get("/v1/tables", headers=h()).json)
    conforms(doc, "TableSummary", client.get("/v1/tables/orders", headers=h()).json)
    made = client.post("/v1/tables/orders/commit", headers=h(ADMIN)).json
    conforms(doc, "CommitOutcome", made)
    conforms(doc, "CommitOutcome", client.post("/v1/tables/orders/commit", headers=h(ADMIN)).json)
    conforms(doc, "PartitionOffsets", client.get("/v1/tables/orders/offsets", headers=h()).json)
    commits = client.get("/v1/commits", headers=h()).json
    conforms(doc, "CommitList", commits)
    assert commits["commits"][0]["vtts"] is None  # nullable, and present
    for bad in (
        client.get("/v1/tables/nope", headers=h()),
        client.post("/v1/manifests", json={}, headers=h()),
        client.get("/v1/tables", headers=h("x" * 20)),
    ):
        assert bad.status_code in (400, 401, 404)
        conforms(doc, "ErrorBody", bad.json)
    with pytest.raises(ValidationError):
        conforms(doc, "TableSummary", {**client.get("/v1/tables/orders", headers=h()).json, "pending_files": -1})


def test_table_config_routing() -> None:
    t = TableConfig("t", "/x", topics_regex=r"orders\..*")
    assert t.routes("orders.eu") and not t.routes("orders")


def test_a_missing_file_is_dropped_and_the_other_partitions_commit(
    client: FlaskClient, committer: FakeCommitter
) -> None:
    from commit_service.errors import DataFileError

    client.post("/v1/manifests", json=manifest("gone", partition=0), headers=h())
    client.post("/v1/manifests", json=manifest("fine", partition=1), headers=h())
    real_commit = committer.commit

    def commit(plan: CommitPlan) -> CommitRecord:
        if any(p.file.partition == 0 for p in plan.files):
            raise DataFileError("s3a://landing/orders-0-0", "does not exist")
        return real_commit(plan)

    committer.commit = commit  # type: ignore[method-assign]
    r = client.post("/v1/tables/orders/commit", headers=h(ADMIN))
    assert r.status_code == 422 and r.json["error"]["details"]["path"] == "s3a://landing/orders-0-0"  # type: ignore[index]
    assert client.get("/v1/manifests/gone", headers=h()).json["status"] == "rejected"  # type: ignore[index]
    assert "does not exist" in client.get("/v1/tables/orders", headers=h()).json["last_error"]  # type: ignore[index]
    assert client.post("/v1/tables/orders/commit", headers=h(ADMIN)).json["offsets"] == {"orders": {"1": 10}}  # type: ignore[index]


def test_in_place_tables_take_parquet_files_outside_their_root_to_rewrite_them(committer: FakeCommitter) -> None:
    """Placement concerns the files added where they lie; one outside the root (or in the sink's
    envelope, which intake cannot see) is rewritten into the table by the commit."""
    cfg = {
        **CONFIG,
        "storage": {"allowed_roots": ["s3a://landing/", "s3a://lake/"]},
        "tables": [{"name": "orders", "path": "s3a://lake/orders", "topics": ["orders"], "placement": "in_place"}],
    }
    app = create_app(build(ServiceConfig, cfg), committer_factory=lambda t: committer, start=False)
    runtime(app).coordinator.load()
    c = app.test_client()
    outside = c.post("/v1/manifests", json=manifest("out"), headers=h()).json["files"][0]
    assert outside["status"] == "accepted"
    inside = manifest("in", start=10, end=19, path="s3a://lake/orders/data/orders-0-10")
    assert c.post("/v1/manifests", json=inside, headers=h()).json["files"][0]["status"] == "accepted"
    text = manifest("jsonl", start=20, end=29, path="s3a://landing/orders-0-20.gz")
    text["files"][0]["format"] = "jsonl"  # rewritten into the table anyway: its location does not matter
    assert c.post("/v1/manifests", json=text, headers=h()).json["files"][0]["status"] == "accepted"


def test_maintenance_runs_between_rounds_and_on_demand(committer: FakeCommitter) -> None:
    table = {**CONFIG["tables"][0], "catalog": {"name": "lake.orders"}}
    table["maintenance"] = {"enabled": True, "compact_interval_seconds": 60, "compact_min_files": 2}
    now = [1000.0]
    app = create_app(
        build(ServiceConfig, {**CONFIG, "tables": [table]}), committer_factory=lambda t: committer, start=False
    )
    coordinator = runtime(app).coordinator
    coordinator.clock = lambda: now[0]
    coordinator.load()
    c = app.test_client()
    for i in range(3):
        c.post("/v1/manifests", json=manifest(f"m{i}", start=i * 10, end=i * 10 + 9), headers=h())
        assert c.post("/v1/tables/orders/commit", headers=h(ADMIN)).json["committed"] is True
    assert committer.registered == ["lake.orders"], "registered once, when the first commit created the table"
    coordinator.tick()
    assert committer.maintained == [], "not before compact_interval_seconds"
    now[0] += 61
    coordinator.tick()
    assert committer.maintained == [MaintenanceKind.COMPACT]
    coordinator.tick()
    assert committer.maintained == [MaintenanceKind.COMPACT], "once per interval"
    run = c.post("/v1/tables/orders/maintenance/vacuum", headers=h(ADMIN))
    assert run.status_code == 200 and run.json["kind"] == "vacuum"
    assert c.post("/v1/tables/orders/maintenance/vacuum", headers=h()).status_code == 403
    assert c.post("/v1/tables/orders/maintenance/shrink", headers=h(ADMIN)).status_code == 400
    listed = c.get("/v1/tables/orders/maintenance", headers=h()).json
    assert listed["enabled"] is True and [r["kind"] for r in listed["runs"]] == ["vacuum", "compact"]
    conforms(document(), "MaintenanceList", listed)


def test_small_files_of_recent_rounds_are_merged_between_rounds_once_too_many(committer: FakeCommitter) -> None:
    table = {**CONFIG["tables"][0], "maintenance": {"enabled": True, "small_files_allowed": 3}}
    app = create_app(
        build(ServiceConfig, {**CONFIG, "tables": [table]}), committer_factory=lambda t: committer, start=False
    )
    coordinator = runtime(app).coordinator
    coordinator.load()
    c = app.test_client()
    looks = []
    small_files = committer.small_files

    def counted(below: int) -> dict:
        looks.append(below)
        return small_files(below)

    committer.small_files = counted  # type: ignore[method-assign]
    for i in range(4):
        c.post("/v1/manifests", json=manifest(f"m{i}", start=i * 10, end=i * 10 + 9), headers=h())
        assert c.post("/v1/tables/orders/commit", headers=h(ADMIN)).json["committed"] is True
        coordinator.tick()
        coordinator.tables["orders"].drain()  # the merge runs on the table's background thread
    # looked after the first round (1 file: 3 more to be due), then after the fourth
    assert looks == [128 * 1024 * 1024] * 2
    assert len(committer.merged) == 1 and committer.merged[0].groups[0].files == 4
    listed = c.get("/v1/tables/orders/maintenance", headers=h()).json
    assert [r["kind"] for r in listed["runs"]] == ["compact"]

    def broken(below: int) -> dict:
        raise RuntimeError("the metadata read failed")

    committer.small_files = broken  # type: ignore[method-assign]
    for i in range(4, 9):  # a failure is logged; rounds go on, and the next look waits
        c.post("/v1/manifests", json=manifest(f"m{i}", start=i * 10, end=i * 10 + 9), headers=h())
        assert c.post("/v1/tables/orders/commit", headers=h(ADMIN)).json["committed"] is True
        coordinator.tick()
        coordinator.tables["orders"].drain()
    assert len(committer.merged) == 1


def test_rounds_commit_while_a_merge_of_small_files_runs(committer: FakeCommitter) -> None:
    policy = {"enabled": True, "small_files_allowed": 2, "compact_interval_seconds": 60, "compact_min_files": 2}
    table = {**CONFIG["tables"][0], "maintenance": policy}
    now = [1000.0]
    app = create_app(
        build(ServiceConfig, {**CONFIG, "tables": [table]}), committer_factory=lambda t: committer, start=False
    )
    coordinator = runtime(app).coordinator
    coordinator.clock = lambda: now[0]
    coordinator.load()
    c = app.test_client()
    entered, release = threading.Event(), threading.Event()
    compact_small = committer.compact_small

    def slow(plan: Any) -> Any:  # a merge that takes as long as the test says
        entered.set()
        assert release.wait(30)
        return compact_small(plan)

    committer.compact_small = slow  # type: ignore[method-assign]
    try:
        for i in range(3):  # the third file: over the allowance of two
            c.post("/v1/manifests", json=manifest(f"m{i}", start=i * 10, end=i * 10 + 9), headers=h())
            assert c.post("/v1/tables/orders/commit", headers=h(ADMIN)).json["committed"] is True
            coordinator.tick()
        assert entered.wait(10), "the merge started"
        c.post("/v1/manifests", json=manifest("m3", start=30, end=39), headers=h())
        assert c.post("/v1/tables/orders/commit", headers=h(ADMIN)).json["committed"] is True, "not held by it"
        now[0] += 61
        coordinator.tick()  # the interval's compaction waits for the merge: two rewrites would conflict
        assert committer.maintained == [] and committer.merged == []
    finally:
        release.set()
        coordinator.tables["orders"].drain()
    assert len(committer.merged) == 1
    coordinator.tick()
    assert committer.maintained == [MaintenanceKind.COMPACT]


@pytest.mark.parametrize("enabled", [True, False])
def test_checkpoints_are_written_in_the_background_every_n_commits(committer: FakeCommitter, enabled: bool) -> None:
    # compaction and vacuum off (the default) or on: checkpoints leave the commit path either way
    table = {**CONFIG["tables"][0], "maintenance": {"enabled": enabled, "checkpoint_interval_commits": 2}}
    app = create_app(
        build(ServiceConfig, {**CONFIG, "tables": [table]}), committer_factory=lambda t: committer, start=False
    )
    coordinator = runtime(app).coordinator
    coordinator.load()
    c = app.test_client()
    for i in range(5):  # versions 0..4: checkpoints after v2 and v4
        c.post("/v1/manifests", json=manifest(f"m{i}", start=i * 10, end=i * 10 + 9), headers=h())
        assert c.post("/v1/tables/orders/commit", headers=h(ADMIN)).json["committed"] is True
    deadline = time.monotonic() + 30
    while len(c.get("/v1/tables/orders/maintenance", headers=h()).json["runs"]) < 2:
        assert time.monotonic() < deadline, "the background checkpoints did not run"
        time.sleep(0.05)
    runs = c.get("/v1/tables/orders/maintenance", headers=h()).json["runs"]
    assert [r["kind"] for r in runs] == ["checkpoint", "checkpoint"]
    # each checkpoints the version current when it runs: the one after v2 may already see v3 or v4
    assert runs[0]["version_before"] == 4 and 2 <= runs[1]["version_before"] <= 4


def test_a_checkpoint_still_being_written_makes_the_next_one_skip_not_queue(committer: FakeCommitter) -> None:
    gate, started = threading.Event(), threading.Event()
    calls: list[int] = []
    plain = committer.checkpoint

    def slow_checkpoint() -> MaintenanceRecord:
        calls.append(committer.version)
        started.set()
        assert gate.wait(30)
        return plain()

    committer.checkpoint = slow_checkpoint  # type: ignore[method-assign]
    table = {**CONFIG["tables"][0], "maintenance": {"checkpoint_interval_commits": 2}}
    app = create_app(
        build(ServiceConfig, {**CONFIG, "tables": [table]}), committer_factory=lambda t: committer, start=False
    )
    coordinator = runtime(app).coordinator
    coordinator.load()
    c = app.test_client()
    for i in range(3):  # v0..v2: the checkpoint after v2 starts and blocks
        c.post("/v1/manifests", json=manifest(f"m{i}", start=i * 10, end=i * 10 + 9), headers=h())
        c.post("/v1/tables/orders/commit", headers=h(ADMIN))
    assert started.wait(30)
    for i in range(3, 7):  # v3..v6: the ones after v4 and v6 are skipped while it is being written
        c.post("/v1/manifests", json=manifest(f"m{i}", start=i * 10, end=i * 10 + 9), headers=h())
        c.post("/v1/tables/orders/commit", headers=h(ADMIN))
    gate.set()
    coordinator.stop()  # waits for the checkpoint being written
    assert calls == [2] and committer.version == 6


def test_a_watermarks_first_file_decides_where_a_partitions_ledger_begins(
    client: FlaskClient, committer: FakeCommitter
) -> None:
    """Over HTTP: files from 500 wait until a watermark carries where the sink's first file is;
    the table's summary says where the ledger began and why, and the first commit records it."""
    assert client.post("/v1/manifests", json=manifest("m1", 500, 599), headers=h()).status_code == 202
    assert client.post("/v1/tables/orders/commit", headers=h(ADMIN)).json["committed"] is False  # type: ignore[index]
    body = {
        "sidecar": {"id": "sc-1", "worker": "w:8083"},
        "connector": "snk",
        "tasks": [0],
        "partitions": [{"topic": "orders", "partition": 0}],
        "watermarks": [{"topic": "orders", "partition": 0, "connect_offset": 600, "read_at_ms": 1, "first_file": 500}],
    }
    assert client.post("/v1/leases", json=body, headers=h()).status_code == 200
    summary = client.get("/v1/tables/orders", headers=h()).json
    assert summary["starts"]["orders-0"]["offset"] == 500  # type: ignore[index]
    assert summary["starts"]["orders-0"]["reason"] == "first_file"  # type: ignore[index]
    r = client.post("/v1/tables/orders/commit", headers=h(ADMIN))
    assert r.json["committed"] is True and r.json["offsets"] == {"orders": {"0": 600}}  # type: ignore[index]
    [record] = client.get("/v1/commits?table=orders", headers=h()).json["commits"]  # type: ignore[index]
    assert record["begins"] == {"orders": {"0": 500}} and record["begin_reasons"] == {"orders-0": "first_file"}
    assert record["starts"] == {"orders": {"0": 500}}
    bad = {**body, "watermarks": [{**body["watermarks"][0], "first_file": -1}]}  # type: ignore[dict-item]
    assert client.post("/v1/leases", json=bad, headers=h()).status_code == 400


def test_a_recreated_topic_begins_a_new_ledger_epoch(client: FlaskClient, committer: FakeCommitter) -> None:
    """POST /v1/tables/{table}/epochs: admin only, checked, and then the topic's offsets begin again
    (this config has no kafka section: the check cannot be made, so it takes force)."""
    client.post("/v1/manifests", json=manifest(), headers=h())
    assert client.post("/v1/tables/orders/commit", headers=h(ADMIN)).json["committed"] is True  # type: ignore[index]
    url = "/v1/tables/orders/epochs"
    assert client.post(url, json={"topic": "orders"}, headers=h()).status_code == 403
    for body, status, code in [
        ({"topic": "payments"}, 400, "bad_request"),
        ({"topic": "orders", "forse": True}, 400, "bad_request"),
        (["orders"], 400, "bad_request"),
        ({"topic": "orders"}, 409, "conflict"),  # no kafka section: cannot check, so not without force
    ]:
        r = client.post(url, json=body, headers=h(ADMIN))
        assert (r.status_code, r.json["error"]["code"]) == (status, code), r.json  # type: ignore[index]
    assert "no kafka section" in client.post(url, json={"topic": "orders"}, headers=h(ADMIN)).json["error"]["message"]  # type: ignore[index]
    assert client.post("/v1/tables/nope/epochs", json={"topic": "orders"}, headers=h(ADMIN)).status_code == 404
    r = client.post(url, json={"topic": "orders", "force": True}, headers=h(ADMIN))
    assert r.status_code == 200, r.json
    assert r.json["offsets"] == {"orders~2": {"0": 0}}  # type: ignore[index]
    assert r.json["begin_reasons"] == {"orders~2-0": "epoch"}  # type: ignore[index]
    conforms(document(), "CommitOutcome", r.json)
    summary = client.get("/v1/tables/orders", headers=h()).json
    assert summary["offsets"] == {"orders": {"0": 0}} and summary["epochs"] == {"orders": 2}  # type: ignore[index]
    conforms(document(), "TableSummary", summary)
    again = client.post("/v1/manifests", json=manifest("m2"), headers=h())
    assert again.json["files"][0]["status"] == "accepted"  # type: ignore[index]
    assert client.post("/v1/tables/orders/commit", headers=h(ADMIN)).json["offsets"] == {"orders~2": {"0": 10}}  # type: ignore[index]
    assert client.get("/v1/tables/orders/offsets", headers=h()).json == {"orders": {"0": 10}}
