"""The start-up's read of an Iceberg table without Spark: which catalogs it reads, and what it
takes from a table's metadata (pure parts; tests/integration/test_iceberg_commit.py reads real
catalogs and compares with Spark's read)."""

from __future__ import annotations

from pathlib import Path

import pytest

from commit_service.config import CatalogType, IcebergCatalog, S3Settings
from commit_service.errors import TableWriteError
from commit_service.iceberg.catalog_read import CatalogReader, ancestry, offsets_of, pyiceberg_properties
from commit_service.iceberg.summary import OFFSETS, encode
from lakegate_core.types import TopicPartition


def test_a_rest_catalog_is_read_with_its_uri_warehouse_auth_and_the_s3_settings() -> None:
    catalog = IcebergCatalog(
        "lake",
        CatalogType.REST,
        "http://rest:8181",
        warehouse="s3a://b/wh",
        properties={"credential": "id:secret", "header.X-Tenant": "t1", "io-impl": "ignored"},
    )
    s3 = S3Settings(endpoint="http://s3:9000", region="eu-west-1", access_key="a", secret_key="s")
    assert pyiceberg_properties(catalog, s3) == {
        "type": "rest",
        "uri": "http://rest:8181",
        "warehouse": "s3a://b/wh",
        "credential": "id:secret",
        "header.X-Tenant": "t1",
        "s3.endpoint": "http://s3:9000",
        "s3.region": "eu-west-1",
        "s3.force-virtual-addressing": "false",
        "s3.access-key-id": "a",
        "s3.secret-access-key": "s",
    }


@pytest.mark.parametrize(
    ("uri", "url"),
    [("jdbc:sqlite:/var/cat.db", "sqlite:////var/cat.db"), ("jdbc:sqlite:file:/var/cat.db", "sqlite:////var/cat.db")],
)
def test_a_sqlite_jdbc_catalog_is_read_without_making_tables(uri: str, url: str) -> None:
    props = pyiceberg_properties(IcebergCatalog("lake", CatalogType.JDBC, uri, warehouse="file:///wh/"), None)
    assert props == {"type": "sql", "uri": url, "init_catalog_tables": "false"}


def test_another_jdbc_database_is_left_to_spark() -> None:
    catalog = IcebergCatalog("lake", CatalogType.JDBC, "jdbc:postgresql://db:5432/cat", warehouse="s3a://b/wh")
    assert pyiceberg_properties(catalog, S3Settings()) is None


def test_virtual_host_addressing_and_the_environments_credentials() -> None:
    catalog = IcebergCatalog("lake", CatalogType.REST, "https://rest")
    props = pyiceberg_properties(catalog, S3Settings(path_style=False))
    assert props is not None
    assert props["s3.force-virtual-addressing"] == "true"
    assert "s3.access-key-id" not in props and "s3.endpoint" not in props


OFFS = {TopicPartition("t", 0): 10, TopicPartition("t", 1): 7}
LATER = {TopicPartition("t", 0): 20, TopicPartition("t", 1): 7}


def metadata() -> dict[int, tuple[int | None, dict[str, str]]]:
    """1 <- 2 <- 3 <- 4: Lakegate's rounds at 1 and 2, a compaction at 3 and 4 without offsets;
    5, a branch off 1 that is not the head's ancestry, with other offsets."""
    return {
        1: (None, {OFFSETS: encode(OFFS)}),
        2: (1, {OFFSETS: encode(LATER)}),
        3: (2, {"operation": "replace"}),
        4: (3, {}),
        5: (1, {OFFSETS: encode({TopicPartition("t", 0): 99})}),
    }


def test_the_offsets_are_the_newest_lakegate_snapshots_in_the_heads_ancestry() -> None:
    snap, text = offsets_of(metadata(), 4, 9, "db.t")
    assert (snap.version, dict(snap.offsets), text) == (9, LATER, encode(LATER))
    assert dict(offsets_of(metadata(), 1, 1, "db.t")[0].offsets) == OFFS


def test_no_snapshot_is_version_0_and_no_lakegate_snapshot_no_offsets() -> None:
    assert offsets_of(metadata(), None, 0, "db.t")[0].version == 0
    snap, text = offsets_of({7: (None, {})}, 7, 1, "db.t")
    assert (snap.version, dict(snap.offsets), text) == (1, {}, None)


def test_an_expired_parent_or_a_loop_ends_the_walk() -> None:
    assert [len(s) for s in ancestry({3: (2, {"a": "1"})}, 3)] == [1]  # parent 2 expired
    assert len(list(ancestry({1: (2, {}), 2: (1, {})}, 1))) == 2


def test_offsets_written_by_hand_are_refused_as_spark_refuses_them() -> None:
    with pytest.raises(TableWriteError, match="not Lakegate's offsets"):
        offsets_of({1: (None, {OFFSETS: "[1, 2]"})}, 1, 1, "db.t")


def test_a_sqlite_catalog_not_made_yet_holds_no_table_and_is_not_made_by_the_read(tmp_path: Path) -> None:
    database = tmp_path / "catalog.db"
    catalog = IcebergCatalog("lake", CatalogType.JDBC, f"jdbc:sqlite:{database}", warehouse=tmp_path.as_uri())
    reader = CatalogReader.of(catalog, None)
    assert reader is not None
    snap, text = reader.read("db.t")
    assert (snap.version, text) == (-1, None)
    assert not database.exists(), "Iceberg's JDBC catalog makes the database, with its tables"
