"""A sink's headerless CSV read as records (csv_records): Aiven's layout, nulls, and refusals."""

from __future__ import annotations

import base64
import json

import pytest

from commit_service.domain.csv_records import records
from commit_service.domain.json_infer import LineError
from lakegate_core.protocol import CsvLayout


def b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


def test_aivens_layout_in_its_order_with_base64_key_and_value() -> None:
    layout = CsvLayout(("key", "value", "offset", "timestamp", "headers"))
    value = {"id": 1, "name": "Zoë", "tags": ["a,b"]}
    headers = f"{b64('h1')}:{b64('v1')};{b64('h2')}:;"
    lines = [
        f"{b64('k1')},{b64(json.dumps(value))},41,1700000000123,{headers}",
        f"{b64('k2')},,42,1700000000124,",  # a tombstone: the null value is an empty field
        f",{b64('plain text')},43,,",  # a null key and timestamp; a value that is text, not JSON
        f"{b64('k4')},{b64(bytes([0xFF, 0x00]))},44,1,",  # bytes that are not UTF-8 stay base64
    ]
    got = records(lines, layout)
    assert got[0] == {
        "key": "k1",
        "value": value,
        "offset": 41,
        "timestamp": 1700000000123,
        "headers": [{"key": "h1", "value": "v1"}, {"key": "h2", "value": None}],
    }
    assert got[1] == {"key": "k2", "value": None, "offset": 42, "timestamp": 1700000000124, "headers": None}
    assert got[2]["key"] is None and got[2]["value"] == "plain text" and got[2]["timestamp"] is None
    assert got[3]["value"] == b64(bytes([0xFF, 0x00]))


def test_the_default_layout_is_the_value_alone_and_an_empty_line_is_a_null_value() -> None:
    assert records([b64('{"a": 1}'), ""], CsvLayout()) == [{"value": {"a": 1}}, {"value": None}]


def test_a_raw_value_last_may_hold_commas() -> None:
    layout = CsvLayout(("offset", "value"), "none")
    assert records(['7,{"a": 1, "b": "x,y"}'], layout) == [{"offset": 7, "value": {"a": 1, "b": "x,y"}}]


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("id,name", r"line 1 has 2 comma-separated fields, the sink's layout \['value', 'offset'\] has 2|not base64"),
        (f"{b64('x')}", "has 1 comma-separated fields"),
        (f"{b64('x')},12a", "field 'offset': '12a' is not a number"),
        ("%%%,1", "field 'value': '%%%' is not base64"),
    ],
)
def test_a_line_that_does_not_fit_the_layout_refuses_the_file(line: str, why: str) -> None:
    with pytest.raises(LineError, match=why):
        records([line], CsvLayout(("value", "offset")))


def test_a_header_row_is_no_record() -> None:
    """A CSV written with a header is refused: its first line is no record of the layout."""
    with pytest.raises(LineError, match="line 1 field 'value'"):
        records(["value,offset", f"{b64('{}')},0"], CsvLayout(("value", "offset")))


def test_the_layout_is_checked_on_the_wire() -> None:
    from lakegate_core.errors import ProtocolError
    from lakegate_core.protocol import DataFile

    raw = {"path": "s3a://b/t-0-0", "topic": "t", "partition": 0, "start_offset": 0, "end_offset": 1, "size_bytes": 9}
    f = DataFile.from_dict({**raw, "format": "csv", "csv": {"fields": ["key", "value"], "value_encoding": "none"}})
    assert f.csv == CsvLayout(("key", "value"), "none") and DataFile.from_dict(f.to_dict()) == f
    with pytest.raises(ProtocolError, match=r"csv.fields: \['size'\] are not among"):
        DataFile.from_dict({**raw, "csv": {"fields": ["size"]}})
    with pytest.raises(ProtocolError, match="csv.value_encoding"):
        DataFile.from_dict({**raw, "csv": {"fields": ["value"], "value_encoding": "hex"}})
