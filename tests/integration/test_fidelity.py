"""The fidelity property through the real commit path (Spark + Delta, on local files and on the S3
server): random record shapes, written as sinks write them and committed in random rounds, come
back whole from delta-rs and from Spark, every field of every record (lakegate_stack.fidelity).
Half the examples' tables are partitioned by a random spec; a file whose record would put NUL in a
text partition's value is refused by name (commit_service.delta.path_guard), and the rounds
before it must still come back whole. ``LAKEGATE_FIDELITY_EXAMPLES`` sets how many examples run on
local files (32 by default, new ones each run, and two pinned: 208 s in the 2026-12-07 CI run,
about 6 s an example) and a quarter of that on the S3 server (8 and one pinned, 46 s); 40 in all;
``scripts/fidelity`` runs the thousands (docs/performance.md)"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, example, given, settings

from commit_service.config import S3Settings
from commit_service.delta.committer import DeltaCommitter
from commit_service.delta.partitions import DeltaPartitioning
from commit_service.domain.partitioning import PartitionField, Transform, parse_spec
from commit_service.domain.plan import PendingFile
from commit_service.domain.state import TableState
from commit_service.domain.upsert import Cdc, UpsertSpec
from commit_service.errors import DataFileError
from commit_service.storage.reader import StorageReader
from lakegate_core.protocol import DataFile
from lakegate_stack import fidelity
from lakegate_stack import s3 as s3mod
from lakegate_stack.delta_read import live_rows
from lakegate_stack.s3 import S3Server
from tests.delta_helpers import commit_rounds, delta_rs_options

EXAMPLES = int(os.environ.get("LAKEGATE_FIDELITY_EXAMPLES", "32"))
SPECS = {
    "append": None,
    "upsert": UpsertSpec(("k",), delete_on_tombstone=True),
    "debezium": UpsertSpec(("k",), cdc=Cdc.DEBEZIUM),
}
SLOW = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large]
Put = Callable[[fidelity.SinkFile], DataFile]  # stores a sink file, returns its manifest entry


def run_case(spark: Any, storage: StorageReader, table: str, put: Put, case: fidelity.Case, **rs: Any) -> list[str]:
    """Commit ``case`` into a new table at ``table``; the differences the readers show. Delta's
    cached logs are let go after it (their snapshots' states are cached in Spark's memory): every
    example makes a table, and some 550 of them filled a 2 GiB driver's heap, each example then
    spending its time in the JVM's full collections."""
    try:
        return _run_case(spark, storage, table, put, case, **rs)
    finally:
        spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()


def _run_case(spark: Any, storage: StorageReader, table: str, put: Put, case: fidelity.Case, **rs: Any) -> list[str]:
    spec = parse_spec(case.partition_by)
    partitioning = DeltaPartitioning(spec)
    committer = DeltaCommitter(spark, "t", table, storage, upsert=SPECS[case.mode], partitioning=partitioning)
    state = TableState("t")
    rounds = [
        [PendingFile(put(f), f"m-{n}-{i}", "sc") for i, f in enumerate(files)] for n, files in enumerate(case.rounds)
    ]
    refused: list[DataFileError] = []
    landed = commit_rounds(committer, state, rounds, refused)
    holding = nul_files(case, spec)
    if refused:  # only a file that puts NUL in a text partition's value (a path cannot hold it)
        assert any(refused[0].path.endswith(n) for n in holding), f"{case.describe()}: refused {refused[0]}"
        case = fidelity.Case(case.mode, case.rounds[:landed], case.partition_by)  # what landed before it
    else:  # every append row is written: one holding such a value is always refused
        assert case.mode != "append" or not holding, f"{case.describe()}: {sorted(holding)} were committed"
    if not landed:  # no record ever typed some partition column: nothing lost, all still buffered
        assert refused or fidelity.untyped(case, [f.column for f in spec]), f"rows, no table: {case.describe()}"
        return []
    spark_rows = [
        r.asDict(recursive=True) for r in spark.read.format("delta").load(table.replace("s3://", "s3a://")).collect()
    ]
    readers = {"delta-rs": live_rows(DeltaTable(table, **rs)), "spark": spark_rows}
    return fidelity.differences(case, readers, frozenset(partitioning.generated_names))


def nul_files(case: fidelity.Case, spec: Sequence[PartitionField]) -> set[str]:
    """The names of the files of ``case`` a record of which puts NUL in a text partition's value
    (a string's identity, or its truncation)."""
    out = set()
    for f in (f for files in case.rounds for f in files):
        for e in f.envelopes:
            row = e["value"] if case.mode != "debezium" or e["value"] is None else e["value"]["after"]
            for p in spec:
                value = (row or {}).get(p.column)
                if not isinstance(value, str) or p.transform not in (Transform.IDENTITY, Transform.TRUNCATE):
                    continue
                if "\x00" in (value if p.width is None else value[: p.width]):
                    out.add(fidelity.name(f))
    return out


@settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=SLOW)
@given(case=fidelity.cases())
@example(case=fidelity.late_typed_partition())
@example(case=fidelity.nul_partition_value())
def test_every_field_of_every_record_comes_back(
    spark: Any, tmp_path_factory: pytest.TempPathFactory, case: fidelity.Case
) -> None:
    root = tmp_path_factory.mktemp("fidelity")
    storage = StorageReader(local_roots=[str(root)])
    problems = run_case(spark, storage, str(root / "t"), lambda f: fidelity.write(f, root / "landing"), case)
    assert not problems, f"{case.describe()}:\n" + "\n".join(problems[:20])


TABLES = itertools.count()


@settings(max_examples=max(1, EXAMPLES // 4), deadline=None, database=None, suppress_health_check=SLOW)
@given(case=fidelity.cases())
@example(case=fidelity.nul_partition_value())  # S3 stores the raw key, but S3A's listing of it retried for minutes
def test_every_field_of_every_record_comes_back_on_s3(spark: Any, s3_server: S3Server, case: fidelity.Case) -> None:
    s3 = s3_server.client()
    bucket = "lake-fidelity"
    if bucket not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
        s3.create_bucket(Bucket=bucket)
    n = next(TABLES)
    storage = StorageReader(S3Settings(s3_server.endpoint, access_key=s3mod.ACCESS_KEY, secret_key=s3mod.SECRET_KEY))

    def put(f: fidelity.SinkFile) -> DataFile:
        data, csv = fidelity.encode(f)
        key = f"landing/{n}/{fidelity.name(f)}"
        s3.put_object(Bucket=bucket, Key=key, Body=data)
        return fidelity.data_file(f, f"s3a://{bucket}/{key}", len(data), csv)

    options = delta_rs_options(s3_server.endpoint)
    problems = run_case(spark, storage, f"s3://{bucket}/t{n}", put, case, storage_options=options)
    assert not problems, f"{case.describe()}:\n" + "\n".join(problems[:20])
