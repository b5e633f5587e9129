"""IcebergCommitter on real Spark + Iceberg 1.11 (a JDBC catalog on a sqlite file): rounds of
JSON lines and Parquet land whole, the offsets ride in each snapshot's summary, a writer planned
from old offsets never lands twice, the table grows, maintenance keeps the offsets.

Every table is read back two ways: Spark through the catalog, and pyiceberg (the independent
reader) from the metadata file the catalog's database points at; every field of every record is
compared with what was written.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from commit_service.domain.maintenance import MaintenancePolicy
from commit_service.domain.plan import PendingFile
from commit_service.domain.state import TableState
from commit_service.errors import OffsetsMovedError, SchemaMismatchError
from commit_service.iceberg import datafiles
from commit_service.iceberg.catalog_read import CatalogReader
from commit_service.iceberg.committer import IcebergCommitter
from commit_service.iceberg.summary import COMMIT_ID, OFFSETS
from commit_service.ports import TableSnapshot
from commit_service.storage.reader import StorageReader
from lakegate_core.protocol import DataFile, FileFormat
from lakegate_core.status import MaintenanceKind
from lakegate_core.types import TopicPartition
from lakegate_stack.fidelity import same
from lakegate_stack.iceberg_read import jdbc_rows
from tests.delta_helpers import commit_all
from tests.fixtures import ICEBERG_CATALOG, iceberg_jdbc_catalog

TOPIC = "orders"


class Files:
    """Sink files of one topic under ``root``, and every record written, by id."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.written: dict[int, dict[str, Any]] = {}
        self.sent: list[PendingFile] = []

    def paths(self, fmt: FileFormat) -> list[str]:
        return [p.file.path for p in self.sent if p.file.format is fmt]

    def _pending(self, path: Path, partition: int, start: int, count: int, fmt: FileFormat) -> PendingFile:
        f = DataFile(path.as_uri(), TOPIC, partition, start, start + count - 1, path.stat().st_size, fmt, count)
        self.sent.append(PendingFile(f, f"m-{partition}-{start}", "sc-1"))
        return self.sent[-1]

    def jsonl(self, partition: int, start: int, values: list[dict[str, Any]]) -> PendingFile:
        path = self.root / f"{TOPIC}-{partition}-{start:020d}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps({**v, "offset": start + i}) + "\n" for i, v in enumerate(values)))
        for i, v in enumerate(values):
            self.written[v["id"]] = {**v, "offset": start + i}
        return self._pending(path, partition, start, len(values), FileFormat.JSONL)

    def parquet(self, partition: int, start: int, values: list[dict[str, Any]], schema: pa.Schema) -> PendingFile:
        path = self.root / f"{TOPIC}-{partition}-{start:020d}-{len(self.sent)}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = [{**v, "offset": start + i} for i, v in enumerate(values)]
        pq.write_table(pa.Table.from_pylist(rows, schema.append(pa.field("offset", pa.int64()))), path)
        for r in rows:
            self.written[r["id"]] = r
        return self._pending(path, partition, start, len(values), FileFormat.PARQUET)


def committer(spark: Any, name: str, tmp_path: Path) -> IcebergCommitter:
    return IcebergCommitter(
        lambda: spark, name, ICEBERG_CATALOG, (tmp_path / "tables" / name).as_uri(), StorageReader()
    )


def spark_rows(spark: Any, name: str) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in spark.table(f"{ICEBERG_CATALOG}.{name}").collect()]


def pyiceberg_rows(stack_dir: Path, name: str) -> list[dict[str, Any]]:
    return jdbc_rows(stack_dir / "iceberg-catalog.db", name)


def utc(value: Any) -> Any:
    """``value`` with every timestamp as naive UTC (Spark returns them so, pyiceberg with a zone)."""
    if isinstance(value, dict):
        return {k: utc(v) for k, v in value.items()}
    if isinstance(value, list):
        return [utc(v) for v in value]
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def assert_holds(spark: Any, stack_dir: Path, name: str, written: dict[int, dict[str, Any]]) -> None:
    """Both readers return exactly ``written``: one row per id, every field equal (a field the
    record lacks reads as null)."""
    for reader, rows in (("spark", spark_rows(spark, name)), ("pyiceberg", pyiceberg_rows(stack_dir, name))):
        by_id = {r["id"]: r for r in rows}
        assert len(by_id) == len(rows) == len(written), f"{reader}: {len(rows)} rows, {len(written)} written"
        for rid, record in written.items():
            assert same(utc(record), utc(by_id[rid])), f"{reader}: id {rid}: wrote {record}, read {by_id[rid]}"


def data_file_paths(spark: Any, name: str) -> set[str]:
    """The data files of the table's current snapshot, as URIs (``file:///...``)."""
    paths = {r[0] for r in spark.sql(f"SELECT file_path FROM {ICEBERG_CATALOG}.{name}.files").collect()}
    return {
        p.replace("file:/", "file:///", 1) if p.startswith("file:/") and not p.startswith("file:///") else p
        for p in paths
    }


