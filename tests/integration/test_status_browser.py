"""The status page in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``, driven by Selenium) against ``lakegate-service`` under gunicorn with real
Spark and Delta commits.

It checks what an operator relies on: unauthenticated access is refused and the login form
works; every table is shown with the numbers ``GET /v1/tables`` gives; a commit's Spark job link
opens that job in the Spark UI; the page follows a new commit without being reloaded.

``LAKEGATE_SCREENSHOT=<path>`` saves the signed-in page there too (how ``docs/img/status-page.png``
is made).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from tests.service_helpers import READ_TOKEN, ServiceProcess, manifest, write_parquet

TABLES = ("orders", "payments")
WAIT_SECONDS = 90  # bounded waits on conditions; the page refreshes every 5 s


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        pytest.fail("needs Debian's chromium and chromium-driver (scripts/test installs them)")
    os.environ["SE_OFFLINE"] = "true"  # never let Selenium Manager look for drivers online
    options = Options()
    options.binary_location = chromium
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1400",
    ):
        options.add_argument(arg)
    session = webdriver.Chrome(service=Service(driver), options=options)
    session.set_page_load_timeout(60)
    try:
        yield session
    finally:
        session.quit()


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[ServiceProcess, dict[str, Path]]]:
    roots = {name: tmp_path / "lake" / name for name in TABLES}
    tables = [
        {"name": name, "path": str(root), "topics": [name], "commit": {"interval_seconds": 3600}}
        for name, root in roots.items()
    ]
    svc = ServiceProcess(tmp_path, tables, [f"file://{tmp_path}/lake/"]).start()
    try:
        yield svc, roots
    finally:
        svc.stop()


def send(svc: ServiceProcess, root: Path, topic: str, starts: range, count: int, mid: str) -> None:
    files = [write_parquet(root / "data" / f"{topic}-{p}-{s}", topic, p, s, count) for p in (0, 1) for s in starts]
    r = svc.call("POST", "/v1/manifests", json=manifest(mid, files))
    assert r.status_code == 202 and {f["status"] for f in r.json()["files"]} == {"accepted"}, r.text


# The page's panel is replaced every few seconds, so an element found now may be gone a moment
# later: every read of the page is one script, which runs between two refreshes, never across one.
SNAPSHOT = """
const tables = {};
for (const el of document.querySelectorAll("section.table")) {
  const partitions = {};
  for (const row of el.querySelectorAll("table.partitions tbody tr[data-topic]")) {
    partitions[row.dataset.topic + "-" + row.dataset.partition] = row.dataset.committed ?? null;
  }
  tables[el.dataset.table] = {version: el.dataset.version, pendingFiles: el.dataset.pendingFiles,
    pendingBytes: el.dataset.pendingBytes, lag: el.dataset.lag ?? null, partitions: partitions,
    text: el.innerText, plots: el.querySelectorAll("svg.plot").length};
}
const commits = [...document.querySelectorAll("tr.commit")].map(row => ({table: row.dataset.table,
  version: row.dataset.version, records: row.dataset.records,
  jobs: [...row.querySelectorAll("a.job")].map(a => [a.dataset.job, a.href])}));
