"""The round's schema rule (round_schema) and the JSON typing it is fed (json_infer, and Arrow's
reading of the records in json_types, value for value): pure."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commit_service.domain import json_infer
from commit_service.domain.round_schema import (
    VOID,
    Conflict,
    FileShape,
    SparkType,
    delta_widens,
    fits,
    leaf_columns,
    merge,
    reconcile,
    resolved_schema,
    wider_atomic,
)
from commit_service.storage import json_types


def struct(**fields: Any) -> dict[str, Any]:
    return {
        "type": "struct",
        "fields": [{"name": k, "type": t, "nullable": True, "metadata": {}} for k, t in fields.items()],
    }


def array(t: Any) -> dict[str, Any]:
    return {"type": "array", "elementType": t, "containsNull": True}


def test_json_is_typed_as_spark_types_it_but_null_only_values_stay_untyped() -> None:
    records = json_infer.parse_lines(
        [
            '{"b": 1, "a": "x", "n": null, "e": [], "s": {"z": 1.5, "y": null}, "big": 123456789012345678901}',
            '{"b": 2.5, "a": null, "t": true, "s": {"y": null}, "mix": 1}',
            '{"mix": "text", "l": [1, 2.0]}',
        ]
    )
    schema = json_infer.infer(records)
    types = {f["name"]: f["type"] for f in schema["fields"]}
    assert [f["name"] for f in schema["fields"]] == sorted(types)  # Spark sorts inferred fields
    assert types["a"] == "string" and types["b"] == "double" and types["t"] == "boolean"
    assert types["n"] == VOID and types["e"] == array(VOID) and types["big"] == "decimal(21,0)"
    assert types["s"] == struct(y=VOID, z="double")
    assert types["mix"] == "string"  # one file mixing a number and text: Spark's string
    assert types["l"] == array("double")


@pytest.mark.parametrize(
    ("line", "why"),
    [("not json", "line 2 is not JSON"), ("[1, 2]", "line 2 is a JSON list, not an object"), ("3", "JSON int")],
)
def test_a_line_that_is_no_record_is_named(line: str, why: str) -> None:
    with pytest.raises(json_infer.LineError, match=why):
        json_infer.parse_lines(['{"a": 1}', line])


def test_a_void_never_wins_and_structs_grow_at_any_depth() -> None:
    table = struct(id="long", addr=struct(city="string"))
    files = [
        FileShape("f1", struct(id="long", addr=struct(city=VOID, geo=struct(lat="double")), score=VOID)),
        FileShape("f2", struct(id="long", addr=VOID, score="long")),
    ]
    joined = reconcile(table, files)
    assert not joined.refused
    assert joined.schema == struct(id="long", addr=struct(city="string", geo=struct(lat="double")), score="long")


def test_a_conflict_refuses_the_file_that_brings_it_and_names_column_and_types() -> None:
    files = [
        FileShape("a", struct(x="long")),
        FileShape("b", struct(x=struct(y="long"))),
        FileShape("c", struct(z="string")),
    ]
    joined = reconcile(None, files)
    assert set(joined.refused) == {"b"}
    assert "column 'x' is struct in this file but long in another file of the round" in joined.refused["b"]
    assert joined.schema == struct(x="long", z="string")  # the refused file leaves no trace
    in_table = reconcile(struct(x="string"), [FileShape("d", struct(x="long"))])
    assert "column 'x' is long in this file but string in the table" in in_table.refused["d"]


def test_numbers_widen_in_the_round_and_in_the_table_only_as_delta_allows() -> None:
    assert reconcile(None, [FileShape("a", struct(n="long")), FileShape("b", struct(n="double"))]).schema == struct(
        n="double"
    )  # a JSON number column new to the table: Spark's long + double
    widened = reconcile(struct(n="integer"), [FileShape("a", struct(n="long"))])
    assert widened.schema == struct(n="long") and [(w.column, w.to_type) for w in widened.widened] == [("n", "long")]
    assert (
        "Delta cannot widen long to double"
        in reconcile(struct(n="long"), [FileShape("a", struct(n="double"))]).refused["a"]
    )
    off = reconcile(struct(n="integer"), [FileShape("a", struct(n="long"))], widen=False)
    assert "type_widening: true would widen it to long" in off.refused["a"]
    narrower = reconcile(struct(n="long"), [FileShape("a", struct(n="integer"))], widen=False)
    assert narrower.schema == struct(n="long") and not narrower.refused  # cast up on the write
    assert delta_widens("decimal(5,2)", "decimal(10,4)") and not delta_widens("decimal(5,2)", "decimal(6,4)")
    assert wider_atomic("integer", "decimal(5,2)") == "decimal(12,2)" and wider_atomic("string", "long") is None


def test_case_only_differences_are_refused() -> None:
    joined = reconcile(struct(Name="string"), [FileShape("a", struct(name="string"))])
    assert "named 'name' here but 'Name' before" in joined.refused["a"]


def test_resolved_leaves_out_voids_but_keeps_empty_arrays() -> None:
    schema = struct(a=VOID, b=struct(c=VOID), d=array(VOID), e=struct(f=VOID, g="long"))
    assert resolved_schema(schema) == struct(d=array("string"), e=struct(g="long"))


def test_a_parquet_file_fits_in_place_only_with_the_tables_types() -> None:
    target = struct(id="long", s=struct(a="long"), extra="string")
    assert fits(struct(id="long", s=struct(a="long")), target)
    assert not fits(struct(id="integer"), target)  # rewritten, cast to long
    assert not fits(struct(s=struct(a="long", b="long")), struct(s=struct(a="long")))
    assert not fits(struct(gone="string"), target)


def test_leaf_columns_are_the_typed_paths() -> None:
    schema = struct(a="long", s=struct(b=VOID, c=array(struct(d="string"))), m=VOID)
    assert leaf_columns(schema) == {"a", "s.c[].d"} and leaf_columns(struct(e=array(VOID), f=array("long"))) == {"f[]"}


# -- properties --------------------------------------------------------------------------

atoms = st.sampled_from(["long", "double", "string", "boolean", VOID])
types = st.recursive(
    atoms,
    lambda inner: st.one_of(
        st.builds(array, inner),
        st.dictionaries(st.sampled_from("abcde"), inner, min_size=1, max_size=3).map(lambda d: struct(**d)),
    ),
    max_leaves=8,
)
schemas = st.dictionaries(st.sampled_from("pqrst"), types, min_size=1, max_size=4).map(lambda d: struct(**d))


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.none(), schemas.map(resolved_schema)), st.lists(schemas, min_size=1, max_size=4))
def test_every_accepted_file_fits_the_round_schema_and_keeps_its_typed_columns(
    table: dict[str, Any] | None, shapes: list[dict[str, Any]]
) -> None:
    """Whatever the shapes: each accepted file's typed columns are in the resolved schema, each
    joins it without conflict (so its values can be cast up to it), and the table's columns stay."""
    files = [FileShape(f"f{i}", s) for i, s in enumerate(shapes)]
    joined = reconcile(table, files)
    final = resolved_schema(joined.schema)
    for f in files:
        if f.path in joined.refused:
            continue
        assert leaf_columns(f.schema) <= leaf_columns(final)
        assert merge(joined.schema, f.schema, "", joined.schema) == joined.schema  # already holds it
    if table is not None:
        assert leaf_columns(table) <= leaf_columns(final)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.dictionaries(st.sampled_from("abc"), st.one_of(st.none(), st.integers(), st.text(max_size=3))), max_size=6
    )
)
def test_inference_of_many_records_is_the_join_of_each_records_type(records: list[dict[str, Any]]) -> None:
    whole = json_infer.infer(records)
    one_by_one: Any = {"type": "struct", "fields": []}
    for r in records:
        one_by_one = json_infer.join(one_by_one, json_infer.type_of(r))
    assert whole == one_by_one
    assert json_infer.infer(json_infer.parse_lines([json.dumps(r) for r in records])) == whole