def summary(spark: Any, name: str) -> dict[str, str]:
    table = spark._jsparkSession.sessionState().catalogManager().catalog(ICEBERG_CATALOG).icebergCatalog()
    loaded = table.loadTable(spark._jvm.org.apache.iceberg.catalog.TableIdentifier.parse(name))
    snap = loaded.currentSnapshot()
    return {k: snap.summary().get(k) for k in (OFFSETS, COMMIT_ID, "added-records", "total-records")}


NESTED = pa.struct([pa.field("x", pa.int64()), pa.field("tag", pa.string())])
PARQUET_SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string()), pa.field("nested", NESTED)])


def test_rounds_of_json_lines_and_parquet_land_whole_with_the_offsets_in_the_snapshot(
    spark: Any, stack_dir: Path, tmp_path: Path
) -> None:
    name = "lakegate_it.whole"
    files = Files(tmp_path / "landing")
    c = committer(spark, name, tmp_path)
    assert c.snapshot().version == -1
    state = TableState(name)
    first = commit_all(
        c,
        state,
        [
            files.jsonl(0, 0, [{"id": 1, "name": "ä", "nested": {"x": 1, "tag": None}}, {"id": 2, "name": None}]),
            files.parquet(
                1,
                0,
                [{"id": 3, "name": "p", "nested": {"x": -(2**40), "tag": "t"}}, {"id": 4, "name": "", "nested": None}],
                PARQUET_SCHEMA,
            ),
        ],
    )
    assert first.records == 4
    sink_parquet = next(iter(files.paths(FileFormat.PARQUET)))
    assert sink_parquet in data_file_paths(spark, name), "a fitting Parquet file is added where it lies"
    got = summary(spark, name)
    assert json.loads(got[OFFSETS]) == {TOPIC: {"0": 2, "1": 2}}
    assert got[COMMIT_ID] == first.commit_id and got["added-records"] == "4"
    assert_holds(spark, stack_dir, name, files.written)

    # a new top-level column and a new nested field: the table grows, older rows read them as null
    second = commit_all(
        c,
        state,
        [files.jsonl(0, 2, [{"id": 5, "name": "n", "nested": {"x": 7, "tag": "z", "deep": {"k": 1.5}}, "more": True}])],
    )
    assert second.version == first.version + 1
    assert json.loads(summary(spark, name)[OFFSETS]) == {TOPIC: {"0": 3, "1": 2}}
    assert_holds(spark, stack_dir, name, files.written)

    again = committer(spark, name, tmp_path).snapshot()  # a restarted service reads them back
    assert dict(again.offsets) == {TopicPartition(TOPIC, 0): 3, TopicPartition(TOPIC, 1): 2}
    assert again.version == second.version
    # and reads them at start-up from the catalog's database and the metadata file, before Spark is up
    assert started_without_spark(stack_dir, name, tmp_path) == again
    assert started_without_spark(stack_dir, "lakegate_it.none_yet", tmp_path).version == -1


def started_without_spark(stack_dir: Path, name: str, tmp_path: Path) -> TableSnapshot:
    reader = CatalogReader.of(iceberg_jdbc_catalog(stack_dir), None)
    assert reader is not None

    def no_spark() -> Any:
        raise AssertionError("the start-up read started Spark")

    location = (tmp_path / "tables" / name).as_uri()
    return IcebergCommitter(
        no_spark, name, ICEBERG_CATALOG, location, StorageReader(), catalog_reader=reader
    ).snapshot()


