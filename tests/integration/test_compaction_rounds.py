"""Compaction planned with the rounds, on real Spark with Delta and Iceberg, read back by value.

Rounds add a sink's small files where they lie; after each round the table's upkeep counts them
and, once a partition holds more than ``small_files_allowed`` small files, merges that partition's
smallest files (``commit_service.domain.compaction``) on its background thread, as the coordinator
has it do beside the rounds. Every field of every record, the offsets and the other partition's
files are the same afterwards, in the independent reader (delta-rs; pyiceberg), also when a merge
commits while a round is in flight. The same tests for both formats.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from commit_service.config import TableConfig
from commit_service.coordination.table_maintenance import TableMaintenance
from commit_service.domain.maintenance import MaintenancePolicy
from commit_service.domain.plan import PendingFile
from commit_service.storage.merge import merge_files
from commit_service.storage.reader import StorageReader
from lakegate_core.protocol import DataFile, FileFormat
from lakegate_stack.fidelity import same
from tests.partition_helpers import DAY, SCHEMA, WITH_TAGS, Landing, Table

ALLOWED = 4
TARGET = 1024 * 1024


def by_day(table: Table) -> dict[str | None, list[str]]:
    out: dict[str | None, list[str]] = {}
    for path, part, _ in table.files():
        out.setdefault(part["ts_day"], []).append(path)
    return {day: sorted(paths) for day, paths in out.items()}


@pytest.mark.parametrize("by", ["arrow", "spark"])
@pytest.mark.parametrize("table_format", ["delta", "iceberg"])
def test_rounds_merge_a_partitions_small_files_once_it_holds_too_many(
    spark: Any, tmp_path: Path, table_format: str, by: str
) -> None:
    """Merged by Arrow in the service; files with a list column by the format's Spark action."""
    name = f"merged_clicks_{by}"  # a name of its own: the catalog is shared
    table = Table(spark, tmp_path, table_format, name, "day(ts)")
    policy = MaintenancePolicy(enabled=True, target_file_size_bytes=TARGET, small_files_allowed=ALLOWED)
    config = TableConfig(name=name, path=str(table.root), topics=("clicks",), maintenance=policy)
    upkeep = TableMaintenance(config, table.committer, lambda: 0.0, threading.Lock())
    landing = Landing(table.root, WITH_TAGS if by == "spark" else SCHEMA)
    expected: dict[int, dict[str, Any]] = {}
    next_offset = {0: 0, 1: 0}
    merges: list[Any] = []

    def round_of(day: int, kafka_partitions: list[int], records: int) -> None:
        files = []
        for p in kafka_partitions:  # partition 1's files a record longer: no two of one size
            at = [DAY + timedelta(days=day, hours=1, minutes=i) for i in range(records + p)]
            f, rows = landing.parquet(p, next_offset[p], at)
            next_offset[p] += len(at)
            files.append(f)
            expected.update({r["id"]: r for r in rows})
        record = table.commit(files)
        assert record.in_place == len(files)
        upkeep.committed(record.version, record.files)
        assert upkeep.maybe_maintain(record.version) == [], "an append table's merge runs in the background"
        upkeep.drain()
        merges[:] = [r for r in upkeep.runs if r.detail and r.detail.startswith("merged")]

    round_of(1, [1], 5)  # the 28th: two files, which stay as they are
    round_of(1, [1], 6)
    assert merges == [], "two small files: under the allowance"
    day_28 = by_day(table)["2026-11-28"]
    for n in range(3):  # the 27th: files of both Kafka partitions, of growing size
        round_of(0, [0, 1], 5 + 3 * n)
    assert len(merges) == 1, "six small files on the 27th: merged after the round that brought the sixth"

    merge = merges[0]
    assert merge.files_before == 8
    assert merge.detail is not None and "merged" in merge.detail and "1 partition(s)" in merge.detail
    assert f"{1 if by == 'arrow' else 0} of the 1 by Arrow" in merge.detail, merge.detail
    days = by_day(table)
    assert days["2026-11-28"] == day_28, "the partition under its allowance is left alone"
    assert len(days["2026-11-27"]) == 1, "its six files, of like sizes, merged into one"
    assert merge.files_after == merge.files_before - 6 + 1
    assert table.committer.snapshot().offsets == {("clicks", 0): next_offset[0], ("clicks", 1): next_offset[1]}

    # the audit's ledger: the merge is a rewrite with no offsets; the rounds' new rows are every record
    history = table.committer.ledger().history()
    last = history.commits[-1]
    assert last.rewrite and last.offsets is None, last
    assert sum(c.added_rows or 0 for c in history.commits if not c.rewrite) == len(expected)

    got = table.rows()
    assert sorted(r["id"] for r in got) == sorted(expected)
    for r in got:  # every field of every record (Iceberg's partition is hidden: no column)
        want = {**expected[r["id"]], "ts_day": r["ts"].date()} if table_format == "delta" else expected[r["id"]]
        assert same(want, r), f"{want} != {r}"

    round_of(1, [0], 4)  # the next round: three small files on the 28th, under the allowance again
    assert len(merges) == 1 and len(by_day(table)["2026-11-28"]) == 3


