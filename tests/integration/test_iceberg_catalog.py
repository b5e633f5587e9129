"""Apache Iceberg's REST catalog server (lakegate_stack.iceberg_catalog) read and written by pyiceberg.

The server runs on a JDBC catalog in a sqlite file, once with a local ``file:`` warehouse and once
with an ``s3a://`` warehouse on the S3 server; pyiceberg, the independent reader, makes a table,
appends rows of several types (nulls among them) and reads them back through a second client.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.types import DoubleType, LongType, StringType, StructType

from lakegate_stack import s3 as s3mod
from lakegate_stack.iceberg_catalog import IcebergRestCatalog
from lakegate_stack.s3 import S3Server

BUCKET = "iceberg-catalog"
NAMESPACE = "lakegate_it"

SCHEMA = pa.schema(
    [
        pa.field("name", pa.string()),
        pa.field("count", pa.int64()),
        pa.field("score", pa.float64()),
        pa.field("detail", pa.struct([pa.field("city", pa.string()), pa.field("zip", pa.int64())])),
    ]
)
ROWS: list[dict[str, Any]] = [
    {"name": "a", "count": 1, "score": 0.5, "detail": {"city": "Oslo", "zip": 150}},
    {"name": "b", "count": -(2**40), "score": -1e300, "detail": {"city": None, "zip": 9}},
    {"name": "ünï côdé", "count": None, "score": float("inf"), "detail": None},
    {"name": None, "count": 2**62, "score": None, "detail": {"city": "Lima", "zip": None}},
]


@dataclass(frozen=True)
class Case:
    """A running server, what a pyiceberg client needs besides its URI to read its warehouse, and
    how the server spells locations in that warehouse (Hadoop writes ``file:/x`` for ``file:///x``)."""

    server: IcebergRestCatalog
    client_props: dict[str, str]
    location_prefix: str

    def client(self) -> Catalog:
        return load_catalog("rest", type="rest", uri=self.server.uri, **self.client_props)


@pytest.fixture(scope="module")
def file_case(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Case]:
    workdir = tmp_path_factory.mktemp("iceberg-rest-file")
    server = IcebergRestCatalog(workdir, (workdir / "warehouse").as_uri()).start()
    yield Case(server, {}, f"file:{workdir / 'warehouse'}/")
    server.stop()


@pytest.fixture(scope="module")
def s3_case(tmp_path_factory: pytest.TempPathFactory, s3_server: S3Server) -> Iterator[Case]:
    s3_server.client().create_bucket(Bucket=BUCKET)
    workdir = tmp_path_factory.mktemp("iceberg-rest-s3")
    server = IcebergRestCatalog(workdir, f"s3a://{BUCKET}/warehouse", s3_server).start()
    props = {
        "s3.endpoint": s3_server.endpoint,
        "s3.access-key-id": s3mod.ACCESS_KEY,
        "s3.secret-access-key": s3mod.SECRET_KEY,
        "s3.region": s3mod.REGION,
    }
    yield Case(server, props, f"s3a://{BUCKET}/warehouse/")
    server.stop()


@pytest.fixture(params=["file", "s3"])
def case(request: pytest.FixtureRequest) -> Case:
    return request.getfixturevalue(f"{request.param}_case")  # type: ignore[no-any-return]


def read_rows(catalog: Catalog, identifier: str) -> list[dict[str, Any]]:
    rows = catalog.load_table(identifier).scan().to_arrow().to_pylist()
    return sorted(rows, key=lambda r: r["name"] or "")


def test_a_table_written_through_the_server_reads_back_value_for_value(case: Case) -> None:
    catalog = case.client()
    identifier = f"{NAMESPACE}.events"
    catalog.create_namespace_if_not_exists(NAMESPACE)
    table = catalog.create_table(identifier, schema=SCHEMA)
    table.append(pa.Table.from_pylist(ROWS, schema=SCHEMA))

    fields = {f.name: f.field_type for f in catalog.load_table(identifier).schema().fields}
    assert isinstance(fields["name"], StringType)
    assert isinstance(fields["count"], LongType)
    assert isinstance(fields["score"], DoubleType)
    assert isinstance(fields["detail"], StructType)
    expected = sorted(ROWS, key=lambda r: r["name"] or "")
    assert read_rows(catalog, identifier) == expected

    # A second client holds nothing of the first: what it sees is the server's.
    other = case.client()
    assert (NAMESPACE,) in other.list_namespaces()
    assert (NAMESPACE, "events") in other.list_tables(NAMESPACE)
    assert read_rows(other, identifier) == expected
    location = other.load_table(identifier).metadata_location
    assert location.startswith(f"{case.location_prefix}{NAMESPACE}/events/metadata/")

    # The pointer to the table's metadata is a row of the server's sqlite file.
    with sqlite3.connect(f"{case.server.database.as_uri()}?mode=ro", uri=True) as db:
        pointers = db.execute(
            "SELECT metadata_location FROM iceberg_tables WHERE table_namespace = ? AND table_name = ?",
            (NAMESPACE, "events"),
        ).fetchall()
    assert pointers == [(location,)]


def test_the_server_writes_metadata_into_the_s3_bucket(s3_case: Case, s3_server: S3Server) -> None:
    catalog = s3_case.client()
    catalog.create_namespace_if_not_exists("layout")
    table = catalog.create_table("layout.t", schema=SCHEMA)
    prefix = "warehouse/layout/"
    keys = [o["Key"] for o in s3_server.client().list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])]
    assert table.metadata_location == f"s3a://{BUCKET}/{keys[0]}"
    assert len(keys) == 1 and keys[0].endswith(".metadata.json")


def test_a_new_server_on_the_same_workdir_serves_the_same_tables(tmp_path: Path) -> None:
    warehouse = (tmp_path / "warehouse").as_uri()
    first = IcebergRestCatalog(tmp_path, warehouse).start()
    try:
        catalog = load_catalog("rest", type="rest", uri=first.uri)
        catalog.create_namespace("kept")
        catalog.create_table("kept.t", schema=SCHEMA).append(pa.Table.from_pylist(ROWS[:2], schema=SCHEMA))
    finally:
        first.stop()
    assert first.database.is_file() and (tmp_path / "iceberg-rest.log").is_file()
    second = IcebergRestCatalog(tmp_path, warehouse).start()
    try:
        assert read_rows(load_catalog("rest", type="rest", uri=second.uri), "kept.t") == ROWS[:2]
    finally:
        second.stop()
