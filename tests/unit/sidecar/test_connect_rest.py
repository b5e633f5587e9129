"""What the sidecar reads from Connect's REST API each round (``sidecar.connect.ConnectRest``),
against a session that answers as a Connect worker does (the real one: tests/e2e)."""

from __future__ import annotations

from typing import Any

import pytest

from lakegate_core.protocol import FileFormat
from sidecar.connect import ConnectRest
from sidecar.errors import SourceError


class Answer:
    def __init__(self, status_code: int, body: Any) -> None:
        self.status_code, self.body, self.text = status_code, body, str(body)

    def json(self) -> Any:
        return self.body


class FakeSession:
    """Answers ``GET /connectors?expand=status&expand=info`` with ``expanded``; counts requests."""

    def __init__(self, expanded: dict[str, Any], status_code: int = 200) -> None:
        self.expanded, self.status_code = expanded, status_code
        self.asked: list[str] = []

    def get(self, url: str, timeout: float) -> Answer:
        self.asked.append(url)
        return Answer(self.status_code, self.expanded)


def entry(name: str, tasks: list[tuple[int, str, str]], config: dict[str, str]) -> dict[str, Any]:
    """A connector as Connect's expanded listing gives it: ``tasks`` as (id, state, worker)."""
    return {
        "status": {
            "name": name,
            "connector": {"state": "RUNNING", "worker_id": "w1:8083"},
            "tasks": [{"id": i, "state": state, "worker_id": worker} for i, state, worker in tasks],
            "type": "sink",
        },
        "info": {
            "name": name,
            "config": config,
            "tasks": [{"connector": name, "task": i} for i, _, _ in tasks],
            "type": "sink",
        },
    }


AIVEN = {
    "connector.class": "io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector",
    "format.output.type": "parquet",
}
EXPANDED = {
    "orders": entry("orders", [(0, "RUNNING", "w1:8083"), (1, "RUNNING", "w2:8083"), (2, "FAILED", "w1:8083")],
                    {**AIVEN, "topics": "orders, refunds"}),
    "clicks": entry("clicks", [(0, "RUNNING", "w1:8083")], {**AIVEN, "topics": "clicks", "format.output.type": "avro"}),
    "other": entry("other", [(0, "RUNNING", "w1:8083")], {**AIVEN, "topics": "x"}),
}  # fmt: skip


def test_every_followed_connector_from_one_request() -> None:
    session = FakeSession(EXPANDED)
    views = ConnectRest("http://connect:8083/", session).views(("orders", "clicks", "gone"), None, "w1:8083")  # type: ignore[arg-type]
    assert session.asked == ["http://connect:8083/connectors?expand=status&expand=info"]
    assert [v.name for v in views] == ["orders", "clicks", "gone"]
    orders, clicks, gone = views
    assert orders.state == "RUNNING" and orders.my_tasks == frozenset({0}) and orders.failed_tasks == (2,)
    assert orders.topics == ("orders", "refunds") and orders.output_format is FileFormat.PARQUET
    assert clicks.my_tasks == frozenset({0}) and clicks.output_format is FileFormat.AVRO
    assert gone.state == "MISSING" and gone.my_tasks == frozenset() and gone.topics == ()


def test_a_regex_follows_the_connectors_whose_names_match() -> None:
    session = FakeSession(EXPANDED)
    views = ConnectRest("http://connect:8083", session).views((), "o.*", "w2:8083")  # type: ignore[arg-type]
    assert [v.name for v in views] == ["orders", "other"] and len(session.asked) == 1
    assert views[0].my_tasks == frozenset({1}) and views[1].my_tasks == frozenset()


def test_a_connector_listed_without_its_status_is_missing() -> None:
    """Connect leaves out of the expanded answer, or answers without a part, a connector removed
    while it answered: the round treats it as gone rather than failing."""
    half = {"orders": {"info": EXPANDED["orders"]["info"]}}
    (view,) = ConnectRest("http://c", FakeSession(half)).views(("orders",), None, "w1:8083")  # type: ignore[arg-type]
    assert view.state == "MISSING"


def test_an_error_answer_is_a_source_error() -> None:
    with pytest.raises(SourceError, match="HTTP 500"):
        ConnectRest("http://c", FakeSession({}, status_code=500)).views(("orders",), None, "w1")  # type: ignore[arg-type]
