"""Benchmarks of the commit service's Delta side (real Spark + Delta), in selectable parts.

Parts (``--parts``, default all but ``upsert``):

- ``commit``: one commit of N Parquet files (1,000 rows x 10 columns each), N in ``--files``.
  The same files are committed three ways, each into its own table that already exists:
  Lakegate with the files' footers read ahead (what a commit finds after the files waited in the
  buffer: the service's own ``TableCoordinator`` path), Lakegate cold (nothing read ahead: a
  ``DeltaCommitter`` alone), and the rewrite a Spark job would do
  (``read.parquet(files).write.format("delta").mode("append")``).
- ``checkpoints``: ``--commits`` consecutive 10-file commits through the ``TableCoordinator``,
  once with Delta's checkpoints inside every 10th commit, once with no checkpoint at all (the
  control: how much the commit path varies by itself) and once with them in the background (the
  default): p50, p99, max and p99/p50 of the commit time.
- ``history``: commit time (p50/p99 of ``--window`` commits) once the table is at each version of
  ``--history`` (checkpoints in the background).
- ``jsonl``: one commit of N gzip JSON-lines files (``--rows`` lines each, N in ``--jsonl-files``),
  which the service rewrites as Parquet inside the commit (Spark parses them).
- ``intake``: ``scripts/bench_intake.py`` (the HTTP handler in-process, no JVM).
- ``pipeline``: end-to-end freshness and CPU-seconds per million records, Lakegate's whole
  pipeline (Connect sink, sidecar, service) beside a Spark Structured Streaming job on the same
  records, at each of ``--intervals``, after ``--warm-up-seconds`` at the rate that are not
  measured; each system's CPU and its JIT compilers' part of it (``scripts/bench_pipeline.py``).
- ``http``: the real service (gunicorn, Spark started and idle) under ``wrk``: one-file manifests
  from ``--clients`` concurrent connections for ``--seconds`` each; manifests/s, p50/p90/p99.
- ``upsert``: one upsert round of each of ``--upsert-keys`` changed keys into a table of
  ``--upsert-rows`` rows, keys clustered and random, with deletion vectors and copy-on-write,
  against Delta's own MERGE with deletion vectors on the same changes (``scripts/bench_upsert.py``).

Prints progress and tables, writes ``<part>.json`` and a PNG plot per part to ``--out-dir``
(default ``.lakegate/bench``). Run through ``scripts/bench``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from commit_service.config import SparkSettings, TableConfig
from commit_service.coordination.table_coordinator import TableCoordinator
from commit_service.delta.committer import DeltaCommitter
from commit_service.delta.session import create_session
from commit_service.domain.maintenance import MaintenancePolicy
from commit_service.domain.plan import CommitPolicy, PendingFile
from commit_service.domain.state import TableState
from commit_service.storage.prefetch import FactsCache, storage_facts
from commit_service.storage.reader import StorageReader
from lakegate_core.protocol import DataFile, FileFormat

TOPIC = "bench"
PARTITIONS = 3
COLUMNS = 10
PARTS = ("commit", "checkpoints", "history", "jsonl", "intake", "http", "pipeline", "upsert")
CHECKPOINT_MODES = ("inline", "none", "background")  # checkpoints: the modes, in the order they run
NO_CHECKPOINTS = 1_000_000_000  # checkpoints "none": a background checkpoint every this many commits
DEFAULT_PARTS = ("commit", "checkpoints", "history", "jsonl", "intake", "http", "pipeline")
WRK_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


class Landing:
    """Parquet files as a sink writes them (``<topic>-<partition>-<start>``), offsets continuing."""

    def __init__(self, root: Path, rows: int) -> None:
        self.root = root
        self.rows = rows
        self.next: dict[int, int] = {}
        root.mkdir(parents=True, exist_ok=True)

    def _files(self, n: int, fmt: FileFormat, write: Callable[[Path, int, int], None]) -> list[DataFile]:
        """N files round-robin over the partitions, each written by ``write(path, partition, start)``."""
        files = []
        for i in range(n):
            partition = i % PARTITIONS
            start = self.next.get(partition, 0)
            self.next[partition] = start + self.rows
            path = self.root / f"{TOPIC}-{partition}-{start:020d}"
            write(path, partition, start)
            end = start + self.rows - 1
            files.append(DataFile(f"file://{path}", TOPIC, partition, start, end, path.stat().st_size, fmt, self.rows))
        return files

    def write_jsonl(self, n: int) -> list[DataFile]:
        """N gzip JSON-lines files in the sink's envelope (``value`` + ``offset``), no extension."""
        import gzip

        def write(path: Path, partition: int, start: int) -> None:
            lines = (
                json.dumps({"value": {"id": f"{partition}-{o}", "amount": o * 0.25, "n": o}, "offset": o}) + "\n"
                for o in range(start, start + self.rows)
            )
            path.write_bytes(gzip.compress("".join(lines).encode()))

        return self._files(n, FileFormat.JSONL, write)

    def write(self, n: int) -> list[DataFile]:
        """N Parquet files of ``rows`` rows x 10 columns."""

        def write(path: Path, partition: int, start: int) -> None:
            offsets = pa.array(range(start, start + self.rows), pa.int64())
            cols: dict[str, Any] = {
                "id": pa.array([f"{partition}-{o}" for o in offsets.to_pylist()]),
                "offset": offsets,
            }
            for c in range(COLUMNS - 2):
                cols[f"m{c}"] = pc.multiply(offsets, c + 1) if c % 2 else pc.cast(offsets, pa.float64())
            pq.write_table(pa.table(cols), path)

        return self._files(n, FileFormat.PARQUET, write)