@pytest.mark.parametrize("table_format", ["delta", "iceberg"])
def test_a_merge_that_commits_while_a_round_is_in_flight_leaves_both(
    spark: Any, tmp_path: Path, table_format: str
) -> None:
    """A round reads the table and builds its commit; a merge of the partition's small files then
    runs to its end and commits; the round's commit lands on top of the merge's (Delta: no conflict
    between an append and a compaction; Iceberg: its retry, the round's offsets check passing over
    the merge's replace snapshot). Triggered at the round's own seam, not by timing."""
    table = Table(spark, tmp_path, table_format, "raced_clicks", "day(ts)")
    policy = MaintenancePolicy(enabled=True, target_file_size_bytes=TARGET, small_files_allowed=ALLOWED)
    config = TableConfig(name="raced_clicks", path=str(table.root), topics=("clicks",), maintenance=policy)
    upkeep = TableMaintenance(config, table.committer, lambda: 0.0, threading.Lock())
    landing = Landing(table.root)
    expected: dict[int, dict[str, Any]] = {}
    next_offset = 0

    def files_of(records: list[int]) -> list[Any]:
        nonlocal next_offset
        out = []
        for n in records:
            at = [DAY + timedelta(hours=1, minutes=i) for i in range(n)]
            f, rows = landing.parquet(0, next_offset, at)
            next_offset += n
            out.append(f)
            expected.update({r["id"]: r for r in rows})
        return out

    for n in range(ALLOWED + 1):  # five small files of one partition: one over the allowance
        record = table.commit(files_of([5 + n]))
        upkeep.committed(record.version, record.files)
    before = table.committer.snapshot().version
    land = table.committer.land
    merged_under: list[int] = []

    def land_after_a_merge(*args: Any) -> Any:
        landing_round = land(*args)  # the round's commit, built on the table as it read it

        def merge_then_land() -> int:
            upkeep.maybe_maintain(before)
            upkeep.drain()
            merged_under.append(table.committer.snapshot().version)
            return int(landing_round())

        return merge_then_land

    table.committer.land = land_after_a_merge  # type: ignore[method-assign]
    record = table.commit(files_of([30]))  # the round in flight
    del table.committer.land

    merges = [r for r in upkeep.runs if r.detail and r.detail.startswith("merged")]
    assert len(merges) == 1 and merges[0].files_before == ALLOWED + 1, merges
    assert merges[0].detail is not None and "1 of the 1 by Arrow" in merges[0].detail, merges[0].detail
    assert merged_under == [merges[0].version_after] and merges[0].version_after > before
    assert record.version > merges[0].version_after, "the round landed on top of the merge"
    files = by_day(table)["2026-11-27"]
    assert len(files) == 2, f"the five merged into one, and the round's own file: {files}"
    assert table.committer.snapshot().offsets == {("clicks", 0): next_offset}
    history = table.committer.ledger().history()
    assert [c.rewrite for c in history.commits][-2:] == [True, False]
    assert sum(c.added_rows or 0 for c in history.commits if not c.rewrite) == len(expected)
    got = table.rows()
    assert sorted(r["id"] for r in got) == sorted(expected), "no record lost or doubled"
    for r in got:
        want = {**expected[r["id"]], "ts_day": r["ts"].date()} if table_format == "delta" else expected[r["id"]]
        assert same(want, r), f"{want} != {r}"


