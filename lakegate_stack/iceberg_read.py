"""Reading an Iceberg table's rows with pyiceberg, for the harnesses (tests, the e2e and chaos
checks) that verify what Lakegate committed with a reader independent of Spark and of Lakegate.

Two ways in: through a REST catalog (:func:`rest_rows`), or, for a JDBC catalog, from the
metadata file its database points at (:func:`jdbc_rows`: the catalog's own table, read with
sqlite3, then ``StaticTable``), so no Lakegate or Spark code is on the reading path.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any


def jdbc_metadata_location(database: Path, name: str) -> str:
    """The current metadata file of table ``name`` (``namespace.table``) in a JDBC catalog's sqlite file."""
    namespace, table = name.split(".")
    with sqlite3.connect(database) as db:
        row = db.execute(
            "SELECT metadata_location FROM iceberg_tables WHERE table_namespace = ? AND table_name = ?",
            (namespace, table),
        ).fetchone()
    if row is None:
        raise LookupError(f"no table {name} in the catalog database {database}")
    return str(row[0])


def jdbc_rows(database: Path, name: str, properties: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Every row of ``name``, read by pyiceberg from the metadata its JDBC catalog names."""
    from pyiceberg.table import StaticTable

    table = StaticTable.from_metadata(jdbc_metadata_location(database, name), properties or {})
    rows: list[dict[str, Any]] = table.scan().to_arrow().to_pylist()
    return rows


def rest_rows(uri: str, name: str, properties: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Every row of ``name``, read by pyiceberg through the REST catalog at ``uri``."""
    from pyiceberg.catalog import load_catalog

    catalog = load_catalog("lakegate-check", type="rest", uri=uri, **(properties or {}))
    rows: list[dict[str, Any]] = catalog.load_table(name).scan().to_arrow().to_pylist()
    return rows