def test_a_conflict_carries_its_column() -> None:
    with pytest.raises(Conflict) as caught:
        merge("long", struct(a="long"), "x.y", None)
    assert caught.value.column == "x.y"


def test_the_round_guard_refuses_missing_rows_and_missing_columns() -> None:
    from commit_service.domain import round_guard
    from commit_service.errors import RoundShortfallError

    sources = [
        round_guard.Source("a", 3, struct(id="long", s=struct(x="string"), n=VOID)),
        round_guard.Source("b", 2, struct(id="long")),
    ]
    written = struct(id="long", s=struct(x="string", y="long"))
    round_guard.check("t", sources, 5, written)  # whole: a void column need not be written
    with pytest.raises(RoundShortfallError, match="hold 5 records but 4 rows were written"):
        round_guard.check("t", sources, 4, written)
    with pytest.raises(RoundShortfallError, match=r"the columns \['s.x'\] of a would not be written"):
        round_guard.check("t", sources, 5, struct(id="long", s=struct(y="long")))
    assert round_guard.written_rows([{"numRecords": 2}, {"numRecords": 3}]) == 5
    assert round_guard.written_rows([{"numRecords": 2}, None]) == -1  # no statistics: counted another way


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        (
            '[\n{"a":1},\n{"a":"x,\\ny"},\n{"b":[1,2]}\n]',
            ['{"a":1}', '{"a":"x,\\ny"}', '{"b":[1,2]}'],
        ),  # Aiven's framing
        ('[\n{"a":1}\n]', ['{"a":1}']),
        ('[\n{"a":1},\n null\n]', ['{"a":1}', " null"]),  # a bare null value (a tombstone without envelope)
        ('  [{"a": 1}, {"a": "é"}]\n', ['{"a": 1}', '{"a": "é"}']),  # another writer's array: parsed
        ("[]", []),
    ],
)
def test_a_json_array_files_records_become_lines(text: str, lines: list[str]) -> None:
    assert json_infer.array_lines(text) == lines
    assert [json.loads(x) for x in lines] == json.loads(text)