def test_spark_reads_a_merge_of_int96_files_as_it_read_them(spark: Any, tmp_path: Path) -> None:
    """Spark's own Parquet files hold timestamps as INT96; a merge by Arrow writes them as INT64
    microseconds in UTC, which Spark reads as the same ``timestamp`` values."""
    frame = spark.createDataFrame(
        [(i, datetime(2026, 12, 1, 10, 0, i, 123456 * (i % 2), tzinfo=UTC)) for i in range(6)] + [(6, None)],
        "id long, ts timestamp",
    )
    frame.coalesce(1).write.option("spark.sql.parquet.outputTimestampType", "INT96").parquet(str(tmp_path / "written"))
    written = sorted((tmp_path / "written").glob("part-*.parquet"))
    assert pq.read_metadata(written[0]).schema.column(1).physical_type == "INT96", "as Spark writes them"
    target = tmp_path / "merged" / "part-0.parquet"
    merged = merge_files(
        StorageReader(local_roots=[str(tmp_path)]), [written[0].as_uri()] * 2, target.as_uri(), "snappy"
    )
    assert merged is not None and merged.rows == 14
    before = spark.read.parquet(str(written[0]))
    after = spark.read.parquet(str(target.parent))
    assert after.schema == before.schema
    assert sorted(after.collect()) == sorted(before.collect() * 2)


def test_an_iceberg_look_groups_small_files_by_partition_and_filters_each_group_alone(
    spark: Any, tmp_path: Path
) -> None:
    """The look at an Iceberg table's small files (``io.lakegate.iceberg.SmallFiles``, one scan of
    its manifests) groups them as the independent reader partitions them: a null apart from the
    text ``"null"``, each hour and bucket its own; and each group's filter (what Spark's
    ``rewriteDataFiles`` is given where Arrow leaves a group) plans that group's files alone."""
    table = Table(spark, tmp_path, "iceberg", "looked_clicks", "page", "hour(ts)", "bucket(2, id)")
    landing = Landing(table.root)
    next_offset = 0
    for hour in (1, 2):  # two rounds, each a file of every page in its hour; ids spread over both buckets
        rows = [
            {
                "id": next_offset + i,
                "ts": DAY + timedelta(hours=hour, minutes=i),
                "page": page,
                "offset": next_offset + i,
            }
            for i, page in enumerate([None, "null", "a", None, "null", "a", "a", None])
        ]
        path = landing.dir / f"clicks-0-{next_offset}"
        pq.write_table(pa.Table.from_pylist(rows, schema=landing.schema), path)
        end, size = next_offset + len(rows) - 1, path.stat().st_size
        f = DataFile(path.as_uri(), "clicks", 0, next_offset, end, size, FileFormat.PARQUET, len(rows))
        table.commit([PendingFile(f, f"m-{next_offset}", "sc-1")])
        next_offset += len(rows)

    maintainer = table.committer._parts()[4]
    small = maintainer.small_files(1 << 30)
    look = maintainer._look
    by_reader: dict[tuple[tuple[str, str | None], ...], set[str]] = {}
    for file_path, part, _ in table.files():
        by_reader.setdefault(tuple(sorted(part.items())), set()).add(file_path)
    looked = {key: {p for p, _ in files} for key, (_, files) in look.groups.items()}
    assert sorted(map(sorted, looked.values())) == sorted(map(sorted, by_reader.values())), (looked, by_reader)
    assert {len(sizes) for sizes in small.values()} == {1} and len(small) == len(by_reader) >= 6
    pages = {dict(key)["page"] for key in looked}
    assert pages == {None, "null", "a"}, pages
    hours = {dict(key)["ts_hour"] for key in looked}
    assert hours == {"2026-11-27-01", "2026-11-27-02"}, hours

    java_table = look.table
    for key, (index, files) in look.groups.items():
        tasks = java_table.newScan().filter(look.look.filter(index)).planFiles().iterator()
        planned = set()
        while tasks.hasNext():
            planned.add(str(tasks.next().file().location()))
        assert planned == {p for p, _ in files}, (key, planned, files)
