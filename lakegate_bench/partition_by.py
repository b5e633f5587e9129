"""The ``partition-by`` part of ``python -m lakegate_bench run``: what ``partition_by`` costs a round.

The same sink files (Parquet, ``--rows`` rows each, a timestamp column ``ts`` whose rows in a file
span one minute; one file in ``SPANNING`` spans midnight instead) go in one round into four
tables, each through its ``TableCoordinator`` as the service runs it, footers read ahead: Delta
and Iceberg, unpartitioned and ``day(ts)``. A file whose rows lie in one day is added where it
lies, with its partition's values; one spanning midnight is rewritten, split in two. Each table
exists before its measured round. Reported per size of ``--files``: each round's seconds and how
its files went in (in place, split).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from lakegate_core.protocol import DataFile, FileFormat

if TYPE_CHECKING:
    from lakegate_bench.commit_path import Bench

SPANNING = 100  # one file in this many spans midnight
START = datetime(2026, 11, 1, tzinfo=UTC)
TABLES = (("delta", ()), ("delta", ("day(ts)",)), ("iceberg", ()), ("iceberg", ("day(ts)",)))


class TimedLanding:
    """Parquet files of ``(id, ts, offset, amount)``, file ``i`` in minute ``i`` from :data:`START`."""

    def __init__(self, root: Path, rows: int) -> None:
        self.root = root
        self.rows = rows
        self.written = 0
        root.mkdir(parents=True, exist_ok=True)

    def write(self, n: int) -> list[DataFile]:
        files = []
        for _ in range(n):
            i, start = self.written, self.written * self.rows
            self.written += 1
            first = START + timedelta(minutes=i)
            if i % SPANNING == SPANNING - 1:  # the minute around the next midnight
                first = (first + timedelta(days=1)).replace(hour=0, minute=0, second=0) - timedelta(seconds=30)
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


def part_partition_by(bench: Bench, sizes: list[int]) -> dict[str, Any]:
    from lakegate_bench.iceberg import iceberg_coordinator

    rows = []
    print(f"{'files':>6} {'table':>22} {'round s':>8} {'in place':>9} {'split':>6}", flush=True)
    for n in sizes:
        landing = TimedLanding(bench.work / f"landing-partition-by-{n}", bench.rows)
        first, files = landing.write(1), landing.write(n)
        for fmt, spec in TABLES:
            name = f"pb{n}-{fmt}-{'day' if spec else 'none'}"
            table = (
                bench.coordinator(name, partition_by=spec)
                if fmt == "delta"
                else iceberg_coordinator(bench, name.replace("-", "_"), partition_by=spec)
            )
            bench.commit(table, first)
            seconds = bench.commit(table, files)
            record = table.history[-1]
            label = f"{fmt} {'day(ts)' if spec else 'unpartitioned'}"
            in_place, split = record.in_place, record.split or 0
            rows.append(
                {"files": n, "table": label, "round_s": round(seconds, 3), "in_place": in_place, "split": split}
            )
            print(f"{n:>6} {label:>22} {seconds:>8.2f} {in_place!s:>9} {split:>6}", flush=True)
    return {"results": rows, "rows_per_file": bench.rows, "spanning_one_in": SPANNING}
