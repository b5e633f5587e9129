"""Benchmarks of the commit service's Delta side (real Spark + Delta), in selectable parts.

Parts (``--parts``, default all but ``history``):

- ``commit``: one commit of N Parquet files (1,000 rows x 10 columns each), N in ``--files``.
  The same files are committed three ways, each into its own table that already exists:
  Lakegate with the files' footers read ahead (what a commit finds after the files waited in the
  buffer: the service's own ``TableCoordinator`` path), Lakegate cold (nothing read ahead: a
  ``DeltaCommitter`` alone), and the rewrite a Spark job would do
  (``read.parquet(files).write.format("delta").mode("append")``).
- ``checkpoints``: ``--commits`` consecutive 10-file commits through the ``TableCoordinator``,
  once with Delta's checkpoints inside every 10th commit and once with them in the background
  (the default): p50, p99 and max of the commit time.
- ``history``: commit time (p50/p99 of ``--window`` commits) once the table is at each version of
  ``--history`` (checkpoints in the background).
- ``intake``: ``scripts/bench_intake.py`` (no JVM).

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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from commit_service.config import TableConfig
from commit_service.delta_commit import DeltaCommitter
from commit_service.maintenance import MaintenancePolicy
from commit_service.prefetch import FactsCache, storage_facts
from commit_service.spark import SparkSettings, create_session
from commit_service.state import CommitPolicy, PendingFile, TableState
from commit_service.storage import StorageReader
from commit_service.table_coordinator import TableCoordinator
from lakegate_core.protocol import DataFile, FileFormat

TOPIC = "bench"
PARTITIONS = 3
COLUMNS = 10
PARTS = ("commit", "checkpoints", "history", "intake")
DEFAULT_PARTS = ("commit", "checkpoints", "intake")


class Landing:
    """Parquet files as a sink writes them (``<topic>-<partition>-<start>``), offsets continuing."""

    def __init__(self, root: Path, rows: int) -> None:
        self.root = root
        self.rows = rows
        self.next: dict[int, int] = {}
        root.mkdir(parents=True, exist_ok=True)

    def write(self, n: int) -> list[DataFile]:
        files = []
        for i in range(n):
            partition = i % PARTITIONS
            start = self.next.get(partition, 0)
            self.next[partition] = start + self.rows
            path = self.root / f"{TOPIC}-{partition}-{start:020d}"
            offsets = pa.array(range(start, start + self.rows), pa.int64())
            cols: dict[str, Any] = {
                "id": pa.array([f"{partition}-{o}" for o in offsets.to_pylist()]),
                "offset": offsets,
            }
            for c in range(COLUMNS - 2):
                cols[f"m{c}"] = pc.multiply(offsets, c + 1) if c % 2 else pc.cast(offsets, pa.float64())
            pq.write_table(pa.table(cols), path)
            size = path.stat().st_size
            files.append(
                DataFile(
                    f"file://{path}",
                    TOPIC,
                    partition,
                    start,
                    start + self.rows - 1,
                    size,
                    FileFormat.PARQUET,
                    self.rows,
                )
            )
        return files


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

    def part_checkpoints(self, commits: int) -> dict[str, Any]:
        modes = {
            "inline": MaintenancePolicy(checkpoint_interval_commits=0),  # Delta: inside every 10th commit
            "background": MaintenancePolicy(),  # after every 10th commit, from a background thread
        }
        out: dict[str, Any] = {"commits": commits, "files_per_commit": 10}
        for mode, policy in modes.items():
            landing = Landing(self.work / f"landing-{mode}", self.rows)
            table = self.coordinator(f"ckpt-{mode}", policy)
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
            }
            print(
                f"{mode:>10}: p50 {out[mode]['p50_s']:.3f} s  p99 {out[mode]['p99_s']:.3f} s  max {out[mode]['max_s']:.3f} s",
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
        for mode in ("inline", "background"):
            ax.plot(range(1, data["commits"] + 1), data[mode]["seconds"], label=f"checkpoints {mode}", linewidth=0.8)
        ax.set_xlabel("commit")
        ax.set_ylabel("seconds")
    elif part == "history":
        rows = data["results"]
        ax.plot([r["version"] for r in rows], [r["p50_s"] for r in rows], marker="o", label="p50")
        ax.plot([r["version"] for r in rows], [r["p99_s"] for r in rows], marker="o", label="p99")
        ax.set_xscale("log")
        ax.set_xlabel("table version")
        ax.set_ylabel("seconds per 10-file commit")
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
    parser.add_argument("--out-dir", type=Path, default=Path(".lakegate/bench"))
    parser.add_argument("--no-plot", action="store_true", help="write no PNG")
    args = parser.parse_args(argv)
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
    jvm_parts = [p for p in parts if p != "intake"]
    if not jvm_parts:
        return 0
    bench = Bench(Path(tempfile.mkdtemp(prefix="lakegate-bench-")), args.rows)
    runs: dict[str, Callable[[], dict[str, Any]]] = {
        "commit": lambda: bench.part_commit(args.files),
        "checkpoints": lambda: bench.part_checkpoints(args.commits),
        "history": lambda: bench.part_history(args.history, args.window),
    }
    for part in jvm_parts:
        print(f"== {part}", flush=True)
        started = time.monotonic()
        data = {"benchmark": part, "machine": machine, **runs[part](), "took_s": 0.0}
        data["took_s"] = round(time.monotonic() - started, 1)
        out = args.out_dir / f"{part}.json"
        out.write_text(json.dumps(data, indent=2))
        print(f"wrote {out}", flush=True)
        if not args.no_plot:
            plot(part, data, args.out_dir / f"{part}.png")
            print(f"wrote {args.out_dir / f'{part}.png'}", flush=True)
    bench.spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
