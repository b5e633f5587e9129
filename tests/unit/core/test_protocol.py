"""The wire model: round trips, field-named errors, unknown keys ignored, stdlib only."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from typing import Any

import pytest

from lakegate_core.errors import ProtocolError
from lakegate_core.protocol import DataFile, FileFormat, LeaseRequest, Manifest
from lakegate_core.status import CommitRecord
from lakegate_core.types import PartitionOffsets, TopicPartition


def body(**over: Any) -> dict[str, Any]:
    f = {
        "path": "s3a://landing/orders-0-0",
        "topic": "orders",
        "partition": 0,
        "start_offset": 0,
        "end_offset": 99,
        "size_bytes": 2048,
        "format": "parquet",
        "record_count": 100,
    }
    d = {"manifest_id": "m-1", "sidecar": {"id": "sc-1", "worker": "10.0.0.5:8083"}, "files": [f]}
    d.update(over)
    return d


def test_round_trip_and_unknown_keys_ignored() -> None:
    raw = body(extra_field="from a newer sidecar")
    raw["files"][0]["future"] = 1
    m = Manifest.from_dict(raw)
    assert m.files[0] == DataFile("s3a://landing/orders-0-0", "orders", 0, 0, 99, 2048, FileFormat.PARQUET, 100)
    assert Manifest.from_dict(m.to_dict()) == m
    assert "modified_ms" not in m.to_dict()["files"][0], "an unset time is not sent"
    raw["files"][0]["modified_ms"] = 1_764_288_000_000
    listed = Manifest.from_dict(raw)
    assert listed.files[0].modified_ms == 1_764_288_000_000
    assert Manifest.from_dict(listed.to_dict()) == listed


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
        (lambda d: d["files"][0].update(modified_ms=-1), "files[0].modified_ms"),
        (lambda d: d["files"][0].update(modified_ms="today"), "files[0].modified_ms"),
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
    offsets = PartitionOffsets({("orders", 2): 5, ("orders", 0): 10})
    assert offsets.to_json() == {"orders": {"0": 10, "2": 5}}
    assert PartitionOffsets.from_json(offsets.to_json()) == offsets == {("orders", 0): 10, ("orders", 2): 5}
    assert list(offsets) == [TopicPartition("orders", 0), TopicPartition("orders", 2)]
    with pytest.raises(ProtocolError, match=r"offsets.orders.x"):
        PartitionOffsets.from_json({"orders": {"x": 1}})


def test_commit_record_user_metadata_round_trip() -> None:
    rec = CommitRecord(
        "orders",
        3,
        "c-1",
        files=2,
        records=200,
        offsets=PartitionOffsets({("orders", 0): 100, ("orders", 1): 100}),
        vtts=1700000000000,
        sidecars=("sc-1",),
    )
    again = CommitRecord.from_user_metadata("orders", 3, rec.user_metadata())
    assert again == rec
    assert set(rec.user_metadata()) == {"commit_id", "offsets", "vtts", "files", "records", "sidecars"}
    # what only this process knows stays out of the table's log: the time, and where it went
    timed = replace(rec, duration_ms=40, phases_ms={"facts": 10, "open": 5, "write": 15, "commit": 10})
    assert timed.user_metadata() == rec.user_metadata()
    assert timed.to_dict()["phases_ms"] == {"facts": 10, "open": 5, "write": 15, "commit": 10}  # the API's


def test_lease_request_round_trip_with_named_watermarks() -> None:
    raw = {
        "sidecar": {"id": "sc", "worker": "w:8083"},
        "connector": "snk",
        "tasks": [0],
        "partitions": [{"topic": "orders", "partition": 1}],
        "watermarks": [{"topic": "orders", "partition": 1, "connect_offset": 50, "read_at_ms": 7}],
    }
    req = LeaseRequest.from_dict(raw)
    assert req.partitions == (TopicPartition("orders", 1),) and req.watermarks[0].tp == ("orders", 1)
    assert req.to_dict() == raw
    with pytest.raises(ProtocolError) as err:
        LeaseRequest.from_dict(
            {**raw, "watermarks": [{"topic": "orders", "partition": 1, "connect_offset": -1, "read_at_ms": 7}]}
        )
    assert err.value.field == "watermarks[0].connect_offset"


# The deciding core and the wire model must import on a machine with none of these installed.
HEAVY = ("flask", "werkzeug", "pyspark", "py4j", "kafka")
BLOCK = (
    "import sys\n"
    "class Block:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] in {heavy!r}:\n"
    "            raise ImportError(f'{{name}} is not installed (blocked by the test)')\n"
    "sys.meta_path.insert(0, Block())\n"
)


@pytest.mark.parametrize(
    ("modules", "also_absent"),
    [
        (["lakegate_core.protocol", "lakegate_core.status", "lakegate_core.types"], ("yaml",)),
        (["commit_service.domain.state", "commit_service.domain.leases"], ("yaml",)),
        (
            ["commit_service.coordination.coordinator", "commit_service.coordination.fencing", "commit_service.ports"],
            (),
        ),
    ],
)
def test_core_imports_without_flask_spark_or_kafka(modules: list[str], also_absent: tuple[str, ...]) -> None:
    blocked = HEAVY + also_absent
    code = BLOCK.format(heavy=set(blocked)) + "".join(f"import {m}\n" for m in modules)
    code += f"print(','.join(m for m in {blocked!r} if m in sys.modules))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
