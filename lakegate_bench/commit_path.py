"""The commit path's parts of ``python -m lakegate_bench bench``: ``commit``, ``checkpoints``,
``history``, ``jsonl`` and ``upsert``, in one process with real Spark and Delta (:class:`Bench`)."""

from __future__ import annotations

import functools
import gzip
import io
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from commit_service.config import Placement, SparkSettings, TableConfig
from commit_service.coordination.table_coordinator import TableCoordinator
from commit_service.delta.committer import DeltaCommitter
from commit_service.delta.partitions import DeltaPartitioning
from commit_service.domain.maintenance import MaintenancePolicy
from commit_service.domain.plan import CommitPolicy, PendingFile
from commit_service.domain.state import TableState
from commit_service.spark.session import create_session
from commit_service.storage.prefetch import FactsCache, storage_facts, threads_for
from commit_service.storage.reader import StorageReader
from lakegate_bench.iceberg import bench_catalog
from lakegate_core.protocol import DataFile, FileFormat

TOPIC = "bench"
PARTITIONS = 3
COLUMNS = 10
NO_CHECKPOINTS = 1_000_000_000  # checkpoints "none": a background checkpoint every this many commits


class Landing:
    """Parquet files as a sink writes them (``<topic>-<partition>-<start>``), offsets continuing."""

    def __init__(self, root: Path, rows: int, partitions: int = PARTITIONS) -> None:
        self.root = root
        self.rows = rows
        self.partitions = partitions
        self.next: dict[int, int] = {}
        root.mkdir(parents=True, exist_ok=True)

    def _files(
        self, n: int, fmt: FileFormat, write: Callable[[Path, int, int], None], progress: bool = False
    ) -> list[DataFile]:
        """N files round-robin over the partitions, each written by ``write(path, partition, start)``;
        with ``progress``, a line every 10,000 files."""
        files = []
        for i in range(n):
            if progress and i and i % 10_000 == 0:
                print(f"  {i:,} of {n:,} files written", flush=True)
            partition = i % self.partitions
            start = self.next.get(partition, 0)
            self.next[partition] = start + self.rows
            path = self.root / f"{TOPIC}-{partition}-{start:020d}"
            write(path, partition, start)
            end = start + self.rows - 1
            files.append(DataFile(f"file://{path}", TOPIC, partition, start, end, path.stat().st_size, fmt, self.rows))
        return files

    @staticmethod
    def envelope(partition: int, offset: int) -> dict[str, Any]:
        """One record in the sink's envelope (``value`` + ``offset``)."""
        return {"value": {"id": f"{partition}-{offset}", "amount": offset * 0.25, "n": offset}, "offset": offset}

    def write_jsonl(self, n: int) -> list[DataFile]:
        """N gzip JSON-lines files in the sink's envelope, no extension."""

        def write(path: Path, partition: int, start: int) -> None:
            lines = (json.dumps(self.envelope(partition, o)) + "\n" for o in range(start, start + self.rows))
            path.write_bytes(gzip.compress("".join(lines).encode()))

        return self._files(n, FileFormat.JSONL, write)

    def write_json(self, n: int) -> list[DataFile]:
        """N gzip JSON-array files (Aiven's ``json``) of the same records."""

        def write(path: Path, partition: int, start: int) -> None:
            records = (json.dumps(self.envelope(partition, o)) for o in range(start, start + self.rows))
            path.write_bytes(gzip.compress(("[\n" + ",\n".join(records) + "\n]").encode()))

        return self._files(n, FileFormat.JSON, write)

    def write_avro(self, n: int, wrapped: bool = False) -> list[DataFile]:
        """N Avro container files (snappy) of the same records, as Aiven's Avro writer types them;
        ``wrapped``: each inside a gzip stream, as Aiven's default ``file.compression.type`` writes them."""
        import fastavro

        value = {
            "type": "record",
            "name": "Value",
            "fields": [
                {"name": "id", "type": "string"},
                {"name": "amount", "type": "double"},
                {"name": "n", "type": "long"},
            ],
        }
        schema = fastavro.parse_schema(
            {
                "type": "record",
                "name": "connector_records",
                "namespace": "io.aiven.avro.output.schema",
                "fields": [{"name": "value", "type": value}, {"name": "offset", "type": "long"}],
            }
        )

        def write(path: Path, partition: int, start: int) -> None:
            out = io.BytesIO()
            records = (self.envelope(partition, o) for o in range(start, start + self.rows))
            fastavro.writer(out, schema, records, codec="snappy")
            path.write_bytes(gzip.compress(out.getvalue()) if wrapped else out.getvalue())

        return self._files(n, FileFormat.AVRO, write)

    def write(self, n: int, progress: bool = False) -> list[DataFile]:
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

        return self._files(n, FileFormat.PARQUET, write, progress)


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
        self.spark = create_session(
            SparkSettings(
                master="local[2]", ui_enabled=False, local_dir=work / "spark", catalogs=(bench_catalog(work),)
            )
        )
        self._tables = 0

    def coordinator(
        self, name: str, policy: MaintenancePolicy | None = None, partition_by: tuple[str, ...] = ()
    ) -> TableCoordinator:
        """A table as the service runs it: its coordinator, its committer, its read-ahead cache."""
        self._tables += 1
        root = self.work / f"{name}-{self._tables}"
        config = TableConfig(
            name,
            f"file://{root}",
            topics=(TOPIC,),
            placement=Placement.IN_PLACE_ABSOLUTE,  # the landing is outside the root: add, never rewrite
            commit=CommitPolicy(max_files=1_000_000, max_bytes=1 << 50, max_pending_files=1_000_000),
            maintenance=policy or MaintenancePolicy(),
            partition_by=partition_by,
        )
        committer = DeltaCommitter(
            self.spark,
            name,
            config.path,
            self.storage,
            placement=config.placement,
            checkpoint_in_commit=not config.maintenance.background_checkpoints,
            facts=FactsCache(storage_facts(self.storage), threads=threads_for(config.path), name=name),
            partitioning=DeltaPartitioning(config.partition_spec),
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
            cold = DeltaCommitter(
                self.spark,
                f"cold{n}",
                f"file://{self.work}/cold{n}",
                self.storage,
                placement=Placement.IN_PLACE_ABSOLUTE,
            )
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

    def part_jsonl(self, sizes: list[int], kind: str = "jsonl") -> dict[str, Any]:
        """One commit of N files each rewritten as Parquet: ``kind`` jsonl (gzip JSON lines), json
        (gzip JSON arrays), avro (snappy Avro container files) or avro-gzip (those inside a gzip
        stream, Aiven's default: unwrapped and staged), the same records in each."""
        rows = []
        for n in sizes:
            landing = Landing(self.work / f"landing-{kind}-{n}", self.rows)
            writers: dict[str, Callable[[int], list[DataFile]]] = {
                "jsonl": landing.write_jsonl,
                "json": landing.write_json,
                "avro": landing.write_avro,
                "avro-gzip": functools.partial(landing.write_avro, wrapped=True),
            }
            write = writers[kind]
            table = self.coordinator(f"{kind}{n}")
            self.commit(table, write(1))  # the table exists before the measured commits
            # the first round of its size in this JVM, then the next (the service's steady state:
            # the same code compiled by the JIT, round after round)
            first = self.commit(table, write(n))
            seconds = self.commit(table, write(n))
            rows.append(
                {"files": n, "lines_per_file": self.rows, "commit_s": round(seconds, 3), "first_s": round(first, 3)}
            )
            print(f"{n:>6} {kind} files: {seconds:.2f} s (the first round of that size {first:.2f} s)", flush=True)
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
        from lakegate_bench import upsert as bench_upsert

        return dict(bench_upsert.run(self.spark, self.work, rows, files, sizes))
