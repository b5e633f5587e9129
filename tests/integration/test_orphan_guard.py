"""The orphan guard on real Spark + Delta: a file whose content runs past its claimed range is
refused with what it holds, and once claimed right (the orphan left out) every offset is in the
table exactly once, as delta-rs reads it. Both envelope encodings the sink writes: Parquet (the
footer's bounds) and gzip JSON lines (first and last line).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from commit_service.delta.committer import DeltaCommitter
from commit_service.domain.plan import CommitPlan, PendingFile
from commit_service.domain.state import TableState
from commit_service.errors import ContentRangeError
from commit_service.storage.reader import StorageReader
from lakegate_core.protocol import DataFile, FileFormat, OffsetSpan

TOPIC = "orders"


def landed(root: Path, fmt: FileFormat, first: int, last: int) -> Path:
    """An object as the sink writes it with ``format.output.fields=key,value,offset``."""
    path = root / "landing" / f"{TOPIC}-0-{first}"
    path.parent.mkdir(parents=True, exist_ok=True)
    offsets = range(first, last + 1)
    if fmt is FileFormat.PARQUET:
        value = pa.array([{"id": o, "note": f"n{o}"} for o in offsets])
        pq.write_table(pa.table({"key": pa.array([str(o) for o in offsets]), "value": value, "offset": offsets}), path)
    else:
        lines = (json.dumps({"key": str(o), "value": {"id": o, "note": f"n{o}"}, "offset": o}) for o in offsets)
        path.write_bytes(gzip.compress("\n".join(lines).encode() + b"\n"))
    return path


def claim(path: Path, fmt: FileFormat, start: int, end: int) -> PendingFile:
    f = DataFile(f"file://{path}", TOPIC, 0, start, end, path.stat().st_size, fmt)
    return PendingFile(f, f"m-{start}-{end}", "sc-1")


@pytest.mark.parametrize("fmt", [FileFormat.PARQUET, FileFormat.JSONL])
def test_a_re_written_range_with_an_orphan_commits_each_offset_once(
    spark: Any, tmp_path: Path, fmt: FileFormat
) -> None:
    table = tmp_path / "orders"
    committer = DeltaCommitter(spark, "orders", str(table), StorageReader(local_roots=[str(tmp_path)]))
    new = landed(tmp_path, fmt, 0, 149)  # the re-write: one object for 0..149
    orphan = landed(tmp_path, fmt, 100, 199)  # the failed attempt's second object
    after = landed(tmp_path, fmt, 150, 299)
    by_names = [claim(new, fmt, 0, 99), claim(orphan, fmt, 100, 149), claim(after, fmt, 150, 299)]
    state = TableState("orders")
    for p in by_names:
        state.offer(p, 0)
    plan = state.plan(now=0, force=True)
    assert plan is not None and len(plan.files) == 3

    with pytest.raises(ContentRangeError) as caught:
        committer.commit(plan)
    assert caught.value.holds == OffsetSpan(0, 149) and caught.value.path == f"file://{new}"
    assert committer.snapshot().version == -1, "nothing was committed"

    state.refuse_content(caught.value.path, caught.value.holds)  # the orphan leaves with it
    state.offer(claim(new, fmt, 0, 149), 0)
    plan = state.plan(now=0, force=True)
    assert isinstance(plan, CommitPlan) and [p.file.end_offset for p in plan.files] == [149, 299]
    record = committer.commit(plan)
    assert record.offsets == {(TOPIC, 0): 300}

    rows = DeltaTable(str(table)).to_pyarrow_table(columns=["id", "_kafka_offset"])
    assert sorted(rows.column("id").to_pylist()) == list(range(300))
    assert sorted(rows.column("_kafka_offset").to_pylist()) == list(range(300))
