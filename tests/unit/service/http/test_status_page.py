"""The status page over a fake committer (no JVM): login and roles, what it shows, escaping,
and its parts (lag, the freshness plot). The browser test is tests/integration/test_status_browser.py."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from commit_service.config import ServiceConfig
from commit_service.domain.plan import CommitPlan
from commit_service.http.app import create_app
from commit_service.http.runtime import runtime
from commit_service.observe.freshness_plot import freshness_svg
from commit_service.observe.lag import LagHistory, LagSample, LagSampler, LagSource, LogEnds, partition_lags
from lakegate_core.configfile import build
from lakegate_core.status import CommitRecord, TableSummary
from lakegate_core.types import PartitionOffsets, TopicPartition
from tests.unit.fakes import ADMIN, CONFIG, SIDE, FakeCommitter, h, manifest

READ = "read-token-0123456789ab"
UI = "http://spark-ui.example:4040"


class JobsCommitter(FakeCommitter):
    """A fake committer whose commits ran Spark jobs 7 and 8."""

    def commit(self, plan: CommitPlan) -> CommitRecord:
        return replace(super().commit(plan), spark_jobs=(7, 8))


def make_app(committer: FakeCommitter, **overrides: Any) -> Flask:
    raw: dict[str, Any] = {
        **CONFIG,
        "auth": {"enabled": True, "tokens": [*CONFIG["auth"]["tokens"], {"token": READ, "role": "read"}]},
        "spark": {"ui_url": UI},
        **overrides,
    }
    app = create_app(build(ServiceConfig, raw), committer_factory=lambda t: committer, start=False)
    runtime(app).coordinator.load()
    return app


@pytest.fixture
def app() -> Flask:
    return make_app(JobsCommitter())


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


def login(client: FlaskClient, token: str = READ) -> None:
    r = client.post("/login", data={"token": token})
    assert r.status_code == 303 and r.headers["Location"] == "/", r.data


def test_the_page_needs_a_login_and_the_token_never_reaches_a_url_or_cookie(client: FlaskClient) -> None:
    r = client.get("/")
    assert r.status_code == 302 and r.headers["Location"] == "/login"
    assert client.get("/status/panel").status_code == 401
    assert b'method="post"' in client.get("/login").data  # the token goes in a form body
    bad = client.post("/login", data={"token": "not-a-token-00000000"})
    assert bad.status_code == 401 and b"unknown token" in bad.data
    r = client.post("/login", data={"token": READ})
    cookie = r.headers["Set-Cookie"]
    assert r.status_code == 303 and READ not in cookie and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert READ not in r.headers["Location"]
    page = client.get("/")
    assert page.status_code == 200 and b'data-table="orders"' in page.data
    assert "nonce-" in page.headers["Content-Security-Policy"] and page.headers["Cache-Control"] == "no-store"
    assert client.post("/logout").status_code == 303
    assert client.get("/").status_code == 302


def test_a_bearer_token_reads_the_page_too_and_a_wrong_one_does_not(client: FlaskClient) -> None:
    assert client.get("/status/panel", headers=h(READ)).status_code == 200
    assert client.get("/status/panel", headers=h("wrong-token-000000000")).status_code == 401


def test_a_login_cookie_of_another_process_is_refused(client: FlaskClient) -> None:
    login(client)
    other = make_app(JobsCommitter()).test_client()
    cookie = client.get_cookie("lakegate_session")
    assert cookie is not None
    other.set_cookie("lakegate_session", cookie.value)
    assert other.get("/").status_code == 302  # another secret: a restart ends every login


def test_an_api_call_without_a_cookie_never_builds_the_cookie_signer(
    app: Flask, client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The signer costs every request that opens a session; bearer-token calls carry no cookie
    and get Flask's empty session without it, while a login cookie is still checked with it."""
    built: list[str] = []
    interface = app.session_interface
    real = interface.get_signing_serializer  # type: ignore[attr-defined]
    monkeypatch.setattr(interface, "get_signing_serializer", lambda a: built.append("signer") or real(a))
    assert client.post("/v1/manifests", json=manifest("m-1", 0, 9), headers=h(SIDE)).status_code == 202
    assert client.get("/v1/tables", headers=h(READ)).status_code == 200
    assert built == []
    login(client)  # writes the cookie: signs it
    assert client.get("/").status_code == 200  # reads it back: checks the signature
    assert len(built) >= 2


def test_the_read_role_reads_but_cannot_send_or_commit(client: FlaskClient) -> None:
    assert client.get("/v1/tables", headers=h(READ)).status_code == 200
    r = client.post("/v1/manifests", json=manifest(), headers=h(READ))
    assert r.status_code == 403 and "sidecar token" in r.json["error"]["message"]  # type: ignore[index]
    claim = {"sidecar": {"id": "sc", "worker": "w:1"}, "connector": "c", "tasks": [0], "partitions": []}
    assert client.post("/v1/leases", json=claim, headers=h(READ)).status_code == 403
    assert client.post("/v1/tables/orders/commit", headers=h(READ)).status_code == 403
    assert client.post("/v1/tables/orders/commit", headers=h(SIDE)).status_code == 403


