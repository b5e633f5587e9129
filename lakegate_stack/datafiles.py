"""Data files like a sink writes them, with their manifest entries: for tests and benchmarks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


def write_parquet(path: Path, topic: str, partition: int, start: int, count: int) -> dict[str, Any]:
    """A data file like the sink writes, and its manifest entry."""
    path.parent.mkdir(parents=True, exist_ok=True)
    offsets = list(range(start, start + count))
    pq.write_table(
        pa.table(
            {
                "id": pa.array([f"{topic}-{partition}-{o}" for o in offsets]),
                "offset": pa.array(offsets, pa.int64()),
                "amount": pa.array([o * 0.5 for o in offsets]),
            }
        ),
        path,
    )
    return {**manifest_entry(path, topic, partition, start, count, "parquet"), "record_count": count}


def manifest_entry(path: Path, topic: str, partition: int, start: int, count: int, fmt: str) -> dict[str, Any]:
    """A manifest's entry for the local file ``path`` holding ``count`` records from ``start``."""
    return {
        "path": f"file://{path}",
        "topic": topic,
        "partition": partition,
        "start_offset": start,
        "end_offset": start + count - 1,
        "size_bytes": path.stat().st_size,
        "format": fmt,
    }
