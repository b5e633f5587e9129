"""The benchmarks' own parsing and reporting (lakegate_bench): figures read from wrk's output, the
report's tables, the pipeline part's CPU readings, the command dispatcher."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from lakegate_bench import http_load, process_cpu, report, s3_requests
from lakegate_stack.procfs import process_tree

WRK = """Running 20s test @ http://127.0.0.1:40000
  2 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    27.26ms   62.17ms 545.53ms   92.90%
  Latency Distribution
     50%  850.00us
     75%   16.84ms
     90%   54.66ms
     99%    1.20s
  18546 requests in 20.09s, 5.00MB read
  Non-2xx or 3xx responses: 7
Requests/sec:    923.15
Transfer/sec:    204.12KB
"""


def test_wrk_figures_in_milliseconds() -> None:
    got = http_load.wrk_figures(WRK)
    assert got["p50_ms"] == 0.85 and got["p90_ms"] == 54.66 and got["p99_ms"] == 1200.0
    assert got["manifests_per_s"] == 923.1 and got["requests"] == 18546 and got["non_2xx"] == 7


def test_wrk_output_without_figures_is_an_error() -> None:
    with pytest.raises(AssertionError):
        http_load.wrk_figures("unable to connect to 127.0.0.1:40000 Connection refused\n")


def test_report_renders_what_was_measured(tmp_path: Path) -> None:
    (tmp_path / "checkpoints.json").write_text(
        json.dumps(
            {
                "commits": 200,
                "files_per_commit": 10,
                "inline": {"p50_s": 0.3, "p99_s": 9.5, "max_s": 12.0},
                "background": {"p50_s": 0.031, "p99_s": 0.062, "max_s": 0.09},
            }
        )
    )
    text = report.report(tmp_path)
    assert "| checkpoints inline | 0.300 s | 9.500 s | 12.000 s | 31.67 |" in text
    assert "| checkpoints background | 0.031 s | 0.062 s | 0.090 s | 2.00 |" in text
    assert "checkpoints none" not in text  # a run from before the control was added
    assert "Spark rewrite" not in text  # no commit.json: no commit table


def test_cpu_is_read_for_a_process_and_its_children() -> None:
    """The pipeline part charges a system with the CPU of its processes' whole trees (the service's
    JVM is a child of its Python process); a tree without a JVM has no JIT compiler thread."""
    import os
    import subprocess

    burn = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\ntime.sleep(120)"
    parent = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', {burn!r}])"]
    )
    try:
        tree: list[int] = []
        for _ in range(600):  # until the grandchild has started and burnt its CPU (bounded)
            tree = process_tree([parent.pid])
            if len(tree) == 2 and process_cpu.cpu_seconds([tree[1]]) >= 0.3:
                break
            subprocess.run(["sleep", "0.05"], check=True)
        assert tree[0] == parent.pid and len(tree) == 2
        assert process_cpu.cpu_seconds([parent.pid]) >= process_cpu.cpu_seconds([tree[1]]) >= 0.3
        assert process_cpu.jit_threads([parent.pid]) == {}
    finally:
        for pid in process_tree([parent.pid])[::-1]:
            os.kill(pid, 9)
        parent.wait()


def test_peak_memory_counts_a_child_and_walks_proc_once_a_tree_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    """PeakRss counts a child's memory (Spark's JVM is the service's child) and looks the tree up
    again at most once per ``tree_every``: walking all of /proc 20 times a second took most of a
    core from the system it measures."""
    import os
    import subprocess

    from lakegate_bench import service_commit

    walks: list[int] = []

    def counted(pids: list[int]) -> list[int]:
        walks.append(1)
        return process_tree(pids)

    monkeypatch.setattr(service_commit, "process_tree", counted)
    hold = "import time\nb = bytearray(200 * 2**20)\nb[::4096] = b'x' * len(b[::4096])\nprint('ready', flush=True)\ntime.sleep(120)"
    parent = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', {hold!r}])"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "ready"
        with service_commit.PeakRss(parent.pid, every=0.01, tree_every=60) as peak:
            subprocess.run(["sleep", "0.5"], check=True)
        assert peak.peak_mib >= 200, "the child's 200 MiB are counted"
        assert len(walks) == 1, "one walk of /proc in the tree interval, however many samples"
    finally:
        for pid in process_tree([parent.pid])[::-1]:
            os.kill(pid, 9)
        parent.wait()


def test_the_command_runs_a_part_by_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from lakegate_bench import __main__ as command
    from lakegate_bench import run

    seen: list[list[str]] = []
    monkeypatch.setattr(run, "main", lambda argv: seen.append(argv) or 0)
    assert command.main(["jsonl", "--jsonl-files", "10"]) == 0
    assert seen == [["--parts", "jsonl", "--jsonl-files", "10"]]
    assert command.main(["no-such-part"]) == 2
    assert command.main(["--help"]) == 0


S3_LOG = """127.0.0.1 - - [26/Nov/2026 18:36:58] "PUT /peer10/warehouse/bench/peer10/data/00001.parquet HTTP/1.1" 200 -
127.0.0.1 - - [26/Nov/2026 18:36:58] "\x1b[35m\x1b[1mGET /peer10?list-type=2&prefix=warehouse/ HTTP/1.1\x1b[0m" 200 -
127.0.0.1 - - [26/Nov/2026 18:36:58] "PUT /peer100/warehouse/x HTTP/1.1" 200 -
127.0.0.1 - - [26/Nov/2026 18:36:59] "POST /peer10/warehouse/big?uploads HTTP/1.1" 200 -
127.0.0.1 - - [26/Nov/2026 18:36:59] "HEAD /lg10/warehouse/y HTTP/1.1" 200 -
 * Running on http://127.0.0.1:40000
