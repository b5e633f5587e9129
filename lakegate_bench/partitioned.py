"""The ``partitioned`` part of ``python -m lakegate_bench run``: what ``partition_by`` costs a
round, and what it saves a query.

Sink files as Parquet (``--rows`` rows each of ``id``, ``ts``, ``offset``, ``amount``; each file's
rows within one minute), spread evenly over 30 days. For each size of ``--files``, one round of
them goes into each table through its ``TableCoordinator`` as the service runs it, footers read
ahead, each table existing before its measured round:

- ``whole``: no file spans midnight, into an unpartitioned and a ``day(ts)`` table of each format
  (every file of the partitioned table is added in place; the ratio of the two rounds is what
  partitioning costs);
- ``crossing``: one file in :data:`CROSSING` spans midnight (5 %), into a ``day(ts)`` table (those
  files are rewritten, split in two; the share added in place and the round's seconds).

Then a query of one day (``count(*)``, ``sum(amount)`` where ``ts`` is in day 15) by Spark on the
30-day ``whole`` tables, partitioned and not: the median of :data:`QUERIES` runs after one warm-up
run, and the data files each scan planned (Delta's file index after partition pruning, Iceberg's
own planning of the same filter).
"""

from __future__ import annotations

import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from lakegate_core.protocol import DataFile, FileFormat

if TYPE_CHECKING:
    from lakegate_bench.commit_path import Bench

CROSSING = 20  # in the ``crossing`` landing, one file in this many spans midnight
DAYS = 30
START = datetime(2026, 10, 1, tzinfo=UTC)
QUERIES = 5
DAY_QUERIED = START + timedelta(days=15)


class TimedLanding:
    """Parquet files of ``(id, ts, offset, amount)``, spread evenly over :data:`DAYS` days from
    :data:`START`; with ``crossing``, every ``crossing``-th file spans the midnight after it."""

    def __init__(self, root: Path, rows: int, files: int, crossing: int | None) -> None:
        self.root, self.rows, self.crossing = root, rows, crossing
        self.apart = timedelta(days=DAYS) / max(1, files)
        self.written = 0
        root.mkdir(parents=True, exist_ok=True)

    def write(self, n: int) -> list[DataFile]:
        files = []
        for _ in range(n):
            i, start = self.written, self.written * self.rows
            self.written += 1
            first = START + self.apart * i
            if self.crossing and i % self.crossing == self.crossing - 1:
                first = (first + timedelta(days=1)).replace(hour=0, minute=0, second=0) - timedelta(seconds=30)
            elif first.date() != (first + timedelta(seconds=59)).date():  # keep an even file inside its day
                first -= timedelta(seconds=60)
            step = timedelta(seconds=59) / max(1, self.rows - 1)
            table = pa.table(
                {
                    "id": pa.array(range(start, start + self.rows), pa.int64()),
                    "ts": pa.array([first + step * r for r in range(self.rows)], pa.timestamp("us", "UTC")),
                    "offset": pa.array(range(start, start + self.rows), pa.int64()),
                    "amount": pa.array([r * 0.25 for r in range(self.rows)], pa.float64()),
                }
            )
            path = self.root / f"bench-0-{start:020d}"
            pq.write_table(table, path)
            end = start + self.rows - 1
            files.append(
                DataFile(f"file://{path}", "bench", 0, start, end, path.stat().st_size, FileFormat.PARQUET, self.rows)
            )
        return files


