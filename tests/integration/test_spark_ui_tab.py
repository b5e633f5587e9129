"""Every commit in the Spark UI's "Lakegate" tab, a zero-copy one included, while the service runs,
and in a History Server started on its event log after it stopped.

The real service (gunicorn, Spark with the plugin from delta-log-store/) commits a Parquet file
added where it lies (no Spark job) and a JSON-lines file rewritten by Spark (jobs); the tab is read
over HTTP from the service's Spark UI, then from ``org.apache.spark.deploy.history.HistoryServer``.
"""

from __future__ import annotations

import json
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import requests

from lakegate_stack.datafiles import manifest_entry, write_parquet
from lakegate_stack.history import HistoryServer
from lakegate_stack.services import READ_TOKEN, ServiceProcess
from tests.service_helpers import manifest


class CommitRows(HTMLParser):
    """The ``data-`` attributes of each row of the tab's commits table."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, str]] = []
        self._in_commits = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag == "table":
            self._in_commits = found.get("id") == "lakegate-commits"
        elif tag == "tr" and self._in_commits and "data-version" in found:
            self.rows.append({k[5:]: v for k, v in found.items() if k.startswith("data-")})


Row = tuple[str, int, int, int, int, int, str, Any]


def commit_rows(html: str) -> list[Row]:
    parser = CommitRows()
    parser.feed(html)
    return [
        (
            r["table"],
            int(r["version"]),
            int(r["files"]),
            int(r["in-place"]),
            int(r["rewritten"]),
            int(r["records"]),
            r["jobs"],
            json.loads(r["offsets"]),
        )
        for r in parser.rows
    ]


def expected(*records: dict[str, Any]) -> list[Row]:
    """The tab's rows for these commit records, newest first."""
    return [
        (
            r["table"],
            r["version"],
            r["files"],
            r["in_place"],
            r["rewritten"],
            r["records"],
            ",".join(map(str, r["spark_jobs"])),
            r["offsets"],
        )
        for r in sorted(records, key=lambda r: r["version"], reverse=True)
    ]


def wait_for(url: str, timeout: float = 120) -> str:
    """The page at ``url`` once it answers 200 (the History Server loads an application on demand)."""
    deadline, last = time.monotonic() + timeout, ""
    while time.monotonic() < deadline:
        response = requests.get(url, timeout=30)
        if response.status_code == 200 and "lakegate-commits" in response.text:
            return response.text
        last = f"{response.status_code}: {response.text[:300]}"
        time.sleep(1)
    raise AssertionError(f"{url} never showed the Lakegate tab: {last}")


def test_every_commit_is_in_the_lakegate_tab_live_and_in_the_history_server(tmp_path: Path) -> None:
    events = tmp_path / "events"
    events.mkdir()
    lake = tmp_path / "lake"
    root = lake / "orders"
    tables = [{"name": "orders", "path": str(root), "topics": ["orders"], "commit": {"interval_seconds": 3600}}]
    conf = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": events.as_uri()}
    service = ServiceProcess(tmp_path, tables, [lake.as_uri() + "/"], spark_conf=conf).start()
    try:
        first = write_parquet(root / "landing" / "orders-0-0", "orders", 0, 0, 10)
        assert service.call("POST", "/v1/manifests", json=manifest("m-first", [first])).status_code == 202
        created = service.commit_now("orders")  # makes the table: Spark jobs read the file's schema
        in_place = write_parquet(root / "landing" / "orders-0-10", "orders", 0, 10, 10)
        assert service.call("POST", "/v1/manifests", json=manifest("m-parquet", [in_place])).status_code == 202
        zero_copy = service.commit_now("orders")
        lines = lake / "landing" / "orders-1-0.jsonl"
        lines.parent.mkdir(parents=True, exist_ok=True)
        lines.write_text("".join(json.dumps({"id": f"j{o}", "offset": o, "amount": o / 4}) + "\n" for o in range(5)))
        rewrite = manifest_entry(lines, "orders", 1, 0, 5, "jsonl")
        assert service.call("POST", "/v1/manifests", json=manifest("m-jsonl", [rewrite])).status_code == 202
        rewritten = service.commit_now("orders")
        assert created["committed"] and zero_copy["committed"] and rewritten["committed"], (zero_copy, rewritten)
        assert zero_copy["spark_jobs"] == [] and rewritten["spark_jobs"], (zero_copy, rewritten)
        assert [(r["in_place"], r["rewritten"]) for r in (zero_copy, rewritten)] == [(1, 0), (0, 1)]

        live = wait_for(f"http://127.0.0.1:{service.ui_port}/lakegate/")
        assert commit_rows(live) == expected(created, zero_copy, rewritten)
        assert "none (zero-copy: the log alone)" in live
        for job in rewritten["spark_jobs"]:
            assert f"/jobs/job/?id={job}" in live
        page = service.call("GET", "/status/panel", READ_TOKEN)
        assert page.status_code == 200 and "/lakegate/" in page.text, page.text[:500]
    finally:
        service.stop()

    history = HistoryServer(tmp_path / "history", events).start()
    try:
        deadline = time.monotonic() + 120
        while not (apps := history.applications()):
            assert time.monotonic() < deadline, "the History Server lists no application"
            time.sleep(1)
        [app] = apps
        replayed = wait_for(f"{history.url}/history/{app['id']}/lakegate/")
        assert commit_rows(replayed) == expected(created, zero_copy, rewritten)
    finally:
        history.stop()
