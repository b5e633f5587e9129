"""A local data file's facts (``StorageReader.facts`` on ``file://``): the footer read from the
file's tail, with one open, gives what Arrow's own reader of the whole file gives; and a source
that is no regular file under the allowed roots is refused by name, never read or waited on."""

from __future__ import annotations

import mmap
import os
import re
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from commit_service.errors import DataFileError
from commit_service.storage import reader as reader_module
from commit_service.storage.footer import footer_facts
from commit_service.storage.reader import StorageReader, thrift
from lakegate_stack.page_cache import cached_pages, evict


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


def _tails_cached(path: Path) -> list[bool]:
    return cached_pages(path)[-(reader_module.LOCAL_TAIL_BYTES // mmap.PAGESIZE) :]


def test_after_a_footer_read_from_the_disk_a_hint_fetches_a_files_tail_and_nothing_else(tmp_path: Path) -> None:
    big = pa.table({"n": pa.array(range(200_000), pa.int64())})
    first, second = tmp_path / "landing" / "t-0-0", tmp_path / "landing" / "t-0-200000"
    uris = [_write(first, big, compression="none"), _write(second, big, compression="none")]
    if not (evict(first) and evict(second)):
        pytest.skip("this file system keeps the files' pages in memory (tmpfs): nothing to fetch")
    reader = StorageReader(local_roots=[f"file://{tmp_path}/"])
    reader.will_read([uris[0]])  # no read has found a footer on the disk yet: no hint
    time.sleep(0.2)  # what a hint would have fetched has had time to arrive
    assert not any(cached_pages(first))
    assert reader.facts(uris[0], parquet=True).num_records == 200_000  # read from the disk
    reader.will_read([uris[1]])
    deadline = time.monotonic() + 10  # the kernel reads ahead on its own time
    while not all(_tails_cached(second)):
        assert time.monotonic() < deadline, "the footer's pages never reached the page cache"
        time.sleep(0.01)
    assert not any(cached_pages(second)[:-4]), "a hint fetches the tail only, not the file's data"


def test_while_footers_come_from_the_page_cache_nothing_is_hinted(tmp_path: Path) -> None:
    warm, cold = tmp_path / "landing" / "t-0-0", tmp_path / "landing" / "t-0-50"
    uris = [_write(warm, NARROW), _write(cold, NARROW)]
    if not evict(cold):
        pytest.skip("this file system keeps the files' pages in memory (tmpfs)")
    reader = StorageReader(local_roots=[f"file://{tmp_path}/"])
    for _ in range(3):
        reader.facts(uris[0], parquet=True)  # its footer is in the page cache: it was just written
    reader.will_read([uris[1]])
    time.sleep(0.2)
    assert not any(cached_pages(cold)), "a hint was given while every read found its footer in memory"


@pytest.mark.timeout(20)
def test_a_hint_ignores_what_it_cannot_hint_and_never_follows_a_link_or_waits(tmp_path: Path) -> None:
    target = tmp_path / "outside" / "t-0-0"
    _write(target, NARROW)
    link = tmp_path / "landing" / "link"
    link.parent.mkdir()
    link.symlink_to(target)
    fifo = tmp_path / "landing" / "fifo"
    os.mkfifo(fifo)
    if not evict(target):
        pytest.skip("this file system keeps the file's pages in memory (tmpfs)")
    reader = StorageReader(local_roots=[f"file://{tmp_path}/landing/"])
    reader._cold_reads = 1  # as after a footer read from the disk: hints are given
    reader.will_read([f"file://{link}", f"file://{fifo}", f"file://{tmp_path}/landing/missing", "s3a://b/k", "file:x"])
    time.sleep(0.2)  # what a hint would have fetched has had time to arrive
    assert not any(cached_pages(target)), "the link was followed"
