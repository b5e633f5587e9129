"""Validation at the edge, each a reported defect: no malformed request is a 5xx, none changes state."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from commit_service.config import ServiceConfig
from commit_service.domain.plan import CommitPlan
from commit_service.errors import DataFileError
from commit_service.http.app import create_app
from commit_service.http.runtime import runtime
from lakegate_core.configfile import build
from lakegate_core.status import CommitRecord
from tests.unit.fakes import ADMIN, CONFIG, FakeCommitter, h, manifest, pending


@pytest.fixture
def committer() -> FakeCommitter:
    return FakeCommitter()


def client_for(committer: FakeCommitter, **commit: Any) -> FlaskClient:
    raw = {**CONFIG, "server": {"max_request_bytes": 1 << 20}}
    raw["tables"] = [{**CONFIG["tables"][0], "commit": {"interval_seconds": 3600, **commit}}]  # type: ignore[index]
    app = create_app(build(ServiceConfig, raw), committer_factory=lambda t: committer, start=False)
    runtime(app).coordinator.load()
    return app.test_client()


@pytest.fixture
def client(committer: FakeCommitter) -> FlaskClient:
    return client_for(committer)


def error(r: Any, status: int, code: str = "bad_request") -> dict[str, Any]:
    assert r.status_code == status, r.data
    assert r.json["error"]["code"] == code, r.json
    return r.json["error"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("end_offset", 2**63 - 1),  # its next offset would overflow Delta's txn version
        ("end_offset", 2**64),
        ("start_offset", 2**63),
        ("partition", 2**31),
        ("partition", 2**63),
    ],
)
def test_offsets_and_partitions_fit_kafka_and_delta(client: FlaskClient, field: str, value: int) -> None:
    body = manifest()
    body["files"][0][field] = value
    if field == "start_offset":
        body["files"][0]["end_offset"] = value
    assert error(client.post("/v1/manifests", json=body, headers=h()), 400)["details"]["field"] == f"files[0].{field}"
    assert pending(client) == 0


def test_lease_watermark_beyond_64_bits_is_a_400_and_changes_nothing(client: FlaskClient) -> None:
    before = client.get("/v1/tables", headers=h()).json
    body = {
        "sidecar": {"id": "sc-1", "worker": "w:8083"},
        "connector": "snk",
        "tasks": [0],
        "partitions": [{"topic": "orders", "partition": 0}],
        "watermarks": [{"topic": "orders", "partition": 0, "connect_offset": 5, "read_at_ms": 10**400}],
    }
    r = client.post(
        "/v1/leases",
        data=f'{{"sidecar": {{"id": "sc-1", "worker": "w"}}, "x": {10**400}}}',
        headers=h(),
        content_type="application/json",
    )
    assert r.status_code == 400
    r = client.post("/v1/leases", json=body, headers=h())
    assert r.status_code == 400 and "read_at_ms" in r.json["error"]["message"]  # type: ignore[index]
    assert client.get("/v1/tables", headers=h()).json == before


@pytest.mark.parametrize("depth", [33, 1_000, 100_000])
def test_deeply_nested_json_is_a_400(client: FlaskClient, depth: int) -> None:
    body = "[" * depth + "]" * depth
    r = client.post("/v1/manifests", data=body, headers=h(), content_type="application/json")
    assert "nested deeper" in error(r, 400)["message"]


@pytest.mark.parametrize("limit", ["²", "١٠", "0", "1001", "-1", "1e3", " 5", ""])
def test_query_parameters_are_validated(client: FlaskClient, limit: str) -> None:
    error(client.get(f"/v1/commits?limit={limit}", headers=h()), 400)
    error(client.get("/v1/dead-letters?state=lost", headers=h()), 400)


def test_a_reused_manifest_id_with_other_files_is_a_409(client: FlaskClient) -> None:
    assert client.post("/v1/manifests", json=manifest("m1"), headers=h()).status_code == 202
    assert client.post("/v1/manifests", json=manifest("m1"), headers=h()).status_code == 202  # same files: idempotent
    other = manifest("m1", start=10, end=19)
    assert (
        error(client.post("/v1/manifests", json=other, headers=h()), 409, "conflict")["details"]["field"]
        == "manifest_id"
    )
    assert pending(client) == 1


def test_a_full_buffer_answers_429_with_retry_after(committer: FakeCommitter) -> None:
    client = client_for(committer, max_pending_files=2)
    for i in range(2):
        assert client.post("/v1/manifests", json=manifest(f"m{i}", 10 * i, 10 * i + 9), headers=h()).status_code == 202
    r = client.post("/v1/manifests", json=manifest("m2", 20, 29), headers=h())
    assert error(r, 429, "too_many_pending")["details"]["retry_after_seconds"] == 3600
    assert r.headers["Retry-After"] == "3600"
    assert pending(client) == 2
    client.post("/v1/tables/orders/commit", headers=h(ADMIN))
    assert client.post("/v1/manifests", json=manifest("m2", 20, 29), headers=h()).status_code == 202


@pytest.mark.parametrize(
    "path",
    [
        "s3://landing/a%252e%252e/../x",
        "s3://landing/%2e%2e/outside/x",
        "s3://landing/dir/",
        "s3://landing/x?versionId=1",
        "s3://landing/100%",
        "s3://landing/12:00",
        "s3://landing2/x",
    ],
)
def test_unsafe_paths_are_a_400_naming_the_field(client: FlaskClient, path: str) -> None:
    r = client.post("/v1/manifests", json=manifest(path=path), headers=h())
    assert error(r, 400)["details"]["field"] == "files[0].path"
    assert pending(client) == 0


def test_a_space_in_a_name_is_kept_canonical_and_commits(client: FlaskClient, committer: FakeCommitter) -> None:
    r = client.post("/v1/manifests", json=manifest(path="s3://landing/orders 0+0=x.parquet"), headers=h())
    assert r.json["files"][0]["path"] == "s3a://landing/orders%200+0=x.parquet"  # type: ignore[index]
    assert client.post("/v1/tables/orders/commit", headers=h(ADMIN)).json["committed"] is True  # type: ignore[index]
    assert committer.commits[0].files[0].file.path == "s3a://landing/orders%200+0=x.parquet"


def test_dead_letters_over_http(client: FlaskClient, committer: FakeCommitter) -> None:
    client.post("/v1/manifests", json=manifest("bad", 0, 9), headers=h())
    real = committer.commit

    def commit(plan: CommitPlan) -> CommitRecord:
        if any(p.file.start_offset == 0 for p in plan.files):
            raise DataFileError(plan.files[0].file.path, "is a symbolic link: only regular files are committed")
        return real(plan)

    committer.commit = commit  # type: ignore[method-assign]
    error(client.post("/v1/tables/orders/commit", headers=h(ADMIN)), 422, "bad_data_file")
    letters = client.get("/v1/dead-letters", headers=h()).json["dead_letters"]  # type: ignore[index]
    assert [(d["file"]["start_offset"], d["state"], d["code"]) for d in letters] == [
        (0, "quarantined", "bad_data_file")
    ]
    assert client.get("/v1/tables/orders", headers=h()).json["dead_letters"] == 1  # type: ignore[index]
    assert 'lakegate_dead_letters{table="orders"} 1.0' in client.get("/metrics").data.decode()
    letter = letters[0]["id"]
    error(client.post(f"/v1/dead-letters/{letter}/release", headers=h()), 403, "forbidden")
    error(client.post("/v1/dead-letters/nope/release", headers=h(ADMIN)), 404, "not_found")
    r = client.post(f"/v1/dead-letters/{letter}/release", headers=h(ADMIN))
    assert r.status_code == 200 and r.json["offsets"] == {"orders": {"0": 10}}  # type: ignore[index]
    assert committer.commits[-1].released == (letter,) and committer.commits[-1].files == ()
    error(client.post(f"/v1/dead-letters/{letter}/retry", headers=h(ADMIN)), 409, "conflict")
    assert client.get("/v1/dead-letters?state=released", headers=h()).json["dead_letters"][0]["id"] == letter  # type: ignore[index]


def test_a_token_bound_to_a_sidecar_speaks_only_for_it(committer: FakeCommitter) -> None:
    raw = {**CONFIG, "auth": {"tokens": [{"token": "bound-token-0123456789", "sidecar_id": "sc-1"}]}}
    app = create_app(build(ServiceConfig, raw), committer_factory=lambda t: committer, start=False)
    runtime(app).coordinator.load()
    client = app.test_client()
    bound = {"Authorization": "Bearer bound-token-0123456789"}
    assert client.post("/v1/manifests", json=manifest("own"), headers=bound).status_code == 202
    other = manifest("theirs", 10, 19)
    other["sidecar"]["id"] = "sc-2"
    assert (
        error(client.post("/v1/manifests", json=other, headers=bound), 403, "forbidden")["details"]["field"]
        == "sidecar.id"
    )
    claim = {"sidecar": {"id": "sc-2", "worker": "w"}, "connector": "snk", "tasks": [0], "partitions": []}
    error(client.post("/v1/leases", json=claim, headers=bound), 403, "forbidden")