def test_the_page_shows_tables_commits_with_spark_job_links_leases_lag_and_sidecars(client: FlaskClient) -> None:
    assert client.post("/v1/manifests", json=manifest("m1", 0, 9), headers=h()).status_code == 202
    assert client.post("/v1/tables/orders/commit", headers=h(ADMIN)).json["committed"] is True  # type: ignore[index]
    assert client.post("/v1/manifests", json=manifest("m2", 10, 14), headers=h()).status_code == 202
    claim = {
        "sidecar": {"id": "sc-1", "worker": "w:8083"},
        "connector": "orders-sink",
        "tasks": [0],
        "partitions": [{"topic": "orders", "partition": 0}],
        "watermarks": [{"topic": "orders", "partition": 0, "connect_offset": 40, "read_at_ms": 1}],
    }
    assert client.post("/v1/leases", json=claim, headers=h()).status_code == 200
    html = client.get("/status/panel", headers=h(READ)).data.decode()

    table = re.search(r'<section class="card table"[^>]*>', html)
    assert table is not None
    tag = table.group(0)
    assert 'data-version="0"' in tag and 'data-pending-files="1"' in tag and 'data-lag="30"' in tag  # 40 - 10
    row = re.search(r'<tr data-topic="orders" data-partition="0"[^>]*>(.*?)</tr>', html, re.S)
    assert row is not None and 'data-committed="10"' in row.group(0) and "sc-1, w:8083, 1" in row.group(1)
    commit = re.search(r'<tr class="commit"[^>]*>(.*?)</tr>', html, re.S)
    assert commit is not None and 'data-version="0"' in commit.group(0) and 'data-records="10"' in commit.group(0)
    assert f'href="{UI}/jobs/job/?id=7"' in commit.group(1) and f'href="{UI}/jobs/job/?id=8"' in commit.group(1)
    assert re.search(r'<tr data-sidecar="sc-1">.*?<td class="num">1</td>', html, re.S)
    assert "<svg" in html and "no quarantined" not in html


def test_a_partitioned_table_shows_its_partitions_on_the_page_and_in_the_api() -> None:
    table = {**CONFIG["tables"][0], "partition_by": ["day(_kafka_timestamp)", "region"]}
    client = make_app(JobsCommitter(), tables=[table]).test_client()
    assert client.get("/v1/tables/orders", headers=h(READ)).json["partition_by"] == list(table["partition_by"])  # type: ignore[index]
    html = client.get("/status/panel", headers=h(READ)).data.decode()
    shown = re.search(r'<div class="partitioned"><span>partitioned by</span>(.*?)</div>', html)
    assert shown is not None and shown.group(1) == "day(_kafka_timestamp), region"
    plain = make_app(JobsCommitter()).test_client().get("/status/panel", headers=h(READ)).data.decode()
    assert "partitioned by" not in plain


def test_names_sent_by_clients_are_escaped(client: FlaskClient) -> None:
    evil = manifest("m1")
    evil["sidecar"] = {"id": "<script>alert(1)</script>", "worker": "<img src=x onerror=alert(1)>:1"}
    assert client.post("/v1/manifests", json=evil, headers=h()).status_code == 202
    html = client.get("/status/panel", headers=h(READ)).data.decode()
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_before_the_tables_are_loaded_the_page_says_starting() -> None:
    raw = {**CONFIG, "auth": {"enabled": False}}
    app = create_app(build(ServiceConfig, raw), committer_factory=lambda t: FakeCommitter(), start=False)
    page = app.test_client().get("/")
    assert page.status_code == 200 and b'id="starting"' in page.data


def test_spark_ui_url_must_be_http() -> None:
    from commit_service.errors import ConfigError

    with pytest.raises(ConfigError, match="spark.ui_url"):
        make_app(FakeCommitter(), spark={"ui_url": "javascript:alert(1)"})


# -- lag -----------------------------------------------------------------------------------

TP0, TP1, TP2 = (TopicPartition("orders", p) for p in range(3))


def summary(**kw: Any) -> TableSummary:
    base: dict[str, Any] = {
        "table": "orders",
        "path": "s3a://lake/orders",
        "version": 3,
        "offsets": PartitionOffsets({TP0: 100, TP1: 50}),
        "pending_files": 0,
        "pending_bytes": 0,
        "pending_offsets": PartitionOffsets(),
        "last_error": None,
    }
    return TableSummary(**{**base, **kw})


