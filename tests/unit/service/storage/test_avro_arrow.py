"""Avro container files decoded to Arrow by DataFusion (``storage/avro_arrow.py``), checked value by
value against fastavro's decoding of the same files, and the writer schemas left to Spark's Avro
source (``domain/avro_files.arrow_refusal``).

The Arrow types asked for are the ones Spark's Avro source gives each Avro type (``spark_type``
below); that Spark reads the files so is held by the fidelity suite and by
``tests/integration/test_arrow_reads.py``.
"""

from __future__ import annotations

import datetime
import decimal
import io
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commit_service.domain.avro_files import arrow_refusal
from commit_service.storage.arrow_tables import ArrowReadError, spark_typed
from commit_service.storage.avro_arrow import FILE_COLUMN, AvroSpool

UTC = datetime.timezone.utc
PRIMITIVES: dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]] = {
    "boolean": (pa.bool_(), st.booleans()),
    "int": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "long": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "float": (pa.float32(), st.floats(width=32, allow_nan=False)),
    "double": (pa.float64(), st.floats(allow_nan=False)),
    "bytes": (pa.binary(), st.binary(max_size=8)),
    "string": (pa.string(), st.text(st.characters(codec="utf-8"), max_size=6)),
}
TIMES = st.datetimes(datetime.datetime(1900, 1, 1), datetime.datetime(2200, 1, 1), timezones=st.just(UTC))


class Names:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self, kind: str) -> str:
        self.n += 1
        return f"{kind}_{self.n}"


def decimals(precision: int, scale: int) -> st.SearchStrategy[decimal.Decimal]:
    digits = st.integers(-(10**precision) + 1, 10**precision - 1)
    return digits.map(lambda d: decimal.Decimal(d).scaleb(-scale))


@st.composite
def avro_types(draw: Any, names: Names, depth: int = 0) -> tuple[Any, pa.DataType, st.SearchStrategy[Any]]:
    """An Avro type DataFusion decodes, the Arrow type Spark's Avro source reads it as, and values."""
    kinds = ["primitive", "decimal", "decimal-fixed", "date", "ts-millis", "ts-micros", "enum", "fixed", "nullable"]
    if depth < 2:
        kinds += ["array", "map", "record"]
    kind = draw(st.sampled_from(kinds))
    if kind == "primitive":
        name = draw(st.sampled_from(sorted(PRIMITIVES)))
        return (name, *PRIMITIVES[name])
    if kind in ("decimal", "decimal-fixed"):
        precision = draw(st.integers(1, 38))
        scale = draw(st.integers(0, precision))
        base: dict[str, Any] = (
            {"type": "bytes"} if kind == "decimal" else {"type": "fixed", "name": names("F"), "size": 16}
        )
        avro = {**base, "logicalType": "decimal", "precision": precision, "scale": scale}
        return avro, pa.decimal128(precision, scale), decimals(precision, scale)
    if kind == "date":
        return {"type": "int", "logicalType": "date"}, pa.date32(), st.dates()
    if kind == "ts-millis":
        millis = TIMES.map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000))
        return {"type": "long", "logicalType": "timestamp-millis"}, pa.timestamp("us", "UTC"), millis
    if kind == "ts-micros":
        return {"type": "long", "logicalType": "timestamp-micros"}, pa.timestamp("us", "UTC"), TIMES
    if kind == "enum":
        symbols = draw(st.lists(st.sampled_from(["A", "B", "c_1", "_D"]), min_size=1, unique=True))
        return {"type": "enum", "name": names("E"), "symbols": symbols}, pa.string(), st.sampled_from(symbols)
    if kind == "fixed":
        size = draw(st.integers(1, 5))
        return {"type": "fixed", "name": names("X"), "size": size}, pa.binary(), st.binary(min_size=size, max_size=size)
    if kind == "nullable":
        avro, arrow, values = draw(avro_types(names, depth + 1).filter(lambda t: not isinstance(t[0], list)))
        union = ["null", avro] if draw(st.booleans()) else [avro, "null"]
        return union, arrow, st.none() | values
    if kind == "array":
        avro, arrow, values = draw(avro_types(names, depth + 1))
        return {"type": "array", "items": avro}, pa.list_(arrow), st.lists(values, max_size=3)
    if kind == "map":
        avro, arrow, values = draw(avro_types(names, depth + 1))
        keys = st.text(st.characters(codec="utf-8"), max_size=3)
        return {"type": "map", "values": avro}, pa.map_(pa.string(), arrow), st.dictionaries(keys, values, max_size=3)
    return draw(records(names, depth + 1))


