"""Partitioned tables under test, whatever their format (test_partitioned, test_partitioned_upsert):
sink files of timed records, and a table's committer beside an independent reader of it."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from commit_service.delta.committer import DeltaCommitter
from commit_service.delta.partitions import DeltaPartitioning
from commit_service.domain.partitioning import parse_spec
from commit_service.domain.plan import PendingFile
from commit_service.domain.state import TableState
from commit_service.domain.upsert import UpsertSpec
from commit_service.iceberg.committer import IcebergCommitter
from commit_service.storage.reader import StorageReader
from lakegate_core.protocol import DataFile, FileFormat
from lakegate_stack.delta_read import live_rows
from lakegate_stack.iceberg_read import jdbc_metadata_location
from tests.delta_helpers import commit_all
from tests.fixtures import ICEBERG_CATALOG

TOPIC = "clicks"
DAY = datetime(2026, 11, 27, tzinfo=UTC)
SCHEMA = pa.schema(
    [("id", pa.int64()), ("ts", pa.timestamp("us", "UTC")), ("page", pa.string()), ("offset", pa.int64())]
)
WITH_TAGS = SCHEMA.append(pa.field("tags", pa.list_(pa.string())))  # a list column: merged by Spark, not Arrow


class Landing:
    """Files as the sink writes them, under ``<tmp>/t/landing`` (inside a Delta table's root)."""

    def __init__(self, root: Path, schema: pa.Schema = SCHEMA) -> None:
        self.dir = root / "landing"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.schema = schema

    def parquet(self, partition: int, start: int, times: list[datetime | None]) -> tuple[PendingFile, list]:
        rows = [
            {"id": partition * 1000 + start + i, "ts": t, "page": f"/p/{start + i}", "offset": start + i}
            for i, t in enumerate(times)
        ]
        if "tags" in self.schema.names:
            rows = [{**r, "tags": [f"t{r['id']}", None] if r["id"] % 3 else []} for r in rows]
        path = self.dir / f"{TOPIC}-{partition}-{start}"
        pq.write_table(pa.Table.from_pylist(rows, schema=self.schema), path)
        end = start + len(times) - 1
        f = DataFile(path.as_uri(), TOPIC, partition, start, end, path.stat().st_size, FileFormat.PARQUET, len(times))
        return PendingFile(f, f"m-{partition}-{start}", "sc-1"), rows

    def envelope_jsonl(self, partition: int, envelopes: list[dict[str, Any]]) -> PendingFile:
        path = self.dir / f"{TOPIC}-{partition}-{envelopes[0]['offset']}"
        path.write_text("".join(json.dumps(e) + "\n" for e in envelopes))
        first, last = envelopes[0]["offset"], envelopes[-1]["offset"]
        f = DataFile(path.as_uri(), TOPIC, partition, first, last, path.stat().st_size, FileFormat.JSONL)
        return PendingFile(f, f"m-{partition}-{first}", "sc-1")


class Table:
    """One partitioned table of either format: its committer and an independent reader of it."""

    def __init__(
        self, spark: Any, tmp_path: Path, table_format: str, name: str, *spec: str, upsert: UpsertSpec | None = None
    ) -> None:
        self.spark, self.format, self.tmp_path, self.upsert = spark, table_format, tmp_path, upsert
        self.root = tmp_path / name
        roots = StorageReader(local_roots=[str(tmp_path)])
        fields = parse_spec(spec)
        self.committer: Any
        if table_format == "delta":
            self.name = name
            self.committer = DeltaCommitter(
                spark, name, str(self.root), roots, partitioning=DeltaPartitioning(fields), upsert=upsert
            )
        else:
            self.name = f"lakegate_parts.{name}"
            location = (tmp_path / "iceberg" / name).as_uri()
            self.committer = IcebergCommitter(
                lambda: spark, self.name, ICEBERG_CATALOG, location, roots, partition_by=fields, upsert=upsert
            )
        self.state = TableState(name)

    def commit(self, files: list[PendingFile]) -> Any:
        return commit_all(self.committer, self.state, files)

    def _iceberg(self) -> Any:
        from pyiceberg.table import StaticTable

        database = Path(self.spark.conf.get(f"spark.sql.catalog.{ICEBERG_CATALOG}.uri").removeprefix("jdbc:sqlite:"))
        return StaticTable.from_metadata(jdbc_metadata_location(database, self.name))

    def rows(self, **where: str) -> list[dict[str, Any]]:
        """Every row (of the partitions ``where`` names) as the independent reader returns it."""
        if self.format == "delta" and self.upsert is not None:  # deletion vectors: delta-rs's SQL
            assert not where, "a partition filter on an upsert table: not needed yet"
            return live_rows(DeltaTable(str(self.root)))
        if self.format == "delta":
            parts = [(k, "=", v) for k, v in where.items()] or None
            return DeltaTable(str(self.root)).to_pyarrow_table(filters=parts).to_pylist()
        from pyiceberg.expressions import AlwaysTrue, And, EqualTo

        condition: Any = AlwaysTrue()
        for column, value in where.items():  # a filter on a source column: pruned by its partition
            condition = And(condition, EqualTo(column, value))
        return self._iceberg().scan(row_filter=condition).to_arrow().to_pylist()

    def files(self) -> list[tuple[str, dict[str, str | None], int]]:
        """Each live data file: its path, its partition's values as text, its records."""
        if self.format == "delta":
            dt = DeltaTable(str(self.root))
            actions = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
            names = dt.metadata().partition_columns
            return [(a["path"], {n: text(a[f"partition.{n}"]) for n in names}, a["num_records"]) for a in actions]
        files = self._iceberg().inspect.files().to_pylist()
        return [(f["file_path"], {k: text(v) for k, v in f["partition"].items()}, f["record_count"]) for f in files]

    def planned(self, ts_from: datetime) -> list[str]:
        """The files the independent reader plans for ``ts >= ts_from`` (pruned by partition)."""
        if self.format == "delta":
            dt = DeltaTable(str(self.root))
            return list(dt.file_uris(file_pruning_predicate=[("ts_day", ">=", ts_from.date().isoformat())]))
        from pyiceberg.expressions import GreaterThanOrEqual

        tasks = self._iceberg().scan(row_filter=GreaterThanOrEqual("ts", ts_from.isoformat())).plan_files()
        return [t.file.file_path for t in tasks]

    def spark_frame(self) -> Any:
        if self.format == "delta":
            return self.spark.read.format("delta").load(str(self.root))
        return self.spark.table(f"{ICEBERG_CATALOG}.{self.name}")


def text(value: Any) -> str | None:
    return None if value is None else value.isoformat() if isinstance(value, date) else str(value)
