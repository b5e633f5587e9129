"""The wire model: round trips, field-named errors, unknown keys ignored, stdlib only."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from commit_service.protocol import (
    CommitRecord,
    DataFile,
    FileFormat,
    Manifest,
    ProtocolError,
    offsets_from_json,
    offsets_to_json,
)


def body(**over: Any) -> dict[str, Any]:
    f = {"path": "s3a://landing/orders-0-0", "topic": "orders", "partition": 0, "start_offset": 0,
         "end_offset": 99, "size_bytes": 2048, "format": "parquet", "record_count": 100}  # fmt: skip
    d = {"manifest_id": "m-1", "sidecar": {"id": "sc-1", "worker": "10.0.0.5:8083"}, "files": [f]}
    d.update(over)
    return d


def test_round_trip_and_unknown_keys_ignored() -> None:
    raw = body(extra_field="from a newer sidecar")
    raw["files"][0]["future"] = 1
    m = Manifest.from_dict(raw)
    assert m.files[0] == DataFile("s3a://landing/orders-0-0", "orders", 0, 0, 99, 2048, FileFormat.PARQUET, 100)
    assert Manifest.from_dict(m.to_dict()) == m


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.pop("manifest_id"), "manifest_id"),
        (lambda d: d.update(files=[]), "files"),
        (lambda d: d.update(files="x"), "files"),
        (lambda d: d.update(sidecar={"id": "x"}), "sidecar.worker"),
        (lambda d: d["files"][0].update(partition=-1), "files[0].partition"),
        (lambda d: d["files"][0].update(partition=True), "files[0].partition"),
        (lambda d: d["files"][0].update(start_offset="0"), "files[0].start_offset"),
        (lambda d: d["files"][0].update(end_offset=-5), "files[0].end_offset"),
        (lambda d: d["files"][0].update(start_offset=10, end_offset=5), "files[0].end_offset"),
        (lambda d: d["files"][0].update(format="avro2"), "files[0].format"),
        (lambda d: d["files"][0].update(path=""), "files[0].path"),
        (lambda d: d.update(schema_version=99), "schema_version"),
    ],
)
def test_bad_fields_are_named(mutate: Any, field: str) -> None:
    raw = body()
    mutate(raw)
    with pytest.raises(ProtocolError) as err:
        Manifest.from_dict(raw)
    assert err.value.field == field


def test_not_an_object() -> None:
    with pytest.raises(ProtocolError, match="must be a JSON object"):
        Manifest.from_dict([1, 2])


def test_offsets_json_keys_are_strings_and_back() -> None:
    offsets = {"orders": {0: 10, 2: 5}}
    assert offsets_to_json(offsets) == {"orders": {"0": 10, "2": 5}}
    assert offsets_from_json(offsets_to_json(offsets)) == offsets


def test_commit_record_user_metadata_round_trip() -> None:
    rec = CommitRecord("orders", 3, "c-1", files=2, records=200, offsets={"orders": {0: 100, 1: 100}},
                       vtts=1700000000000, sidecars=("sc-1",))  # fmt: skip
    again = CommitRecord.from_user_metadata("orders", 3, rec.user_metadata())
    assert again == rec
    assert set(rec.user_metadata()) == {"commit_id", "offsets", "vtts", "files", "records", "sidecars"}


def test_protocol_imports_no_flask_spark_or_kafka() -> None:
    code = (
        "import sys, commit_service.protocol\n"
        "heavy = [m for m in ('flask', 'pyspark', 'py4j', 'kafka', 'werkzeug', 'yaml') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