@st.composite
def records(draw: Any, names: Names, depth: int = 0) -> tuple[Any, pa.DataType, st.SearchStrategy[Any]]:
    count = draw(st.integers(1, 4))
    fields = [(f"f{i}", *draw(avro_types(names, depth))) for i in range(count)]
    avro = {"type": "record", "name": names("R"), "fields": [{"name": n, "type": a} for n, a, _, _ in fields]}
    arrow = pa.struct([pa.field(n, t) for n, _, t, _ in fields])
    return avro, arrow, st.fixed_dictionaries({n: v for n, _, _, v in fields})


@st.composite
def files(draw: Any) -> tuple[dict[str, Any], pa.Schema, list[list[dict[str, Any]]], list[str]]:
    """A writer schema (a record with an ``rid`` first), Spark's Arrow schema of it, 1-3 files of
    records and each file's codec."""
    names = Names()
    value, arrow, values = draw(records(names))
    schema = {"type": "record", "name": "connector_records", "namespace": "io.aiven.avro.output.schema", "fields": [
        {"name": "rid", "type": "long"}, *value["fields"]
    ]}  # fmt: skip
    target = pa.schema([pa.field("rid", pa.int64()), *[arrow.field(i) for i in range(arrow.num_fields)]])
    rid = iter(range(10_000))
    batches = draw(st.lists(st.lists(values, min_size=0, max_size=5), min_size=1, max_size=3))
    batches = [[{"rid": next(rid), **r} for r in batch] for batch in batches]
    codecs = draw(st.lists(st.sampled_from(["null", "deflate", "snappy", "zstandard"]), min_size=3, max_size=3))
    return schema, target, batches, codecs


def container(schema: dict[str, Any], rows: list[dict[str, Any]], codec: str = "null") -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), rows, codec=codec)
    return buf.getvalue()