@pytest.mark.parametrize("text", ['{"a": 1}', "[1, 2", ""])
def test_text_that_is_no_json_array_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        json_infer.array_lines(text)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_infinity=False, allow_nan=False)
    | st.text(max_size=4)
    | st.sampled_from(["2019-04-02T13:14:55.123Z", "2026-11-28", "12:00:00"]),  # text Arrow reads as a time
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "", "Ü", "a b"]), inner, max_size=3)
    ),
    max_leaves=8,
)
RECORDS = st.lists(
    st.dictionaries(st.sampled_from(["x", "y", "z", ""]), JSON_VALUES, max_size=3), min_size=1, max_size=6
)


def test_arrow_types_a_sinks_usual_json_lines() -> None:
    """The fast path is taken for what sinks write (else it would be a dead branch)."""
    lines = [
        json.dumps(
            {
                "value": {"id": f"0-{o}", "amount": o * 0.25, "n": o, "tags": [], "at": "2026-01-01T00:00:00Z"},
                "offset": o,
            }
        )
        for o in range(50)
    ] + ['{"value": null, "offset": 50}']
    arrow = json_types.infer_lines(lines)
    assert arrow is not None and arrow == json_infer.infer(json_infer.parse_lines(lines))
    assert json_types.infer_lines(['{"a": 12345678901234567890}']) is None  # past a long: Python types it
    assert json_types.infer_lines(['{"a": 1}', '{"a": "x"}']) is None  # mixed kinds: Python joins them


def expected(value: Any, t: SparkType) -> Any:
    """``value`` (as Python parsed it) as a column of type ``t`` holds it: a struct's every field (an
    absent key null), a double's integers as floats."""
    if value is None or t == VOID:
        return None
    if isinstance(t, dict) and t["type"] == "struct":
        return {f["name"]: expected(value.get(f["name"]), f["type"]) for f in t["fields"]}
    if isinstance(t, dict) and t["type"] == "array":
        return [expected(v, t["elementType"]) for v in value]
    return float(value) if t == "double" else value


@settings(max_examples=400, deadline=None)
@given(records=RECORDS)
def test_arrows_typing_is_infers_and_its_records_the_texts_values_wherever_it_answers(
    records: list[dict[str, Any]],
) -> None:
    lines = [json.dumps(r, ensure_ascii=bool(len(r) % 2)) for r in records]
    read = json_types.read_records(lines)
    if read is not None:
        parsed = json_infer.parse_lines(lines)
        assert read.shape == json_infer.infer(parsed)
        assert read.columns.to_pylist() == [expected(r, read.shape) for r in parsed]


def test_text_arrow_would_read_as_a_time_stays_the_text_written() -> None:
    """Arrow reads ISO-8601 text as a timestamp: such a file is read again with its types given, so
    the text (its ``T``, its ``Z``, its millis) is what lands, as Spark's JSON reader gives it."""
    lines = [
        json.dumps({"value": {"at": "2019-04-02T13:14:55.123Z", "day": "2026-11-28"}, "offset": o, "n": [o, None]})
        for o in range(3)
    ]
    read = json_types.read_records(lines)
    assert read is not None
    assert read.columns.to_pylist() == [json.loads(line) for line in lines]
    assert str(read.columns.schema.field("value").type) == "struct<at: string, day: string>"


def test_files_of_one_shape_join_in_order_and_others_are_left_to_spark() -> None:
    first = json_types.read_records(['{"a": 1, "b": null}', '{"a": 2, "b": null}'])
    second = json_types.read_records(['{"a": 3, "b": null}'])
    assert first is not None and second is not None
    assert json_types.joined([first, second]).to_pylist() == [{"a": a, "b": None} for a in (1, 2, 3)]
    assert json_types.read_records(['{"": 1, "a": 2}']) is None  # a key "": no column Spark reads
    assert json_types.read_records(['{"a": 1}', "[1]"]) is None  # no object: Python refuses the line
