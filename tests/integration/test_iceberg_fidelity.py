"""The fidelity property on Iceberg tables (lakegate_stack.fidelity, append mode): random record
shapes, written as sinks write them (Parquet plain and enveloped, JSON lines, headerless CSV) and
committed in random rounds by the IcebergCommitter into a JDBC catalog, come back whole from
pyiceberg and from Spark, every field of every record. ``LAKEGATE_ICEBERG_FIDELITY_EXAMPLES``
examples run (12 by default, about 2.7 s each); half the tables are partitioned by a random spec. A
table partitioned by a column no record has typed yet waits for the round that types it, as on
Delta (tests/delta_helpers.commit_rounds)."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings

from commit_service.domain.partitioning import parse_spec
from commit_service.domain.plan import PendingFile
from commit_service.domain.state import TableState
from commit_service.iceberg.committer import IcebergCommitter
from commit_service.storage.reader import StorageReader
from lakegate_stack import fidelity
from lakegate_stack.iceberg_read import jdbc_rows
from tests.delta_helpers import commit_rounds
from tests.fixtures import ICEBERG_CATALOG

EXAMPLES = int(os.environ.get("LAKEGATE_ICEBERG_FIDELITY_EXAMPLES", "12"))
SLOW = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large]
TABLES = itertools.count()


@settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=SLOW)
@given(case=fidelity.cases(mode="append"))
@example(case=fidelity.late_typed_partition())
@example(case=fidelity.nul_partition_value())  # Iceberg escapes a partition's value in its paths: NUL is kept
def test_every_field_of_every_record_comes_back_from_an_iceberg_table(
    spark: Any, stack_dir: Path, tmp_path_factory: pytest.TempPathFactory, case: fidelity.Case
) -> None:
    root = tmp_path_factory.mktemp("iceberg-fidelity")
    name = f"fidelity.t{next(TABLES)}"
    committer = IcebergCommitter(
        lambda: spark,
        name,
        ICEBERG_CATALOG,
        (root / "t").as_uri(),
        StorageReader(local_roots=[str(root)]),
        partition_by=parse_spec(case.partition_by),
    )
    state = TableState(name)
    rounds = [
        [PendingFile(fidelity.write(f, root / "landing"), f"m-{n}-{i}", "sc") for i, f in enumerate(files)]
        for n, files in enumerate(case.rounds)
    ]
    if not commit_rounds(committer, state, rounds):  # no record typed a partition column: all still buffered
        assert fidelity.untyped(case, [f.column for f in committer.partition_by]), case.describe()
        return
    readers = {
        "pyiceberg": jdbc_rows(stack_dir / "iceberg-catalog.db", name),
        "spark": [r.asDict(recursive=True) for r in spark.table(f"{ICEBERG_CATALOG}.{name}").collect()],
    }
    problems = fidelity.differences(case, readers)
    assert not problems, f"{case.describe()}:\n" + "\n".join(problems[:20])