def part_partitioned(bench: Bench, sizes: list[int], formats: tuple[str, ...] = ("delta", "iceberg")) -> dict[str, Any]:
    from lakegate_bench.iceberg import iceberg_coordinator

    rounds, queries = [], []
    print(f"{'files':>6} {'landing':>9} {'table':>22} {'round s':>8} {'in place':>9} {'split':>6}", flush=True)
    for n in sizes:
        for landing_name, crossing in (("whole", None), ("crossing", CROSSING)):
            landing = TimedLanding(bench.work / f"landing-partitioned-{n}-{landing_name}", bench.rows, n, crossing)
            first, files = landing.write(1), landing.write(n)
            for fmt in formats:
                for spec in ((), ("day(ts)",)) if crossing is None else (("day(ts)",),):
                    name = f"pt{n}-{landing_name}-{fmt}-{'day' if spec else 'none'}"
                    table = (
                        bench.coordinator(name, partition_by=spec)
                        if fmt == "delta"
                        else iceberg_coordinator(bench, name.replace("-", "_"), partition_by=spec)
                    )
                    bench.commit(table, first)
                    seconds = bench.commit(table, files)
                    record = table.history[-1]
                    label = f"{fmt} {'day(ts)' if spec else 'unpartitioned'}"
                    in_place, split = record.in_place or 0, record.split or 0
                    rounds.append(
                        {
                            "files": n,
                            "landing": landing_name,
                            "table": label,
                            "round_s": round(seconds, 3),
                            "in_place": in_place,
                            "split": split,
                            "in_place_share": round(in_place / (n + 0.0), 4),
                        }
                    )
                    print(f"{n:>6} {landing_name:>9} {label:>22} {seconds:>8.2f} {in_place:>9} {split:>6}", flush=True)
                    if crossing is None:
                        queries.append({"files": n, "table": label, **one_day_query(bench, fmt, table)})
                        q = queries[-1]
                        print(f"{'':>6} {'':>9} {'one-day query':>22} {q['query_s']:>8.3f} {q['files_scanned']:>9}")
    return {
        "rounds": rounds,
        "ratios": ratios(rounds),
        "queries": queries,
        "rows_per_file": bench.rows,
        "days": DAYS,
        "crossing_one_in": CROSSING,
    }


def one_day_query(bench: Bench, fmt: str, table: Any) -> dict[str, Any]:
    """Spark's query of :data:`DAY_QUERIED` on ``table``: the median seconds of :data:`QUERIES`
    runs after a warm-up, the rows it counted, the data files its scan planned."""
    low, high = DAY_QUERIED.strftime("%Y-%m-%d %H:%M:%S"), (DAY_QUERIED + timedelta(days=1)).strftime("%Y-%m-%d")
    from lakegate_bench.iceberg import CATALOG

    if fmt == "delta":
        frame = bench.spark.read.format("delta").load(table.config.path)
    else:
        frame = bench.spark.table(f"{CATALOG}.{table.config.name}")
    day = frame.where(f"ts >= TIMESTAMP'{low}' AND ts < TIMESTAMP'{high} 00:00:00'").selectExpr(
        "count(*) AS n", "sum(amount) AS amount"
    )
    counted = day.collect()[0]["n"]  # the warm-up
    times = []
    for _ in range(QUERIES):
        started = time.perf_counter()
        day.collect()
        times.append(time.perf_counter() - started)
    files = scanned(bench, fmt, day, f"{CATALOG}.{table.config.name}")
    return {"query_s": round(statistics.median(times), 4), "rows": counted, "files_scanned": files}


def scanned(bench: Bench, fmt: str, frame: Any, name: str) -> int:
    """The data files the one-day query plans: Delta's file index after partition pruning (the
    frame has run), Iceberg's own planning of the same filter (``newScan().filter(...).planFiles()``:
    partitions, then each file's column bounds)."""
    if fmt == "delta":
        return len(frame.inputFiles())
    jvm: Any = bench.spark._jvm
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(bench.spark._jsparkSession, name)
    expressions = jvm.org.apache.iceberg.expressions.Expressions
    low = int(DAY_QUERIED.timestamp() * 1_000_000)
    high = int((DAY_QUERIED + timedelta(days=1)).timestamp() * 1_000_000)
    condition = getattr(expressions, "and")(expressions.greaterThanOrEqual("ts", low), expressions.lessThan("ts", high))
    files = table.newScan().filter(condition).planFiles().iterator()
    count = 0
    while files.hasNext():
        files.next()
        count += 1
    return count


def ratios(rounds: list[dict[str, Any]]) -> dict[str, float]:
    """Per format and size: the ``day(ts)`` round's seconds over the unpartitioned one's, on the
    files that each lie in one day."""
    out = {}
    for r in rounds:
        if r["landing"] == "whole" and r["table"].endswith("day(ts)"):
            fmt = r["table"].split()[0]
            base = next(
                b
                for b in rounds
                if b["landing"] == "whole" and b["files"] == r["files"] and b["table"] == f"{fmt} unpartitioned"
            )
            out[f"{fmt} {r['files']}"] = round(r["round_s"] / base["round_s"], 3)
    return out