"""


def test_s3_requests_are_counted_for_one_bucket_after_a_mark(tmp_path: Path) -> None:
    log = tmp_path / "s3.log"
    log.write_text('127.0.0.1 - - [26/Nov/2026 18:36:57] "PUT /peer10/before HTTP/1.1" 200 -\n')
    requests = s3_requests.S3RequestLog(log, "peer10")
    mark = requests.mark()
    with log.open("a") as out:
        out.write(S3_LOG)
    assert requests.count_since(mark) == {"PUT": 1, "GET": 1, "POST": 1}  # not peer100's, nor lg10's
    assert requests.count_since(0) == {"PUT": 2, "GET": 1, "POST": 1}


def test_the_peer_report_gives_both_systems_files_and_s3_writes(tmp_path: Path) -> None:
    row = {"interval_s": 10, "freshness_p50_s": 6.1, "freshness_p99_s": 11.0, "cpu_s_per_million": 80.0,
           "files_per_snapshot": 3.0, "mean_file_kb": 210.5, "s3_writes_per_million": 1234}  # fmt: skip
    data = {"rate": 5000, "seconds": 120, "results": [{"system": "lakegate", **row},
                                                      {"system": "iceberg-kafka-connect", **row}]}  # fmt: skip
    (tmp_path / "iceberg-peer.json").write_text(json.dumps(data))
    text = report.report(tmp_path)
    assert "| iceberg-kafka-connect | 10 s | 6.1 s | 11.0 s | 80.0 | 3.0 | 210.5 KB | 1,234 |" in text
    assert "| lakegate | 10 s |" in text


def test_the_long_run_counts_live_files_by_size_and_reports_both_tables(tmp_path: Path) -> None:
    from lakegate_bench.iceberg_peer_long import size_figures

    sizes = [40 << 10, 50 << 10, 300 << 10, 5 << 20, 100 << 20]
    got = size_figures(sizes)
    assert got["data_files"] == 5 and got["median_kib"] == 300.0 and got["largest_mib"] == 100.0
    assert got["by_size"] == {"< 64 KiB": 2, "64 KiB-1 MiB": 1, "1-16 MiB": 1, "16-64 MiB": 0, ">= 64 MiB": 1}
    assert size_figures([]) == {"data_files": 0}
    row = {"interval_s": 10, "full_scan_s": 0.5, "minute_range_s": 0.2, "cpu_s_per_million": 50.0,
           "cpu_s_per_million_without_catalog": 40.0, "freshness_p50_s": 6.0, "freshness_p99_s": 11.0,
           "s3_writes_per_million": 1200, "table": {**got, "minute_range_files_planned": 3}}  # fmt: skip
    data = {"rate": 5000, "seconds": 1800, "interval_s": 10, "results": [{"system": "lakegate", **row}]}
    (tmp_path / "iceberg-peer-long.json").write_text(json.dumps(data))
    text = report.report(tmp_path)
    assert "| lakegate | 5 | 300.0 KiB | 0.5 s | 0.2 s (3) | 50.0 (40.0) | 6.0 / 11.0 s | 1,200 |" in text


class _Listing:
    """The two calls the pipeline's poller makes of an S3 client, over a folder as the bucket."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def get_paginator(self, _name: str) -> _Listing:
        return self

    def paginate(self, Bucket: str, Prefix: str) -> list[dict[str, list[dict[str, object]]]]:  # noqa: N803
        from datetime import datetime, timezone

        keys = sorted(p for p in (self.root / Bucket).rglob("*") if p.is_file())
        named = [str(p.relative_to(self.root / Bucket)) for p in keys]
        stamp = datetime(2026, 1, 1, tzinfo=timezone.utc)
        return [{"Contents": [{"Key": k, "LastModified": stamp} for k in named if k.startswith(Prefix)]}]

    def get_object(self, Bucket: str, Key: str) -> dict[str, object]:  # noqa: N803
        import io

        return {"Body": io.BytesIO((self.root / Bucket / Key).read_bytes())}


def test_the_pipeline_poller_counts_a_file_re_added_with_a_deletion_vector_once(tmp_path: Path) -> None:
    """An upsert round re-adds a file it marked rows of (the same path, with a deletion vector):
    its records were seen when it was first added and are not seen again."""
    import pyarrow as pa
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    from lakegate_bench.pipeline import Poller

    table = tmp_path / "lake" / "t"
    (table / "_delta_log").mkdir(parents=True)
    pq.write_table(pa.table({"produced_ms": [1, 2, 3]}), table / "part-0.parquet")
    pq.write_table(pa.table({"produced_ms": [4]}), table / "part-1.parquet")

    def commit(version: int, *paths: str) -> None:
        actions = [{"commitInfo": {"timestamp": 100 + version}}, *({"add": {"path": p}} for p in paths)]
        (table / "_delta_log" / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in actions))

    poller = Poller(
        s3=_Listing(tmp_path), fs=pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem()), prefix="t/"
    )
    commit(0, "part-0.parquet")
    poller.poll()
    commit(1, "part-0.parquet", "part-1.parquet")  # part-0 again, now with a deletion vector
    poller.poll()
    assert sorted(p for p, _ in poller.seen_ms) == [1, 2, 3, 4]
    assert len(poller.versions) == 2


def test_the_benchmarks_run_the_sidecar_at_its_default_poll_interval() -> None:
    """``--sidecar-poll-seconds`` defaults to the sidecar's own default (the benchmark's package
    may not import the sidecar's)."""
    from lakegate_bench.lakegate_knobs import SIDECAR_POLL_SECONDS
    from sidecar.config import SidecarConfig

    assert SIDECAR_POLL_SECONDS == SidecarConfig.poll_interval_seconds