def test_lag_prefers_kafka_s_log_end_and_falls_back_to_connect() -> None:
    s = summary(connect_offsets=PartitionOffsets({TP0: 130, TP1: 40, TP2: 5}))
    lags = partition_lags(s, None)
    assert set(lags) == {TP0, TP1, TP2} and {lag.source for lag in lags.values()} == {LagSource.CONNECT}
    assert lags[TP0].offsets == 30
    assert lags[TP1].offsets == 0  # Connect's offset read before our commit: never negative
    assert lags[TP2].offsets == 5  # nothing committed yet: all of it
    with_kafka = partition_lags(s, PartitionOffsets({TP0: 180, TP2: 3}))
    assert (with_kafka[TP0].offsets, with_kafka[TP0].source) == (80, LagSource.KAFKA)
    assert with_kafka[TP1].source is LagSource.CONNECT
    assert with_kafka[TP2].offsets == 5  # a log end read before Connect's offset: never below Connect's


def test_a_tables_lag_counts_its_own_topics_and_begins_at_its_start() -> None:
    """The log ends read are every table's partitions': another table's topic adds nothing; a
    partition whose ledger begins at 500 and has no commit yet lags from 500, not from 0."""
    s = summary(
        connect_offsets=PartitionOffsets({TP0: 130, TP2: 700}),
        starts={str(TP2): {"offset": 500, "reason": "first_file", "why": "..."}},
    )
    other = TopicPartition("someone-elses", 0)
    lags = partition_lags(s, PartitionOffsets({TP0: 180, TP2: 900, other: 71_000}))
    assert other not in lags
    assert lags[TP2].offsets == 400


class FakeConsumer:
    def __init__(self, ends: dict[Any, int] | Exception) -> None:
        self.ends, self.closed = ends, False

    def end_offsets(self, partitions: list[Any], timeout_ms: int) -> dict[Any, int]:
        if isinstance(self.ends, Exception):
            raise self.ends
        return {p: self.ends[(p.topic, p.partition)] for p in partitions}

    def close(self) -> None:
        self.closed = True


def test_log_ends_read_and_a_failed_read_drops_the_consumer() -> None:
    made: list[FakeConsumer] = []
    answers: list[dict[Any, int] | Exception] = [{("orders", 0): 7, ("orders", 1): 9}, OSError("no broker"), {}]

    def factory() -> FakeConsumer:
        made.append(FakeConsumer(answers[len(made)]))
        return made[-1]

    ends = LogEnds(factory, clock=lambda: 1.0)
    ok = ends.read([TP1, TP0])
    assert ok.error is None and dict(ok.offsets) == {TP0: 7, TP1: 9} and ok.read_at_ms == 1000
    ends._client = None  # the next read makes a consumer that fails
    failed = ends.read([TP0])
    assert failed.error is not None and "no broker" in failed.error and made[1].closed and ends._client is None
    assert ends.read([]).error is None and len(made) == 2  # nothing to ask: Kafka is not called


def test_the_sampler_records_each_table_s_lag_and_the_history_keeps_an_hour() -> None:
    history = LagHistory(window_ms=60_000, every_seconds=10)
    now = [1000.0]
    s = summary(connect_offsets=PartitionOffsets({TP0: 110}), pending_files=2)
    sampler = LagSampler(lambda: [s], None, history, clock=lambda: now[0], every=2, record_every=10)
    sampler.sample()
    now[0] += 61
    sampler.sample()
    now[0] += 5
    sampler.sample()  # within record_every of the last point: not recorded
    assert history.samples("orders", int(now[0] * 1000)) == [LagSample(1_061_000, 10, 2)]


# -- the plot ------------------------------------------------------------------------------


def test_the_plot_draws_lag_as_a_line_broken_where_unknown_and_ticks_commits() -> None:
    now, hour = 10_000_000, 3_600_000
    samples = [
        LagSample(now - hour - 1, 999, 0),  # older than the window: left out
        LagSample(now - 3000, 10, 0),
        LagSample(now - 2000, 20, 0),
        LagSample(now - 1500, None, 0),
        LagSample(now - 1000, 0, 0),
    ]
    svg = str(freshness_svg(samples, [now - 2500, now - hour - 5], now, hour, "orders <lag>"))
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert svg.count("<polyline") == 1 and svg.count("<circle") == 1  # two points, a gap, one point
    assert svg.count('class="commit"') == 1  # the commit before the window is not drawn
    assert "orders &lt;lag&gt;" in svg and ">20<" in svg and "no lag measured" not in svg
    assert "999" not in svg


def test_the_plot_says_so_when_nothing_was_measured() -> None:
    svg = str(freshness_svg([LagSample(5, None, 0)], [], 10, 100, "t"))
    assert "no lag measured yet" in svg and "<polyline" not in svg


def test_the_doctors_last_checks_are_metrics() -> None:
    from commit_service.observe.metrics import ServiceMetrics

    metrics = ServiceMetrics(list)
    metrics.watch_connectors(lambda: [("good", (), ()), ("failed", (), ("connector_state",)), ("bad", ("format",), ())])
    text = metrics.render().decode()
    assert 'lakegate_connector_stopped{connector="failed"} 1.0' in text
    assert 'lakegate_connector_stopped{connector="good"} 0.0' in text
    assert 'lakegate_connector_blocked{connector="bad"} 1.0' in text