def pending(files: list[DataFile]) -> list[PendingFile]:
    return [PendingFile(f, "bench-sidecar", "bench-worker") for f in files]


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "p50_s": round(statistics.median(values), 4),
        "p99_s": round(quantile(values, 0.99), 4),
        "max_s": round(max(values), 4),
        "mean_s": round(statistics.fmean(values), 4),
    }


class Bench:
    """One Spark session, one scratch directory, the parts."""

    def __init__(self, work: Path, rows: int) -> None:
        self.work = work
        self.rows = rows
        self.storage = StorageReader()
        print(f"starting Spark (local[2]) in {work} ...", flush=True)
        self.spark = create_session(SparkSettings(master="local[2]", ui_enabled=False, local_dir=work / "spark"))
        self._tables = 0

    def coordinator(self, name: str, policy: MaintenancePolicy | None = None) -> TableCoordinator:
        """A table as the service runs it: its coordinator, its committer, its read-ahead cache."""
        self._tables += 1
        root = self.work / f"{name}-{self._tables}"
        config = TableConfig(
            name,
            f"file://{root}",
            topics=(TOPIC,),
            commit=CommitPolicy(max_files=1_000_000, max_bytes=1 << 50, max_pending_files=1_000_000),
            maintenance=policy or MaintenancePolicy(),
        )
        committer = DeltaCommitter(
            self.spark,
            name,
            config.path,
            self.storage,
            checkpoint_in_commit=not config.maintenance.background_checkpoints,
            facts=FactsCache(storage_facts(self.storage), name=name),
        )
        coordinator = TableCoordinator(config, committer, time.time)
        coordinator.load()
        return coordinator

    @staticmethod
    def commit(coordinator: TableCoordinator, files: list[DataFile], *, read_ahead: bool = True) -> float:
        """Offer ``files`` (their footers are read ahead), wait until those reads are done when
        ``read_ahead``, then time one commit round of all of them."""
        coordinator.offer(pending(files), f"m-{time.monotonic_ns()}")
        if read_ahead:
            coordinator.committer.facts.get_all(files)  # type: ignore[attr-defined]
        started = time.perf_counter()
        record = coordinator.maybe_commit(force=True)
        elapsed = time.perf_counter() - started
        assert record is not None and record.files == len(files), record
        return elapsed

    # -- parts ----------------------------------------------------------------------------

    def part_commit(self, sizes: list[int]) -> dict[str, Any]:
        rows = []
        print(f"{'files':>6} {'read ahead s':>13} {'cold s':>8} {'spark rewrite s':>16} {'rewrite/lakegate':>17}")
        for n in sizes:
            landing = Landing(self.work / f"landing-{n}", self.rows)  # offsets from 0: new tables
            warm_table = self.coordinator(f"warm{n}")
            cold = DeltaCommitter(self.spark, f"cold{n}", f"file://{self.work}/cold{n}", self.storage)
            rewrite_path = str(self.work / f"rewrite{n}")
            first = landing.write(1)  # each table exists before the measured commit
            self.commit(warm_table, first)
            cold_state = TableState(f"cold{n}")
            self._cold_commit(cold, cold_state, first)
            self.spark.read.parquet(first[0].path).write.format("delta").mode("append").save(rewrite_path)

            print(f"  writing {n} files ...", flush=True)
            files = landing.write(n)
            warm_s = self.commit(warm_table, files)
            cold_s = self._cold_commit(cold, cold_state, files)
            started = time.perf_counter()
            self.spark.read.parquet(*[f.path for f in files]).write.format("delta").mode("append").save(rewrite_path)
            rewrite_s = time.perf_counter() - started
            rows.append(
                {
                    "files": n,
                    "rows_per_file": self.rows,
                    "lakegate_read_ahead_s": round(warm_s, 3),
                    "lakegate_cold_s": round(cold_s, 3),
                    "spark_rewrite_s": round(rewrite_s, 3),
                    "rewrite_over_lakegate": round(rewrite_s / warm_s, 1),
                }
            )
            print(f"{n:>6} {warm_s:>13.2f} {cold_s:>8.2f} {rewrite_s:>16.2f} {rewrite_s / warm_s:>16.1f}x", flush=True)
        return {"results": rows}

    @staticmethod
    def _cold_commit(committer: DeltaCommitter, state: TableState, files: list[DataFile]) -> float:
        for p in pending(files):
            state.offer(p, now=0)
        plan = state.plan(now=0, force=True)
        assert plan is not None and len(plan.files) == len(files)
        started = time.perf_counter()
        record = committer.commit(plan)
        elapsed = time.perf_counter() - started
        state.committed_plan(plan, record.version, now=0)
        return elapsed

    def part_jsonl(self, sizes: list[int]) -> dict[str, Any]:
        rows = []
        for n in sizes:
            landing = Landing(self.work / f"landing-jsonl-{n}", self.rows)
            table = self.coordinator(f"jsonl{n}")
            self.commit(table, landing.write_jsonl(1))  # the table exists before the measured commit
            files = landing.write_jsonl(n)
            seconds = self.commit(table, files)
            rows.append({"files": n, "lines_per_file": self.rows, "commit_s": round(seconds, 3)})
            print(f"{n:>6} JSONL files: {seconds:.2f} s", flush=True)
        return {"results": rows}

    def part_checkpoints(self, commits: int) -> dict[str, Any]:
        modes = {
            "inline": MaintenancePolicy(checkpoint_interval_commits=0),  # Delta: inside every 10th commit
            # the control: no checkpoint in 200 commits, so what the commit path alone varies by
            "none": MaintenancePolicy(checkpoint_interval_commits=NO_CHECKPOINTS),
            "background": MaintenancePolicy(),  # after every 10th commit, from a background thread
        }
        out: dict[str, Any] = {"commits": commits, "files_per_commit": 10}
        for mode, policy in modes.items():
            landing = Landing(self.work / f"landing-{mode}", self.rows)
            table = self.coordinator(f"ckpt-{mode}", policy)
            self.commit(table, landing.write(10))  # the table exists before the timed commits
            times = []
            for i in range(commits):
                times.append(self.commit(table, landing.write(10)))
                if (i + 1) % 50 == 0:
                    print(
                        f"  {mode}: {i + 1}/{commits} commits, median so far {statistics.median(times):.3f} s",
                        flush=True,
                    )
            table.drain()  # the last background checkpoint, before the next mode is timed
            checkpoints = [r for r in table.maintenance_runs if r.kind.value == "checkpoint"]
            out[mode] = {
                **summary(times),
                "seconds": [round(t, 4) for t in times],
                "background_checkpoints": len(checkpoints),
                "checkpoint_seconds": [round(r.duration_ms / 1000, 3) for r in checkpoints],
            }
            print(
                f"{mode:>10}: p50 {out[mode]['p50_s']:.3f} s  p99 {out[mode]['p99_s']:.3f} s  "
                f"max {out[mode]['max_s']:.3f} s  p99/p50 {out[mode]['p99_s'] / out[mode]['p50_s']:.2f}",
                flush=True,
            )
        return out

    def part_history(self, versions: list[int], window: int) -> dict[str, Any]:
        landing = Landing(self.work / "landing-history", max(10, self.rows // 100))
        table = self.coordinator("history")
        rows = []
        version = -1
        for target in sorted(versions):
            while version < target - 1:  # grow the table one small commit at a time
                self.commit(table, landing.write(1))
                version += 1
                if version % 500 == 0:
                    print(f"  history: table at v{version}", flush=True)
            times = [self.commit(table, landing.write(10)) for _ in range(window)]
            version += window
            rows.append({"version": target, "window": window, **summary(times)})
            table.drain()
            print(f"  at v{target}: p50 {rows[-1]['p50_s']:.3f} s  p99 {rows[-1]['p99_s']:.3f} s", flush=True)
        return {"results": rows}

    def part_upsert(self, rows: int, files: int, sizes: list[int]) -> dict[str, Any]:
        sys.path.insert(0, str(Path(__file__).parent))
        import bench_upsert

        return dict(bench_upsert.run(self.spark, self.work, rows, files, sizes))


def wrk_figures(output: str) -> dict[str, Any]:
    """Requests/s, latency percentiles (ms) and non-2xx answers from ``wrk --latency`` output."""
    import re

    def ms(text: str) -> float:
        m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
        assert m, text
        return round(float(m.group(1)) * WRK_UNITS[m.group(2)], 2)

    out: dict[str, Any] = {}
    for pct, value in re.findall(r"^\s+(50|75|90|99)%\s+(\S+)$", output, re.M):
        out[f"p{pct}_ms"] = ms(value)
    rate = re.search(r"^Requests/sec:\s+([\d.]+)", output, re.M)
    total = re.search(r"^\s+(\d+) requests in", output, re.M)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    errors = re.search(r"Socket errors: (.*)$", output, re.M)
    assert rate and total, output
    out.update(
        manifests_per_s=round(float(rate.group(1)), 1),
        requests=int(total.group(1)),
        non_2xx=int(bad.group(1)) if bad else 0,
        socket_errors=errors.group(1) if errors else None,
    )
    return out


def part_http(work: Path, clients: list[int], seconds: int) -> dict[str, Any]:
    """The real service under wrk (see the module docstring)."""
    import shutil
    import subprocess

    from lakegate_stack.services import SIDECAR_TOKEN, ServiceProcess

    wrk = shutil.which("wrk")
    if wrk is None:
        raise SystemExit("the http part needs wrk on PATH (scripts/bench installs it from Debian)")
    root = work / "http-table"
    table = {
        "name": "bench",
        "path": f"file://{root}",
        "topics": [TOPIC],
        "commit": {"interval_seconds": 3600, "max_files": 1_000_000, "max_pending_files": 10_000_000},
    }
    service = ServiceProcess(work / "http", [table], [f"file://{root}/"], server={"threads": 8})
    print("starting the service (gunicorn, then Spark) ...", flush=True)
    service.start()
    service.spark_ui()  # Spark up and idle: the figures are the HTTP side's
    rows = []
    try:
        for run, n in enumerate(clients):
            env = {
                **os.environ,
                "LAKEGATE_BENCH_TOKEN": SIDECAR_TOKEN,
                "LAKEGATE_BENCH_ROOT": f"file://{root}",
                "LAKEGATE_BENCH_FIRST_PARTITION": str(run * 100),
            }
            cmd = [
                wrk,
                "-t2",
                f"-c{n}",
                f"-d{seconds}s",
                "--latency",
                "-s",
                str(Path(__file__).parent / "bench_manifest.lua"),
                service.url,
            ]
            result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=seconds + 60, check=True)
            row = {"clients": n, "seconds": seconds, **wrk_figures(result.stdout)}
            rows.append(row)
            print(
                f"{n:>3} clients: {row['manifests_per_s']:>8.1f} manifests/s  p50 {row.get('p50_ms')} ms  "
                f"p90 {row.get('p90_ms')} ms  p99 {row.get('p99_ms')} ms  non-2xx {row['non_2xx']}",
                flush=True,
            )
        pending = service.call("GET", "/v1/tables/bench").json()["pending_files"]
    finally:
        service.stop()
    answered = sum(r["requests"] - r["non_2xx"] for r in rows)
    # every answered manifest was a new file, buffered (wrk may stop with a request in flight)
    assert answered <= pending <= answered + sum(clients), (answered, pending)
    return {"results": rows, "pending_files_after": pending}


def report(out_dir: Path) -> str:
    """Markdown tables of the parts' JSON files found in ``out_dir`` (for docs/performance.md)."""
    out: list[str] = []

    def load(part: str) -> dict[str, Any] | None:
        path = out_dir / f"{part}.json"
        return json.loads(path.read_text()) if path.is_file() else None

    def table(header: list[str], rows: Iterable[list[Any]]) -> None:
        out.extend(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)])
        out.extend("| " + " | ".join(str(c) for c in row) + " |" for row in rows)
        out.append("")

    if (d := load("commit")) is not None:
        table(
            ["files", "Lakegate, footers read ahead", "Lakegate, cold", "Spark rewrite", "rewrite / Lakegate"],
            [
                [f"{r['files']:,}", f"{r['lakegate_read_ahead_s']:.2f} s", f"{r['lakegate_cold_s']:.2f} s"]
                + [f"{r['spark_rewrite_s']:.2f} s", f"{r['rewrite_over_lakegate']}x"]
                for r in d["results"]
            ],
        )
    if (d := load("checkpoints")) is not None:
        table(
            [f"{d['commits']} commits of {d['files_per_commit']} files", "p50", "p99", "max", "p99/p50"],
            [
                [f"checkpoints {m}", *(f"{d[m][k]:.3f} s" for k in ("p50_s", "p99_s", "max_s"))]
                + [f"{d[m]['p99_s'] / d[m]['p50_s']:.2f}"]
                for m in CHECKPOINT_MODES
                if m in d
            ],
        )
    if (d := load("history")) is not None:
        table(
            ["table version", "p50", "p99"],
            [[f"v{r['version']:,}", f"{r['p50_s']:.2f} s", f"{r['p99_s']:.2f} s"] for r in d["results"]],
        )
    if (d := load("jsonl")) is not None:
        table(
            ["gzip JSON-lines files", "commit"],
            [[f"{r['files']:,} x {r['lines_per_file']:,} lines", f"{r['commit_s']:.2f} s"] for r in d["results"]],
        )
    if (d := load("upsert")) is not None:
        out += [f"A table of {d['table_rows']:,} rows in {d['table_files']} files; one round of changes.", ""]
        table(
            ["changed keys", "keys", "Lakegate, deletion vectors", "files marked", "Lakegate, copy-on-write"]
            + ["files rewritten", "Delta MERGE, deletion vectors"],
            [
                [f"{r['changed_keys']:,}", r["keys"], f"{r['lakegate_dv_s']:.2f} s"]
                + [f"{r['files_with_new_vectors']}/{r['table_files']}", f"{r['lakegate_s']:.2f} s"]
                + [f"{r['files_rewritten']}/{r['table_files']}", f"{r['delta_merge_dv_s']:.2f} s"]
                for r in d["results"]
            ],
        )
    if (d := load("http")) is not None:
        table(
            ["clients", "manifests/s", "p50", "p90", "p99", "non-2xx"],
            [
                [
                    r["clients"],
                    f"{r['manifests_per_s']:,.0f}",
                    *(f"{r.get(k)} ms" for k in ("p50_ms", "p90_ms", "p99_ms")),
                ]
                + [r["non_2xx"]]
                for r in d["results"]
            ],
        )
    if (d := load("pipeline")) is not None:
        out += [
            f"{d['rate']:,} records/s for {d['seconds']} s; Connect flushes every {d['connect_offset_flush_ms'] / 1000:g} s.",
            "",
        ]
        table(
            ["system", "interval", "freshness p50", "p99", "CPU-s per million records", "of which service + sidecar"],
            [
                [r["system"], f"{r['interval_s']} s", f"{r['freshness_p50_s']} s", f"{r['freshness_p99_s']} s"]
                + [r["cpu_s_per_million"], r.get("marginal_cpu_s_per_million", "–")]
                for r in d["results"]
            ],
        )
    return "\n".join(out)