return {tables: tables, commits: commits};
"""


def snapshot(browser: WebDriver) -> dict[str, Any]:
    return dict(browser.execute_script(SNAPSHOT))


def test_the_status_page_in_chromium(
    service: tuple[ServiceProcess, dict[str, Path]], browser: WebDriver, tmp_path: Path
) -> None:
    svc, roots = service
    send(svc, roots["orders"], "orders", range(0, 200, 100), 100, "o1")
    send(svc, roots["payments"], "payments", range(0, 50, 50), 50, "p1")
    for table in TABLES:
        svc.commit_now(table)
    send(svc, roots["payments"], "payments", range(50, 60, 10), 10, "p2")  # stays pending
    claim = {
        "sidecar": {"id": "sidecar-a", "worker": "127.0.0.1:8083"},
        "connector": "orders-sink",
        "tasks": [0],
        "partitions": [{"topic": "orders", "partition": 0}],
        "watermarks": [{"topic": "orders", "partition": 0, "connect_offset": 260, "read_at_ms": 1}],
    }
    assert svc.call("POST", "/v1/leases", json=claim).status_code == 200
    spark_ui = svc.spark_ui()

    # refused without a login; the token goes in the form, never in a URL
    assert requests.get(f"{svc.url}/status/panel", timeout=10).status_code == 401
    browser.get(f"{svc.url}/")
    assert browser.current_url.endswith("/login")
    browser.find_element(By.ID, "token").send_keys("wrong-token-0000000000")
    browser.find_element(By.ID, "sign-in").click()
    error = WebDriverWait(browser, WAIT_SECONDS).until(lambda b: b.find_elements(By.ID, "login-error"))
    assert error[0].text == "unknown token"
    browser.find_element(By.ID, "token").send_keys(READ_TOKEN)
    browser.find_element(By.ID, "sign-in").click()
    WebDriverWait(browser, WAIT_SECONDS).until(lambda b: b.find_elements(By.CSS_SELECTOR, "section.table"))
    assert READ_TOKEN not in browser.current_url

    # every table, with the numbers the API gives
    api = {t["table"]: t for t in svc.call("GET", "/v1/tables", READ_TOKEN).json()["tables"]}
    assert sorted(api) == sorted(TABLES)
    page = snapshot(browser)
    assert sorted(page["tables"]) == sorted(TABLES)
    for name, summary in api.items():
        shown = page["tables"][name]
        assert shown["version"] == str(summary["version"]) == "0"
        assert shown["pendingFiles"] == str(summary["pending_files"])
        assert shown["pendingBytes"] == str(summary["pending_bytes"])
        expected = {f"{topic}-{p}": str(n) for topic, parts in summary["offsets"].items() for p, n in parts.items()}
        assert {k: v for k, v in shown["partitions"].items() if v is not None} == expected
        assert shown["plots"] == 1
    assert api["payments"]["pending_files"] == 2
    assert page["tables"]["orders"]["lag"] == "60"  # Connect at 260, committed 200
    assert "sidecar-a, 127.0.0.1:8083" in page["tables"]["orders"]["text"]

    # the commit's Spark job link opens that job in the Spark UI
    (row,) = [c for c in page["commits"] if (c["table"], c["version"]) == ("orders", "0")]
    assert row["records"] == "400" and row["jobs"]
    job, href = row["jobs"][0]
    assert href == f"{spark_ui}/jobs/job/?id={job}"
    commit_id = svc.call("GET", "/v1/commits?table=orders", READ_TOKEN).json()["commits"][0]["commit_id"]
    app_id = requests.get(f"{spark_ui}/api/v1/applications", timeout=10).json()[0]["id"]
    spark_job = requests.get(f"{spark_ui}/api/v1/applications/{app_id}/jobs/{job}", timeout=10).json()
    assert spark_job["jobGroup"] in (f"lakegate-orders-v0-{commit_id}", f"lakegate-orders-{commit_id}")
    browser.save_screenshot(str(tmp_path / "status.png"))
    if os.environ.get("LAKEGATE_SCREENSHOT"):
        browser.save_screenshot(os.environ["LAKEGATE_SCREENSHOT"])
    browser.get(href)
    WebDriverWait(browser, WAIT_SECONDS).until(lambda b: f"Details for Job {job}" in b.page_source)
    assert "lakegate commit orders v0" in browser.page_source

    # a new commit shows up without a reload
    browser.get(f"{svc.url}/")
    WebDriverWait(browser, WAIT_SECONDS).until(lambda b: b.find_elements(By.CSS_SELECTOR, "section.table"))
    browser.execute_script("window.lakegateMarker = 'same page';")
    send(svc, roots["orders"], "orders", range(200, 300, 100), 100, "o2")
    assert svc.commit_now("orders")["version"] == 1
    WebDriverWait(browser, WAIT_SECONDS).until(lambda b: snapshot(b)["tables"]["orders"]["version"] == "1")
    assert browser.execute_script("return window.lakegateMarker;") == "same page"
    assert ("orders", "1") in {(c["table"], c["version"]) for c in snapshot(browser)["commits"]}

    # signing out ends it
    browser.find_element(By.ID, "sign-out").click()
    WebDriverWait(browser, WAIT_SECONDS).until(lambda b: b.current_url.endswith("/login"))
    browser.get(f"{svc.url}/")
    assert browser.current_url.endswith("/login")
