"""A Delta table made outside Lakegate and partitioned, while its config's ``partition_by`` is
empty: every round, append or upsert, is refused before anything is written (a file added without
its partition's values would be hidden from every query filtering on them; a Delta table's layout
is fixed, and Lakegate does not repartition it). An Iceberg table adopts its own spec instead
(test_partitioned, test_partitioned_upsert)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from commit_service.delta.committer import DeltaCommitter
from commit_service.domain.plan import PendingFile
from commit_service.domain.state import TableState
from commit_service.domain.upsert import UpsertSpec
from commit_service.errors import TableLayoutError
from commit_service.storage.reader import StorageReader
from lakegate_core.protocol import DataFile, FileFormat
from tests.delta_helpers import commit_all


def sink_file(root: Path, upsert: bool) -> PendingFile:
    """Two records as the sink writes them: plain Parquet for an append table, in the envelope
    (``key,value,offset``) for an upsert table: each a file its table would take but for the layout."""
    path = root / "landing" / "orders-0-0"
    path.parent.mkdir(parents=True, exist_ok=True)
    values = [{"id": 1, "region": "eu"}, {"id": 2, "region": "us"}]
    if upsert:
        rows = [{"key": {"id": v["id"]}, "value": v, "offset": i} for i, v in enumerate(values)]
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        pq.write_table(pa.Table.from_pylist(values), path)
    f = DataFile(f"file://{path}", "orders", 0, 0, 1, path.stat().st_size, FileFormat.PARQUET, 2)
    return PendingFile(f, "m-0-0", "sc-1")


@pytest.mark.parametrize("upsert", [None, UpsertSpec(("id",))], ids=["append", "upsert"])
def test_a_delta_table_partitioned_outside_lakegate_is_refused_and_left_as_it_was(
    spark: Any, tmp_path: Path, upsert: UpsertSpec | None
) -> None:
    roots = StorageReader(local_roots=[str(tmp_path)])
    where = tmp_path / "t"
    spark.sql(f"CREATE TABLE delta.`{where}` (id BIGINT, region STRING) USING delta PARTITIONED BY (region)")
    committer = DeltaCommitter(spark, "t", str(where), roots, upsert=upsert)
    before = committer.snapshot()
    with pytest.raises(TableLayoutError, match=r"partitioned .*region.*partition_by"):
        commit_all(committer, TableState("t"), [sink_file(tmp_path, upsert is not None)])
    assert committer.snapshot() == before
