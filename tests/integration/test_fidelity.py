"""The fidelity property through the real commit path (Spark + Delta on local files): random record
shapes, written as sinks write them and committed in random rounds, come back whole from delta-rs
and from Spark, every field of every record (lakegate_stack.fidelity). ``LAKEGATE_FIDELITY_EXAMPLES``
sets how many examples (100 by default); ``scripts/fidelity`` runs more."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings

from commit_service.delta_commit import DeltaCommitter
from commit_service.state import PendingFile, TableState
from commit_service.storage import StorageReader
from commit_service.upsert import Cdc, UpsertSpec
from lakegate_stack import fidelity
from lakegate_stack.delta_read import live_rows
from tests.delta_helpers import commit_all

EXAMPLES = int(os.environ.get("LAKEGATE_FIDELITY_EXAMPLES", "100"))
SPECS = {
    "append": None,
    "upsert": UpsertSpec(("k",), delete_on_tombstone=True),
    "debezium": UpsertSpec(("k",), cdc=Cdc.DEBEZIUM),
}


def run_case(spark: Any, root: Path, case: fidelity.Case) -> list[str]:
    """Commit ``case`` into a new table under ``root``; the differences the readers show."""
    table = root / "t"
    committer = DeltaCommitter(spark, "t", str(table), StorageReader(local_roots=[str(root)]), upsert=SPECS[case.mode])
    state = TableState("t")
    for n, files in enumerate(case.rounds):
        pending = [PendingFile(fidelity.write(f, root / "landing"), f"m-{n}-{i}", "sc") for i, f in enumerate(files)]
        commit_all(committer, state, pending)
    spark_rows = [r.asDict(recursive=True) for r in spark.read.format("delta").load(str(table)).collect()]
    return fidelity.differences(case, {"delta-rs": live_rows(DeltaTable(str(table))), "spark": spark_rows})


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
@given(case=fidelity.cases())
def test_every_field_of_every_record_comes_back(
    spark: Any, tmp_path_factory: pytest.TempPathFactory, case: fidelity.Case
) -> None:
    problems = run_case(spark, tmp_path_factory.mktemp("fidelity"), case)
    assert not problems, f"{case.describe()}:\n" + "\n".join(problems[:20])