def test_a_writer_planned_from_old_offsets_never_lands_twice(
    spark: Any, stack_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two services on one table, both planning the same round: the one that is overtaken between
    reading the offsets and committing (its data already written) is refused by the check inside
    Iceberg's commit, and nothing of its round is in the table."""
    name = "lakegate_it.race"
    files = Files(tmp_path / "landing")
    round_files = [files.jsonl(0, 0, [{"id": i, "name": f"r{i}"} for i in range(3)])]
    alive, zombie = committer(spark, name, tmp_path), committer(spark, name, tmp_path)
    commit_all(alive, TableState(name), [files.jsonl(1, 0, [{"id": 100, "name": "seed"}])])

    zombie_state, alive_state = TableState(name), TableState(name)
    write = datafiles.write
    overtaken: list[Any] = []
    inside: list[bool] = []

    def write_then_be_overtaken(frame: Any, directory: str, split: Any = ()) -> None:
        write(frame, directory, split)
        if not inside:  # the zombie has read the offsets and written its files: now the other lands
            inside.append(True)
            overtaken.append(commit_all(alive, alive_state, round_files))

    monkeypatch.setattr(datafiles, "write", write_then_be_overtaken)
    with pytest.raises(OffsetsMovedError) as moved:
        commit_all(zombie, zombie_state, round_files)
    assert overtaken, "the other writer did not commit inside the zombie's round"
    assert moved.value.offsets[TopicPartition(TOPIC, 0)] == 3
    assert_holds(spark, stack_dir, name, files.written)  # each record once

    # planned again from stale state (no overtaking now): refused before anything is written
    monkeypatch.setattr(datafiles, "write", write)
    with pytest.raises(OffsetsMovedError):
        commit_all(zombie, TableState(name), round_files)
    assert_holds(spark, stack_dir, name, files.written)


def test_a_file_that_conflicts_with_the_table_is_refused_naming_the_column(spark: Any, tmp_path: Path) -> None:
    name = "lakegate_it.conflict"
    files = Files(tmp_path / "landing")
    c = committer(spark, name, tmp_path)
    commit_all(c, TableState(name), [files.jsonl(0, 0, [{"id": 1, "name": "a", "nested": {"x": 1}}])])
    with pytest.raises(SchemaMismatchError) as refused:
        commit_all(c, TableState(name, {TopicPartition(TOPIC, 0): 1}), [files.jsonl(0, 1, [{"id": 2, "nested": 5}])])
    assert "nested" in str(refused.value) and "struct" in str(refused.value)


def test_compaction_and_vacuum_keep_every_record_and_the_offsets(spark: Any, stack_dir: Path, tmp_path: Path) -> None:
    name = "lakegate_it.maintained"
    files = Files(tmp_path / "landing")
    c = committer(spark, name, tmp_path)
    state = TableState(name)
    for start in range(0, 8, 2):
        commit_all(c, state, [files.jsonl(0, start, [{"id": start, "name": "a"}, {"id": start + 1, "name": "b"}])])
    assert c.file_count() >= 4
    policy = MaintenancePolicy(enabled=True, compact_min_files=2, vacuum_retention_hours=0.0)
    compacted = c.maintain(MaintenanceKind.COMPACT, policy)
    assert compacted.files_after < compacted.files_before, compacted
    c.maintain(MaintenanceKind.VACUUM, policy)
    assert dict(c.snapshot().offsets) == {TopicPartition(TOPIC, 0): 8}
    assert_holds(spark, stack_dir, name, files.written)
    commit_all(c, state, [files.jsonl(0, 8, [{"id": 8, "name": "after"}])])
    assert dict(c.snapshot().offsets) == {TopicPartition(TOPIC, 0): 9}
    assert_holds(spark, stack_dir, name, files.written)


AT = datetime(2026, 11, 26, 12, 30, 1, 123000, tzinfo=UTC)


@pytest.mark.parametrize(
    ("arrow_type", "value"),
    [(pa.timestamp("ms", tz="UTC"), AT), (pa.uint32(), 2**32 - 1)],
    ids=["timestamp-ms", "uint32"],
)
def test_parquet_iceberg_cannot_read_as_it_is_is_rewritten_with_every_value(
    spark: Any, stack_dir: Path, tmp_path: Path, arrow_type: pa.DataType, value: Any
) -> None:
    """A column of a type some Iceberg reader does not read as the table's (timestamps in other
    units than microseconds, unsigned integers): its file is rewritten, not added, and its values
    come back."""
    name = "lakegate_it.rewritten_" + re.sub(r"\W+", "_", str(arrow_type))
    files = Files(tmp_path / "landing")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", arrow_type)])
    c = committer(spark, name, tmp_path)
    commit_all(c, TableState(name), [files.parquet(0, 0, [{"id": 1, "v": value}, {"id": 2, "v": None}], schema)])
    assert not set(files.paths(FileFormat.PARQUET)) & data_file_paths(spark, name)
    assert_holds(spark, stack_dir, name, files.written)


def test_a_table_created_outside_lakegate_is_given_a_name_mapping(spark: Any, stack_dir: Path, tmp_path: Path) -> None:
    """A table made by Spark SQL carries no name mapping; the sink's Parquet files carry no field
    ids. Lakegate maps the names before it adds the files, so every reader finds every value."""
    name = "lakegate_it.precreated"
    spark.sql(
        f"CREATE TABLE {ICEBERG_CATALOG}.{name} "
        "(id BIGINT, name STRING, nested STRUCT<x: BIGINT, tag: STRING>, offset BIGINT) USING iceberg"
    )
    files = Files(tmp_path / "landing")
    c = committer(spark, name, tmp_path)
    rows = [{"id": 1, "name": "a", "nested": {"x": 1, "tag": "t"}}, {"id": 2, "name": None, "nested": None}]
    commit_all(c, TableState(name), [files.parquet(0, 0, rows, PARQUET_SCHEMA)])
    assert set(files.paths(FileFormat.PARQUET)) <= data_file_paths(spark, name)  # added as they are
    assert_holds(spark, stack_dir, name, files.written)
