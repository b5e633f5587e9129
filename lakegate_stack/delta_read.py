"""Reading a Delta table's live rows with delta-rs, for the harnesses (chaos, tests) that check
what Lakegate committed with a reader independent of Spark.

``DeltaTable.to_pyarrow_table()`` (deltalake 1.x) refuses a table with the ``deletionVectors``
reader feature, which Lakegate's upsert tables have; delta-rs's query engine (DataFusion on
delta-kernel) reads such a table and applies the vectors, so every read here goes through it.
"""

from __future__ import annotations

from typing import Any


def live_rows(table: Any, columns: list[str] | None = None) -> list[dict[str, Any]]:
    """The live rows of ``table`` (a ``deltalake.DeltaTable``), deletion vectors applied."""
    import pyarrow as pa
    from deltalake import QueryBuilder

    select = ", ".join(f'"{c}"' for c in columns) if columns else "*"
    result = QueryBuilder().register("t", table).execute(f"SELECT {select} FROM t").read_all()
    return pa.table(result).to_pylist()  # type: ignore[no-any-return]
