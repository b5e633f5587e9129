"""Generated requests against the live service (gunicorn, real Spark + Delta), every role:
no answer is a 5xx, and every error has the documented shape (schemathesis, from /openapi.json)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from commit_service.http.openapi import document
from tests.service_helpers import ADMIN_TOKEN, SIDECAR_TOKEN, ServiceProcess, manifest, write_parquet

ROLES = {
    "none": {},
    "sidecar": {"Authorization": f"Bearer {SIDECAR_TOKEN}"},
    "admin": {"Authorization": f"Bearer {ADMIN_TOKEN}"},
}
ERROR_BODY = {"$ref": "#/components/schemas/ErrorBody", "components": document()["components"]}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    tmp = tmp_path_factory.mktemp("fuzz")
    root = tmp / "lake" / "orders"
    first = write_parquet(root / "data" / "orders-0-0", "orders", 0, 0, 10)
    tables = [{"name": "orders", "path": str(root), "topics": ["orders"], "commit": {"interval_seconds": 3600}}]
    svc = ServiceProcess(tmp, tables, [f"file://{tmp}/lake/"], name="fuzzed").start()
    assert svc.call("POST", "/v1/manifests", json=manifest("seed", [first])).status_code == 202
    assert svc.commit_now("orders")["committed"]  # a real table for maintenance to work on
    yield svc
    svc.stop()


def _check(case: Any, service: ServiceProcess, calls: list[tuple[str, str, int]]) -> None:
    for role, headers in ROLES.items():
        response = case.call(base_url=service.url, headers=headers, timeout=120)
        calls.append((case.operation.label, role, response.status_code))
        assert response.status_code < 500, (
            f"{role} {case.method} {case.formatted_path}: {response.status_code} {response.text[:500]}"
        )
        if response.status_code >= 400:
            jsonschema.validate(response.json(), ERROR_BODY)
            assert "Traceback" not in response.text and "py4j" not in response.text


def test_no_5xx_and_every_error_is_json(service: ServiceProcess) -> None:
    """Valid and invalid requests generated for every operation, each sent with no token, a
    sidecar token and an admin token."""
    api = schemathesis.openapi.from_url(f"{service.url}/openapi.json")
    calls: list[tuple[str, str, int]] = []
    for result in api.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            # valid requests name the real table (so commits and maintenance run on Spark); invalid ones anything
            real = {"table": "orders"} if mode is GenerationMode.POSITIVE and "{table}" in operation.path else None

            @given(operation.as_strategy(generation_mode=mode, path_parameters=real))
            @settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), database=None)
            def fuzz(case: Any) -> None:
                _check(case, service, calls)

            try:
                fuzz()
            except Unsatisfiable:  # an operation with no inputs has no invalid request to make
                assert mode is GenerationMode.NEGATIVE
    assert len(calls) >= 300, len(calls)
    assert {role for _, role, _ in calls} == set(ROLES)
    assert {label for label, _, _ in calls} == {r.ok().label for r in api.get_all_operations()}
    admin_ok = {label for label, role, code in calls if role == "admin" and code < 300}
    assert {"POST /v1/tables/{table}/commit", "POST /v1/tables/{table}/maintenance/{kind}"} <= admin_ok, admin_ok