def plot(part: str, data: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    if part == "commit":
        rows = data["results"]
        n = [r["files"] for r in rows]
        for key, label in (
            ("lakegate_read_ahead_s", "Lakegate (footers read ahead)"),
            ("lakegate_cold_s", "Lakegate (cold)"),
            ("spark_rewrite_s", "Spark rewrite (read.parquet → delta append)"),
        ):
            ax.plot(n, [r[key] for r in rows], marker="o", label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("files in the commit")
        ax.set_ylabel("seconds")
    elif part == "checkpoints":
        for mode in (m for m in CHECKPOINT_MODES if m in data):
            ax.plot(range(1, data["commits"] + 1), data[mode]["seconds"], label=f"checkpoints {mode}", linewidth=0.8)
        ax.set_yscale("log")  # inline's seconds beside the others' milliseconds
        ax.set_xlabel("commit")
        ax.set_ylabel("seconds")
    elif part == "history":
        rows = data["results"]
        ax.plot([r["version"] for r in rows], [r["p50_s"] for r in rows], marker="o", label="p50")
        ax.plot([r["version"] for r in rows], [r["p99_s"] for r in rows], marker="o", label="p99")
        ax.set_xscale("log")
        ax.set_xlabel("table version")
        ax.set_ylabel("seconds per 10-file commit")
    elif part == "pipeline":
        rows = data["results"]
        systems = sorted({r["system"] for r in rows})
        intervals = sorted({r["interval_s"] for r in rows})
        width = 0.8 / (2 * len(systems))
        for i, system in enumerate(systems):
            for j, (key, hatch) in enumerate((("freshness_p50_s", ""), ("freshness_p99_s", "//"))):
                values = [
                    next((r[key] for r in rows if r["system"] == system and r["interval_s"] == iv), 0)
                    for iv in intervals
                ]
                xs = [k + (2 * i + j) * width for k in range(len(intervals))]
                ax.bar(xs, values, width, hatch=hatch, label=f"{system} {key.split('_')[1]}", color=f"C{i}")
        ax.set_xticks([k + 0.4 - width / 2 for k in range(len(intervals))], [f"{iv} s" for iv in intervals])
        ax.set_xlabel("commit interval / trigger")
        ax.set_ylabel("freshness, s")
    elif part == "http":
        rows = data["results"]
        labels = [str(r["clients"]) for r in rows]
        ax.bar(labels, [r["manifests_per_s"] for r in rows], color="tab:blue", label="manifests/s")
        ax.set_xlabel("concurrent clients")
        ax.set_ylabel("manifests/s")
        p99 = ax.twinx()
        p99.plot(labels, [r.get("p99_ms", 0) for r in rows], color="tab:red", marker="o", label="p99 ms")
        p99.set_ylabel("p99 latency, ms")
    elif part == "upsert":
        rows = data["results"]
        for kind, style in (("clustered", "-"), ("random", "--")):
            mine = [r for r in rows if r["keys"] == kind]
            sizes = [r["changed_keys"] for r in mine]
            for key, marker, color, label in (
                ("lakegate_dv_s", "o", "C0", "Lakegate + DV"),
                ("lakegate_s", "^", "C2", "Lakegate copy-on-write"),
                ("delta_merge_dv_s", "s", "C1", "Delta MERGE + DV"),
            ):
                ax.plot(sizes, [r[key] for r in mine], style, marker=marker, color=color, label=f"{label}, {kind}")
        ax.set_xscale("log")
        ax.set_xlabel(f"changed keys per round (table of {data['table_rows']:,} rows)")
        ax.set_ylabel("seconds")
    else:
        plt.close(fig)
        return
    ax.set_title(f"lakegate bench: {part}")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--parts",
        default=",".join(DEFAULT_PARTS),
        help=f"comma-separated, of {', '.join(PARTS)} (default: {','.join(DEFAULT_PARTS)})",
    )
    parser.add_argument(
        "--files",
        type=int,
        nargs="+",
        default=[10, 100, 1000, 10000],
        help="commit: files per commit (default 10 100 1000 10000)",
    )
    parser.add_argument("--rows", type=int, default=1000, help="rows per file (default 1000)")
    parser.add_argument(
        "--commits", type=int, default=200, help="checkpoints: consecutive commits per mode (default 200)"
    )
    parser.add_argument(
        "--history",
        type=int,
        nargs="+",
        default=[10, 1000, 5000],
        help="history: table versions (default 10 1000 5000)",
    )
    parser.add_argument("--window", type=int, default=20, help="history: commits timed at each version (default 20)")
    parser.add_argument(
        "--jsonl-files",
        type=int,
        nargs="+",
        default=[10, 100, 1000],
        help="jsonl: files per commit (default 10 100 1000)",
    )
    parser.add_argument(
        "--clients", type=int, nargs="+", default=[8, 32], help="http: concurrent connections (default 8 32)"
    )
    parser.add_argument("--seconds", type=int, default=20, help="http: seconds per run (default 20)")
    parser.add_argument(
        "--intervals",
        type=int,
        nargs="+",
        default=[2, 10],
        help="pipeline: commit intervals / triggers, s (default 2 10)",
    )
    parser.add_argument("--rate", type=int, default=5000, help="pipeline: records per second (default 5000)")
    parser.add_argument(
        "--pipeline-seconds", type=int, default=120, help="pipeline: seconds of producing (default 120)"
    )
    parser.add_argument(
        "--warm-up-seconds",
        type=int,
        default=0,
        help="pipeline: seconds at --rate before each measured run, not measured (default 0)",
    )
    parser.add_argument(
        "--upsert-rows", type=int, default=10_000_000, help="upsert: rows of the table (default 10000000)"
    )
    parser.add_argument("--upsert-files", type=int, default=40, help="upsert: files of the table (default 40)")
    parser.add_argument(
        "--upsert-keys",
        type=int,
        nargs="+",
        default=[1000, 10000, 100000],
        help="upsert: changed keys per round (default 1000 10000 100000)",
    )
    parser.add_argument("--out-dir", type=Path, default=Path(".lakegate/bench"))
    parser.add_argument("--no-plot", action="store_true", help="write no PNG")
    parser.add_argument(
        "--report", action="store_true", help="print Markdown tables of the JSON in --out-dir; run nothing"
    )
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.out_dir))
        return 0
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown part(s) {', '.join(unknown)}: choose from {', '.join(PARTS)}")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}

    if "intake" in parts:
        sys.path.insert(0, str(Path(__file__).parent))
        import bench_intake

        print("== intake", flush=True)
        bench_intake.main(["--out", str(args.out_dir / "intake.json")])
    work = Path(tempfile.mkdtemp(prefix="lakegate-bench-"))
    if "http" in parts:
        write_part("http", machine, lambda: part_http(work, args.clients, args.seconds), args)
    if "pipeline" in parts:
        import bench_pipeline

        write_part(
            "pipeline",
            machine,
            lambda: bench_pipeline.run(
                work / "pipeline", args.intervals, args.rate, args.pipeline_seconds, args.warm_up_seconds
            ),
            args,
        )
    in_process = [p for p in parts if p not in ("intake", "http", "pipeline")]  # in the order of PARTS
    if not in_process:
        return 0
    bench = Bench(work, args.rows)
    runs: dict[str, Callable[[], dict[str, Any]]] = {
        "commit": lambda: bench.part_commit(args.files),
        "checkpoints": lambda: bench.part_checkpoints(args.commits),
        "history": lambda: bench.part_history(args.history, args.window),
        "jsonl": lambda: bench.part_jsonl(args.jsonl_files),
        "upsert": lambda: bench.part_upsert(args.upsert_rows, args.upsert_files, args.upsert_keys),
    }
    for part in in_process:
        write_part(part, machine, runs[part], args)
    bench.spark.stop()
    return 0


def write_part(part: str, machine: dict[str, Any], run: Callable[[], dict[str, Any]], args: argparse.Namespace) -> None:
    """Run one part; write its JSON (and its plot)."""
    print(f"== {part}", flush=True)
    started = time.monotonic()
    data = {"benchmark": part, "machine": machine, **run(), "took_s": 0.0}
    data["took_s"] = round(time.monotonic() - started, 1)
    out = args.out_dir / f"{part}.json"
    out.write_text(json.dumps(data, indent=2))
    print(f"wrote {out}", flush=True)
    if not args.no_plot:
        plot(part, data, args.out_dir / f"{part}.png")
        print(f"wrote {args.out_dir / f'{part}.png'}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