def plain(value: Any, t: pa.DataType) -> Any:
    """An Arrow value as fastavro gives it (maps as dicts)."""
    if value is None:
        return None
    if pa.types.is_map(t):
        return {k: plain(v, t.item_type) for k, v in value}
    if pa.types.is_list(t):
        return [plain(v, t.value_type) for v in value]
    if pa.types.is_struct(t):
        return {t.field(i).name: plain(value[t.field(i).name], t.field(i).type) for i in range(t.num_fields)}
    return value


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=files())
def test_decoded_as_fastavro_decodes(case: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every value of every record, in files of every codec, is what fastavro reads from the same
    bytes, and each row names the file it came from; the schemas drawn are ones the service
    decodes by Arrow."""
    schema, target, batches, codecs = case
    assert arrow_refusal(schema) is None
    spool = AvroSpool(str(tmp_path_factory.mktemp("spool")))
    try:
        data = [container(schema, rows, codec) for rows, codec in zip(batches, codecs, strict=False)]
        numbers = [spool.put("k", d) for d in data]
        decoded = spool.decode("k", numbers, [len(b) for b in batches])
    finally:
        spool.close()
    file_of = {r["rid"]: numbers[i] for i, batch in enumerate(batches) for r in batch}
    assert {r["rid"]: r[FILE_COLUMN] for r in decoded.select(["rid", FILE_COLUMN]).to_pylist()} == file_of
    table = spark_typed(decoded.drop_columns([FILE_COLUMN]), target)
    assert table.schema == target
    got = sorted((plain(r, pa.struct(list(target))) for r in table.to_pylist()), key=lambda r: r["rid"])
    want = [r for d in data for r in fastavro.reader(io.BytesIO(d))]
    assert got == want


ROW = {"type": "record", "name": "Row", "fields": [{"name": "k", "type": "long"}]}


def writer(field_type: Any, name: str = "a") -> dict[str, Any]:
    return {"type": "record", "name": "V", "fields": [{"name": name, "type": field_type}]}


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ("string", "top level"),
        (writer(["null", "long", "string"]), "union of 3"),
        (writer(["long", "string"]), "union of 2"),
        (writer("null"), "type null"),
        (writer({"type": "record", "name": "E", "fields": []}), "without fields"),
        (writer({"type": "string", "logicalType": "uuid"}), "uuid"),
        (writer({"type": "int", "logicalType": "time-millis"}), "time-millis"),
        (writer({"type": "long", "logicalType": "local-timestamp-micros"}), "local-timestamp-micros"),
        (writer({"type": "long", "logicalType": "date"}), "date on long"),
        (writer("long", name="Ünï"), "no Avro name"),
        (writer({"type": "enum", "name": "E", "symbols": ["é"]}), "enum symbol"),
        (
            {
                "type": "record",
                "name": "Env",
                "fields": [{"name": "before", "type": ["null", ROW]}, {"name": "after", "type": ["null", "Row"]}],
            },
            "named type 'Row'",
        ),
    ],
)
def test_left_to_spark(schema: Any, reason: str) -> None:
    """What DataFusion reads otherwise than Spark, or not at all, is left to Spark, with why."""
    refusal = arrow_refusal(schema)
    assert refusal is not None and reason in refusal


def test_rows_dropped_are_refused(tmp_path: Path) -> None:
    """DataFusion reads no rows at all from a record whose only field is of type null: the count
    against the blocks' catches it (and arrow_refusal keeps such files from it)."""
    spool = AvroSpool(str(tmp_path))
    data = container(writer("null"), [{"a": None}] * 3)
    with pytest.raises(ArrowReadError, match="read 0 records of a file whose blocks hold 3"):
        spool.decode("k", [spool.put("k", data)], [3])
    spool.close()
    assert list(tmp_path.iterdir()) == []


def test_types_that_do_not_cast_are_refused(tmp_path: Path) -> None:
    """A uuid DataFusion decodes into 16 bytes does not pass for Spark's string."""
    spool = AvroSpool(str(tmp_path))
    data = container(writer({"type": "string", "logicalType": "uuid"}), [{"a": "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"}])
    decoded = spool.decode("k", [spool.put("k", data)], [1]).drop_columns([FILE_COLUMN])
    with pytest.raises(ArrowReadError, match="do not cast"):
        spark_typed(decoded, pa.schema([pa.field("a", pa.string())]))
    spool.close()


def test_files_spooled_after_a_decoding_are_decoded_apart(tmp_path: Path) -> None:
    """A writer schema's files spooled after its folder was decoded go to a folder of their own:
    each decoding returns the files asked for, no file twice."""
    spool = AvroSpool(str(tmp_path))
    schema = writer("long")
    first = [spool.put("k", container(schema, [{"a": i}, {"a": -i}])) for i in range(3)]
    other = spool.put("other", container(writer("string"), [{"a": "x"}]))
    a = spool.decode("k", first, [2, 2, 2])
    later = spool.put("k", container(schema, [{"a": 100}]))
    b = spool.decode("k", [later], [1])
    assert sorted(a.column("a").to_pylist()) == [-2, -1, 0, 0, 1, 2]
    assert sorted(set(a.column(FILE_COLUMN).to_pylist())) == first
    assert b.to_pylist() == [{"a": 100, FILE_COLUMN: later}]
    assert spool.decode("other", [other], [1]).column("a").to_pylist() == ["x"]
    with pytest.raises(ArrowReadError, match="blocks hold 5"):
        spool.decode("k", [spool.put("k", container(schema, [{"a": 1}]))], [5])
    spool.close()
