"""A local data file's facts (``StorageReader.facts`` on ``file://``): the footer read from the
file's tail, with one open, gives what Arrow's own reader of the whole file gives; and a source
that is no regular file under the allowed roots is refused by name, never read or waited on."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from commit_service.errors import DataFileError
from commit_service.storage import reader as reader_module
from commit_service.storage.footer import footer_facts
from commit_service.storage.reader import StorageReader, thrift


def _write(path: Path, table: pa.Table, **kw: object) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, **kw)  # type: ignore[arg-type]
    return f"file://{path}"


NARROW = pa.table(
    {
        "id": pa.array([f"k-{i}" for i in range(50)]),
        "offset": pa.array(range(100, 150), pa.int64()),
        "m": pa.array([i * 0.5 for i in range(50)]),
        "empty": pa.array([None] * 50, pa.string()),
    }
)
# a footer of several times LOCAL_TAIL_BYTES: the first read of the tail does not hold it whole
WIDE = pa.table({f"column_with_a_long_name_{i:04d}": pa.array([i, i + 1], pa.int64()) for i in range(400)})


@pytest.mark.parametrize(
    ("table", "kw"),
    [(NARROW, {}), (NARROW, {"row_group_size": 7}), (WIDE, {}), (NARROW.slice(0, 0), {})],
    ids=["narrow", "row-groups", "wide-footer", "no-rows"],
)
def test_a_local_footer_read_from_its_tail_gives_what_arrow_reads_from_the_file(
    tmp_path: Path, table: pa.Table, kw: dict[str, object]
) -> None:
    uri = _write(tmp_path / "landing" / "t-0-100", table, **kw)
    path = uri.removeprefix("file://")
    whole = pq.ParquetFile(path).metadata  # Arrow reading the file itself
    if table is WIDE:
        assert whole.serialized_size > 2 * reader_module.LOCAL_TAIL_BYTES
    got = StorageReader(local_roots=[f"file://{tmp_path}/landing/"]).facts(uri, parquet=True, keep_footer=True)
    expected = footer_facts(whole)
    assert got.size_bytes == os.path.getsize(path)
    assert got.modification_time_ms == os.stat(path).st_mtime_ns // 1_000_000
    assert (got.num_records, got.stats_json, got.schema_key, got.columns) == (
        expected.num_rows,
        expected.stats_json,
        expected.layout.schema_key,
        expected.layout.columns,
    )
    assert (got.coverage, got.null_strings, got.times) == (expected.coverage, expected.null_strings, expected.times)
    assert got.footer == thrift(whole)


def test_a_local_text_files_facts_are_its_size_and_time(tmp_path: Path) -> None:
    path = tmp_path / "t-0-0"
    path.write_bytes(b'{"a": 1}\n')
    got = StorageReader(local_roots=[str(tmp_path)]).facts(f"file://{path}", parquet=False)
    assert (got.size_bytes, got.modification_time_ms, got.num_records) == (
        9,
        path.stat().st_mtime_ns // 1_000_000,
        None,
    )


@pytest.mark.timeout(20)  # a FIFO opened to read blocks until a writer comes: this must not wait
def test_local_sources_that_are_no_regular_file_under_the_roots_are_refused_by_name(tmp_path: Path) -> None:
    root, outside = tmp_path / "landing", tmp_path / "outside"
    secret = _write(outside / "secret", NARROW).removeprefix("file://")
    root.mkdir()
    os.symlink(secret, root / "t-0-0")
    os.symlink(outside, root / "linked")
    os.mkfifo(root / "t-0-1")
    (root / "t-0-2").mkdir()
    (root / "t-0-3").write_bytes(b'{"offset": 1}\n')
    data = Path(secret).read_bytes()
    (root / "t-0-4").write_bytes(data[:-20] + data[-8:])  # the footer's bytes cut short: its length lies
    (root / "t-0-5").write_bytes(b"PAR1")
    storage = StorageReader(local_roots=[f"file://{root}/"])
    refusals = {
        "t-0-0": "is a symbolic link",
        "linked/secret": "outside the allowed roots",
        "t-0-1": "is not a regular file",
        "t-0-2": "is not a regular file",
        "t-0-3": "is not a readable Parquet file (its bytes are",
        "t-0-4": "is not a readable Parquet file",
        "t-0-5": "is not a readable Parquet file",
        "t-0-6": "does not exist",
    }
    for name, reason in refusals.items():
        with pytest.raises(DataFileError, match=re.escape(reason)):
            storage.facts(f"file://{root}/{name}", parquet=True)
