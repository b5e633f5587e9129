"""A round's schema as Iceberg holds it, and which Parquet footers are added as they are."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from commit_service.iceberg.schema import addable_as_is, iceberg_schema, same_columns


def field(name: str, t: Any, nullable: bool = False) -> dict[str, Any]:
    return {"name": name, "type": t, "nullable": nullable, "metadata": {}}


def struct(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "struct", "fields": list(fields)}


def test_types_iceberg_lacks_become_the_ones_it_reads_as_and_every_column_is_optional() -> None:
    schema = struct(
        field("b", "byte"),
        field("s", "short"),
        field("tags", {"type": "array", "elementType": "varchar(3)", "containsNull": False}),
        field("m", {"type": "map", "keyType": "string", "valueType": "short", "valueContainsNull": False}),
        field("n", struct(field("x", "short"), field("d", "decimal(10,2)"))),
    )
    got = iceberg_schema(schema)
    assert [f["type"] for f in got["fields"][:2]] == ["integer", "integer"]
    assert got["fields"][2]["type"] == {"type": "array", "elementType": "string", "containsNull": True}
    assert got["fields"][3]["type"]["valueType"] == "integer" and got["fields"][3]["type"]["valueContainsNull"]
    assert got["fields"][4]["type"]["fields"][0]["type"] == "integer"
    assert got["fields"][4]["type"]["fields"][1]["type"] == "decimal(10,2)"
    assert all(f["nullable"] for f in got["fields"]) and all(f["nullable"] for f in got["fields"][4]["type"]["fields"])


def test_same_columns_ignores_order_nullability_and_metadata_but_not_types_or_names() -> None:
    a = struct(field("x", "long"), field("y", struct(field("p", "string"), field("q", "double"))))
    b = struct(field("y", struct(field("q", "double", True), field("p", "string"))), field("x", "long", True))
    assert same_columns(a, b)
    assert not same_columns(
        a, struct(field("x", "integer"), field("y", struct(field("p", "string"), field("q", "double"))))
    )
    assert not same_columns(a, struct(field("x", "long")))


def footer(*fields: pa.Field) -> str:
    return pa.schema(list(fields)).to_string(show_schema_metadata=False)


@pytest.mark.parametrize(
    ("arrow", "addable"),
    [
        (pa.int64(), True),
        (pa.int32(), True),
        (pa.string(), True),
        (pa.timestamp("us", tz="UTC"), True),
        (pa.timestamp("us"), True),
        (pa.struct([pa.field("a", pa.float64()), pa.field("b", pa.list_(pa.date32()))]), True),
        (pa.map_(pa.string(), pa.int64()), True),
        (pa.decimal128(10, 2), True),
        (pa.timestamp("ms", tz="UTC"), False),
        (pa.timestamp("ns"), False),
        (pa.timestamp("s"), False),
        (pa.uint32(), False),
        (pa.uint64(), False),
        (pa.int16(), False),
        (pa.int8(), False),
        (pa.struct([pa.field("deep", pa.list_(pa.timestamp("ms")))]), False),
        (pa.map_(pa.string(), pa.uint8()), False),
        (pa.large_string(), False),
        (pa.time32("ms"), False),
        (pa.duration("us"), False),
    ],
    ids=str,
)
def test_a_footer_is_added_as_it_is_only_with_types_every_iceberg_reader_reads(
    arrow: pa.DataType, addable: bool
) -> None:
    assert addable_as_is(footer(pa.field("id", pa.int64(), nullable=False), pa.field("v", arrow))) is addable


def test_an_unknown_footer_is_not_added_as_it_is() -> None:
    assert not addable_as_is(None)
