"""The path model end to end: arbitrary object keys either refused at intake or committed so that
delta-spark AND delta-rs read exactly that object (issue: a space in a name wedged a table).

Each hypothesis example writes one small Parquet file per generated key (a column ``src`` holds
the key itself), sends each key percent-encoded as a sidecar does, commits every accepted one in
one Delta commit, and reads the table back with both readers: every accepted key's row, once.
"""

from __future__ import annotations

import io
import itertools
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commit_service.config import S3Settings
from commit_service.delta.committer import DeltaCommitter
from commit_service.domain.paths import UnsafePathError, normalize_uri
from commit_service.domain.plan import PendingFile
from commit_service.domain.state import TableState
from commit_service.errors import DataFileError
from commit_service.storage.reader import StorageReader
from lakegate_core.protocol import DataFile, FileFormat
from lakegate_stack import s3 as s3mod
from lakegate_stack.s3 import S3Server
from tests.delta_helpers import commit_all, delta_rs_options

# What real sinks put in keys (Confluent's '+' and '=', spaces, '%', unicode) and what attackers try.
SEGMENT = st.lists(
    st.sampled_from(list("ab1 %+=#?&:@,;!$'()~.-_é中\u00a0") + ["%25", "%2e", "%252e", "..", "%20"]),
    min_size=1,
    max_size=8,
).map("".join)
KEYS = st.lists(st.lists(SEGMENT, min_size=1, max_size=3).map("/".join), min_size=1, max_size=10, unique=True)
_TABLES = itertools.count()


def _parquet(key: str) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.table({"src": [key], "offset": pa.array([0], pa.int64())}), buf)
    return buf.getvalue()


def _accepted(sent: str) -> str | None:
    try:
        return normalize_uri(sent)
    except UnsafePathError:  # the HTTP layer answers this with a 400 naming the field
        return None


def _commit_and_read(spark: Any, committer: DeltaCommitter, files: list[PendingFile]) -> list[str]:
    if files:
        commit_all(committer, TableState("t"), files)
    return sorted(r.src for r in spark.read.format("delta").load(committer.location).select("src").collect())


def _pending(uri: str, i: int, size: int) -> PendingFile:
    return PendingFile(DataFile(uri, "t", i, 0, 0, size, FileFormat.PARQUET, 1), f"m{i}", "sc")


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=KEYS)
def test_local_keys_are_refused_or_read_exactly(spark: Any, tmp_path: Path, keys: list[str]) -> None:
    table = tmp_path / f"t{next(_TABLES)}"
    committer = DeltaCommitter(spark, "t", str(table), StorageReader(local_roots=[f"file://{table}/"]))
    files, expected = [], []
    for i, key in enumerate(keys):
        uri = _accepted(f"file://{quote(str(table / 'data'), safe='/')}/{quote(key, safe='/')}")
        if uri is None:
            continue
        target = table / "data" / key
        if target.is_dir() or any(p.is_file() for p in target.parents):
            continue  # keys 'a' and 'a/b': a disk holds only one of them (S3 holds both, below)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = _parquet(key)
        target.write_bytes(data)
        files.append(_pending(uri, i, len(data)))
        expected.append(key)
    if not files:
        return
    assert _commit_and_read(spark, committer, files) == sorted(expected)
    assert sorted(DeltaTable(str(table)).to_pyarrow_table().column("src").to_pylist()) == sorted(expected)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=KEYS)
def test_s3_keys_are_refused_or_read_exactly(spark: Any, s3_server: S3Server, keys: list[str]) -> None:
    s3 = s3_server.client()
    bucket = "paths"
    if bucket not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
        s3.create_bucket(Bucket=bucket)
    table = f"t{next(_TABLES)}"
    storage = StorageReader(S3Settings(s3_server.endpoint, access_key=s3mod.ACCESS_KEY, secret_key=s3mod.SECRET_KEY))
    committer = DeltaCommitter(spark, "t", f"s3://{bucket}/{table}", storage)
    files, expected = [], []
    for i, key in enumerate(keys):
        uri = _accepted(f"s3a://{bucket}/{table}/data/{quote(key, safe='/')}")
        if uri is None:
            continue
        data = _parquet(key)
        s3.put_object(Bucket=bucket, Key=f"{table}/data/{key}", Body=data)
        files.append(_pending(uri, i, len(data)))
        expected.append(key)
    if not files:
        return
    assert _commit_and_read(spark, committer, files) == sorted(expected)
    rs = DeltaTable(f"s3://{bucket}/{table}", storage_options=delta_rs_options(s3_server.endpoint))
    assert sorted(rs.to_pyarrow_table().column("src").to_pylist()) == sorted(expected)


def test_symlinks_and_linked_folders_are_refused(spark: Any, tmp_path: Path) -> None:
    """A link inside the root to a file outside (``/etc/passwd`` in the report) is never read."""
    table, outside = tmp_path / "t", tmp_path / "outside"
    (table / "data").mkdir(parents=True)
    outside.mkdir()
    secret = outside / "secret.parquet"
    secret.write_bytes(_parquet("secret"))
    os.symlink(secret, table / "data" / "t-0-0")
    os.symlink(outside, table / "data" / "linked")
    storage = StorageReader(local_roots=[f"file://{table}/"])
    committer = DeltaCommitter(spark, "t", str(table), storage)
    size = secret.stat().st_size
    with pytest.raises(DataFileError, match="symbolic link"):
        commit_all(committer, TableState("t"), [_pending(f"file://{table}/data/t-0-0", 0, size)])
    with pytest.raises(DataFileError, match="outside the allowed roots"):
        commit_all(committer, TableState("t"), [_pending(f"file://{table}/data/linked/secret.parquet", 0, size)])
    assert committer.snapshot().version == -1  # nothing was committed
