"""Rounds whose files differ in shape, committed on real Spark + Delta and read back by value.

Every test writes files as a sink writes them (JSON lines and Parquet, in Aiven's envelope or
plain), commits them through :class:`DeltaCommitter`, and compares every field of every record
with what delta-rs (``deltalake``) and Spark read back: a column lost, typed wrong or nulled shows.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from commit_service.config import Placement
from commit_service.delta import append as append_round
from commit_service.delta.committer import DeltaCommitter
from commit_service.domain.plan import PendingFile
from commit_service.domain.round_schema import RoundSchema
from commit_service.domain.state import TableState
from commit_service.domain.upsert import Cdc, UpsertSpec
from commit_service.errors import RoundShortfallError, SchemaMismatchError
from commit_service.storage.reader import StorageReader
from lakegate_core.protocol import DataFile, FileFormat
from lakegate_stack.delta_read import live_rows
from lakegate_stack.fidelity import same
from tests.delta_helpers import commit_all


class Sink:
    """Writes files as the S3 sink does, under ``<tmp>/landing``, offsets running on per partition."""

    def __init__(self, root: Path) -> None:
        self.root = root / "landing"
        self.next: dict[tuple[str, int], int] = {}

    def write(
        self, topic: str, partition: int, values: list[Any], fmt: FileFormat, *, envelope: bool = True, **kw: Any
    ) -> tuple[PendingFile, list[dict[str, Any]]]:
        """One file of ``values`` (the records' values); returns it and the envelopes written."""
        start = self.next.get((topic, partition), 0)
        self.next[(topic, partition)] = start + len(values)
        keys = kw.get("keys") or [f"{topic}-{partition}"] * len(values)  # (key, offset) names a record
        envelopes = [{"key": keys[i], "value": v, "offset": start + i} for i, v in enumerate(values)]
        rows = envelopes if envelope else values
        path = kw.get("under", self.root) / f"{topic}-{partition}-{start}"
        path.parent.mkdir(parents=True, exist_ok=True)
        if fmt is FileFormat.JSONL:
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        else:
            pq.write_table(pa.Table.from_pylist(rows, schema=kw.get("schema")), path)
        f = DataFile(f"file://{path}", topic, partition, start, start + len(values) - 1, path.stat().st_size, fmt)
        return PendingFile(f, f"m-{topic}-{partition}-{start}", "sc-1"), envelopes


def flat(envelope: dict[str, Any]) -> dict[str, Any]:
    """The row an unwrapped append table holds for one envelope."""
    return {**(envelope["value"] or {}), "_kafka_key": envelope["key"], "_kafka_offset": envelope["offset"]}


def read_both(spark: Any, table: Path) -> list[list[dict[str, Any]]]:
    """The table as delta-rs and as Spark read it."""
    spark_rows = [r.asDict(recursive=True) for r in spark.read.format("delta").load(str(table)).collect()]
    return [live_rows(DeltaTable(str(table))), spark_rows]


def assert_holds(spark: Any, table: Path, envelopes: list[dict[str, Any]]) -> None:
    """Both readers return exactly one row per envelope (keyed by topic and offset), every field equal."""
    for rows in read_both(spark, table):
        assert len(rows) == len(envelopes)
        got = {(r.get("_kafka_key"), r["_kafka_offset"]): r for r in rows}
        for e in envelopes:
            row = got[(e["key"], e["offset"])]
            assert same(flat(e), row), f"{flat(e)} != {row}"


def test_two_topics_of_different_shapes_return_every_field(spark: Any, tmp_path: Path) -> None:
    """One round: JSON lines and Parquet, two value shapes, a struct that gains a field at depth
    two, a field null in one whole file: every value of every record comes back."""
    table, sink = tmp_path / "t", Sink(tmp_path)
    committer = DeltaCommitter(spark, "t", str(table), StorageReader(local_roots=[str(tmp_path)]))
    a = [{"id": i, "name": f"n{i}", "addr": {"city": "Oslo", "geo": {"lat": 1.5}}, "note": None} for i in range(5)]
    b = [
        {"id": 10 + i, "amount": i * 0.5, "tags": ["x", "y"][: i % 3], "meta": {"src": "b", "depth": {"n": i}}}
        for i in range(6)
    ]
    a2 = [{"id": 20 + i, "addr": {"city": "Rome", "geo": {"lat": 2.0, "lon": 3.25}}, "note": "hi"} for i in range(4)]
    files, sent = [], []
    for topic, partition, values, fmt in (
        ("a", 0, a, FileFormat.JSONL),
        ("b", 0, b, FileFormat.PARQUET),
        ("a", 1, a2, FileFormat.JSONL),
    ):
        p, env = sink.write(topic, partition, values, fmt)
        files.append(p)
        sent.extend(env)
    commit_all(committer, TableState("t"), files)
    assert_holds(spark, table, sent)


def test_a_null_only_column_never_types_the_table(spark: Any, tmp_path: Path) -> None:
    """A file whose ``score`` is always null (Spark would type it string) gives the table no
    ``score`` column; the next round's numbers make it a long column, in place or rewritten."""
    table, sink = tmp_path / "t", Sink(tmp_path)
    committer = DeltaCommitter(spark, "t", str(table), StorageReader(local_roots=[str(tmp_path)]))
    state = TableState("t")
    p1, e1 = sink.write("a", 0, [{"id": i, "score": None} for i in range(3)], FileFormat.JSONL)
    commit_all(committer, state, [p1])
    schema = {f.name: f.dataType.simpleString() for f in spark.read.format("delta").load(str(table)).schema.fields}
    assert "score" not in schema
    p2, e2 = sink.write("a", 0, [{"id": 3, "score": 7}, {"id": 4, "score": None}], FileFormat.JSONL)
    p3, e3 = sink.write("a", 1, [{"id": 5, "score": None}], FileFormat.JSONL)
    commit_all(committer, state, [p2, p3])
    schema = {f.name: f.dataType.simpleString() for f in spark.read.format("delta").load(str(table)).schema.fields}
    assert schema["score"] == "bigint"
    assert_holds(spark, table, [*e1, *e2, *e3])


def test_a_conflicting_file_is_refused_naming_the_column_and_both_types(spark: Any, tmp_path: Path) -> None:
    table, sink = tmp_path / "t", Sink(tmp_path)
    committer = DeltaCommitter(spark, "t", str(table), StorageReader(local_roots=[str(tmp_path)]))
    good, sent = sink.write("a", 0, [{"id": 1, "x": 5}], FileFormat.JSONL)
    bad, _ = sink.write("a", 1, [{"id": 2, "x": {"deep": 1}}], FileFormat.JSONL)
    state = TableState("t")
    with pytest.raises(SchemaMismatchError) as caught:
        commit_all(committer, state, [good, bad])
    assert caught.value.path == bad.file.path
    assert "column 'x' is struct in this file but long in another file of the round" in caught.value.message
    commit_all(committer, TableState("t"), [good])  # the coordinator quarantines it; the rest commits
    assert_holds(spark, table, sent)


def test_numbers_widen_only_with_type_widening_on_and_as_delta_allows(spark: Any, tmp_path: Path) -> None:
    """Parquet int32 then int64 (plain, in place): refused while ``type_widening`` is off (delta-rs
    cannot read a table with the feature); with it on the column widens to long and Spark returns
    every value; a double for that column is refused (Delta cannot widen long to double)."""
    table, sink = tmp_path / "t", Sink(tmp_path)
    storage = StorageReader(local_roots=[str(tmp_path)])
    committer = DeltaCommitter(spark, "t", str(table), storage, type_widening=True)
    state = TableState("t")
    narrow = pa.schema([("id", pa.int64()), ("n", pa.int32())])
    p1, e1 = sink.write(
        "a", 0, [{"id": 1, "n": 7}], FileFormat.PARQUET, envelope=False, schema=narrow, under=table / "data"
    )
    commit_all(committer, state, [p1])
    wide = pa.schema([("id", pa.int64()), ("n", pa.int64())])
    p2, e2 = sink.write(
        "a", 0, [{"id": 2, "n": 2**40}], FileFormat.PARQUET, envelope=False, schema=wide, under=table / "data"
    )
    with pytest.raises(SchemaMismatchError, match="type_widening: true would widen it to long"):
        commit_all(DeltaCommitter(spark, "t", str(table), storage), TableState("t", state.committed), [p2])
    commit_all(committer, state, [p2])
    df = spark.read.format("delta").load(str(table))
    assert df.schema["n"].dataType.simpleString() == "bigint"
    assert DeltaTable(str(table)).metadata().configuration.get("delta.enableTypeWidening") == "true"
    rows = [r.asDict() for r in df.collect()]  # delta-rs reads no table with the typeWidening feature
    assert sorted((r["id"], r["n"]) for r in rows) == [(1, 7), (2, 2**40)]
    p3, _ = sink.write("a", 0, [{"id": 3, "n": 0.5}], FileFormat.JSONL, envelope=False)
    with pytest.raises(SchemaMismatchError, match="Delta cannot widen long to double"):
        commit_all(committer, state, [p3])


def test_the_guard_refuses_a_round_whose_schema_merge_is_turned_off(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the reconciliation replaced by "the first file's schema wins" (what one
    ``spark.read.parquet`` of many files does), the guard sees a file's columns missing."""
    table, sink = tmp_path / "t", Sink(tmp_path)
    committer = DeltaCommitter(spark, "t", str(table), StorageReader(local_roots=[str(tmp_path)]))
    p1, _ = sink.write("a", 0, [{"id": 1, "x": 5}], FileFormat.JSONL)
    p2, _ = sink.write("b", 0, [{"id": 2, "y": {"z": "s"}}], FileFormat.JSONL)

    def first_wins(table_schema: Any, files: Any, **_: Any) -> RoundSchema:
        return RoundSchema(files[0].schema, {})

    monkeypatch.setattr(append_round, "reconcile", first_wins)
    with pytest.raises(RoundShortfallError, match=r"the columns \['y.z'\] of .*b-0-0 would not be written"):
        commit_all(committer, TableState("t"), [p1, p2])
    assert not (table / "_delta_log").exists()


def test_an_enveloped_file_outside_an_in_place_tables_root_is_rewritten(spark: Any, tmp_path: Path) -> None:
    table, sink = tmp_path / "t", Sink(tmp_path)
    committer = DeltaCommitter(
        spark, "t", str(table), StorageReader(local_roots=[str(tmp_path)]), placement=Placement.IN_PLACE
    )
    p, sent = sink.write("a", 0, [{"id": i, "v": f"s{i}"} for i in range(4)], FileFormat.PARQUET)
    assert not p.file.path.startswith(f"file://{table}")
    commit_all(committer, TableState("t"), [p])
    assert_holds(spark, table, sent)
    adds = [json.loads(line).get("add") for line in (table / "_delta_log" / f"{0:020d}.json").read_text().splitlines()]
    assert all(a["path"].startswith("part-") for a in adds if a)  # written under the root, not added from outside


def debezium_rows(spark: Any, table: Path) -> list[dict[int, dict[str, Any]]]:
    out = []
    for rows in read_both(spark, table):
        out.append({r["id"]: {k: v for k, v in r.items() if not k.startswith("_kafka_")} for r in rows})
    return out


@pytest.mark.parametrize("fmt", [FileFormat.JSONL, FileFormat.PARQUET])
def test_a_debezium_round_of_deletes_only_commits_in_the_round_it_arrives(
    spark: Any, tmp_path: Path, fmt: FileFormat
) -> None:
    """Round 1 creates five rows; round 2 holds only deletes (``after`` null in every record) and,
    in a file of its own, the tombstones Debezium sends after them: it commits, the keys go."""
    table, sink = tmp_path / "t", Sink(tmp_path)
    spec = UpsertSpec(("id",), cdc=Cdc.DEBEZIUM)
    committer = DeltaCommitter(spark, "t", str(table), StorageReader(local_roots=[str(tmp_path)]), upsert=spec)
    state = TableState("t")
    live = {i: {"id": i, "email": f"u{i}@x", "tags": {"vip": i % 2 == 0}} for i in range(5)}
    creates = [{"before": None, "after": row, "op": "c", "source": {"lsn": i}} for i, row in live.items()]
    p1, _ = sink.write("db", 0, creates, fmt, keys=[json.dumps({"id": i}) for i in live])
    commit_all(committer, state, [p1])
    assert all(rows == live for rows in debezium_rows(spark, table))
    deletes = [{"before": live.pop(i), "after": None, "op": "d", "source": {"lsn": 10 + i}} for i in (1, 3)]
    p2, _ = sink.write("db", 0, deletes, fmt, keys=[json.dumps({"id": i}) for i in (1, 3)])
    p3, _ = sink.write("db", 1, [None, None], fmt, keys=[json.dumps({"id": i}) for i in (1, 3)])
    record = commit_all(committer, state, [p2, p3])
    assert record.version == 1
    assert all(rows == live for rows in debezium_rows(spark, table))


def test_a_tombstone_only_file_commits_beside_normal_files_in_one_round(spark: Any, tmp_path: Path) -> None:
    table, sink = tmp_path / "t", Sink(tmp_path)
    spec = UpsertSpec(("id",), delete_on_tombstone=True)
    committer = DeltaCommitter(spark, "t", str(table), StorageReader(local_roots=[str(tmp_path)]), upsert=spec)
    state = TableState("t")
    first = [{"id": i, "name": f"n{i}", "score": i * 1.5} for i in range(6)]
    p1, _ = sink.write("u", 0, first, FileFormat.PARQUET, keys=[json.dumps({"id": i}) for i in range(6)])
    commit_all(committer, state, [p1])
    as_the_sink = pa.schema(
        [("key", pa.string()), ("value", pa.string()), ("offset", pa.int64())]
    )  # the stand-in's types
    p2, _ = sink.write(
        "u", 0, [None, None], FileFormat.PARQUET, keys=[json.dumps({"id": i}) for i in (0, 2)], schema=as_the_sink
    )
    later = [{"id": 4, "name": "again", "score": None}, {"id": 9, "name": "new", "score": 2.0}]
    p3, _ = sink.write("u", 1, later, FileFormat.PARQUET, keys=[json.dumps({"id": 4}), json.dumps({"id": 9})])
    record = commit_all(committer, state, [p2, p3])
    assert record.version == 1
    model = {r["id"]: r for r in first if r["id"] not in (0, 2)} | {r["id"]: r for r in later}
    assert all(rows == model for rows in debezium_rows(spark, table))


def test_an_upsert_field_null_in_a_whole_round_takes_its_type_from_a_later_round(spark: Any, tmp_path: Path) -> None:
    """A nested field null in every record of the first round gives the table no type for it (not
    string); the next round's values type it, and both readers return every value."""
    table, sink = tmp_path / "t", Sink(tmp_path)
    spec = UpsertSpec(("id",), delete_on_tombstone=True)
    committer = DeltaCommitter(spark, "t", str(table), StorageReader(local_roots=[str(tmp_path)]), upsert=spec)
    state = TableState("t")
    first = [{"id": i, "a": {"x": None, "y": f"y{i}"}, "z": None} for i in range(3)]
    p1, _ = sink.write("u", 0, first, FileFormat.JSONL, keys=[{"id": i} for i in range(3)])
    commit_all(committer, state, [p1])
    later = [{"id": 1, "a": {"x": 5, "y": "again"}, "z": [True]}, {"id": 7, "a": {"x": None, "y": None}, "z": None}]
    p2, _ = sink.write("u", 0, later, FileFormat.JSONL, keys=[{"id": 1}, {"id": 7}])
    commit_all(committer, state, [p2])
    model = {r["id"]: r for r in first} | {r["id"]: r for r in later}
    for rows in debezium_rows(spark, table):
        assert set(rows) == set(model)
        assert all(same(model[k], rows[k]) for k in model), rows


def test_the_record_timestamp_is_one_type_whatever_format_wrote_it(spark: Any, tmp_path: Path) -> None:
    """Aiven's JSON lines write the record timestamp as ISO-8601 text, its CSV and Parquet as epoch
    millis (the stand-in's Parquet as a timestamp): one round of all four lands one timestamp
    column holding the same instants. A table whose column is epoch millis keeps it so."""
    import base64
    from datetime import UTC, datetime

    from lakegate_core.protocol import CsvLayout

    millis = [1_700_000_000_123, 1_700_000_001_000]
    iso = ["2023-11-14T22:13:20.123Z", "2023-11-14T22:13:21Z"]  # ISO_INSTANT drops a zero fraction
    land = tmp_path / "landing"
    land.mkdir()
    files = []

    def add(name: str, fmt: FileFormat, data: bytes, csv: CsvLayout | None = None) -> None:
        (land / name).write_bytes(data)
        f = DataFile(f"file://{land / name}", name.split("-")[0], 0, 0, 1, len(data), fmt, csv=csv)
        files.append(PendingFile(f, name, "sc"))

    add(
        "j-0-0",
        FileFormat.JSONL,
        "\n".join(json.dumps({"value": {"id": i}, "offset": i, "timestamp": t}) for i, t in enumerate(iso)).encode(),
    )
    b64 = base64.b64encode(b'{"id": 9}').decode()
    add(
        "c-0-0",
        FileFormat.CSV,
        "\n".join(f"{b64},{i},{m}" for i, m in enumerate(millis)).encode(),
        CsvLayout(("value", "offset", "timestamp")),
    )
    for name, ts_type, ts in (("p-0-0", pa.int64(), millis), ("q-0-0", pa.timestamp("ms", tz="UTC"), millis)):
        schema = pa.schema([("value", pa.struct([("id", pa.int64())])), ("offset", pa.int64()), ("timestamp", ts_type)])
        rows = [{"value": {"id": i}, "offset": i, "timestamp": t} for i, t in enumerate(ts)]
        buf = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), buf)
        add(name, FileFormat.PARQUET, buf.getvalue())
    table = tmp_path / "t"
    storage = StorageReader(local_roots=[str(tmp_path)])
    commit_all(DeltaCommitter(spark, "t", str(table), storage), TableState("t"), files)
    df = spark.read.format("delta").load(str(table))
    assert df.schema["_kafka_timestamp"].dataType.simpleString() == "timestamp"
    got = sorted(r[0] for r in df.selectExpr("unix_millis(_kafka_timestamp)").collect())
    assert got == sorted(millis * 4)  # each format's two records, the same two instants
    delta_rs = DeltaTable(str(table)).to_pyarrow_table().column("_kafka_timestamp").to_pylist()
    assert sorted({t.astimezone(UTC) for t in delta_rs}) == [datetime.fromtimestamp(m / 1000, UTC) for m in millis]

    old = tmp_path / "old"  # a table whose column was made epoch millis
    plain = pa.table({"id": [1], "_kafka_timestamp": pa.array([5], pa.int64())})
    (land / "o-0-0").parent.mkdir(exist_ok=True)
    pq.write_table(plain, land / "o-0-0")
    first = DataFile(f"file://{land / 'o-0-0'}", "o", 0, 0, 0, (land / "o-0-0").stat().st_size, FileFormat.PARQUET)
    committer, state = DeltaCommitter(spark, "old", str(old), storage), TableState("old")
    commit_all(committer, state, [PendingFile(first, "o", "sc")])
    lines = [json.dumps({"value": {"id": 2 + i}, "offset": 1 + i, "timestamp": t}) for i, t in enumerate(iso)]
    (land / "o-0-1").write_text("\n".join(lines))
    jsonl = DataFile(f"file://{land / 'o-0-1'}", "o", 0, 1, 2, (land / "o-0-1").stat().st_size, FileFormat.JSONL)
    commit_all(committer, state, [PendingFile(jsonl, "j", "sc")])
    df = spark.read.format("delta").load(str(old))
    assert df.schema["_kafka_timestamp"].dataType.simpleString() == "bigint"
    assert sorted(r[0] for r in df.select("_kafka_timestamp").collect()) == [5, *millis]


def test_a_round_of_many_small_rewritten_files_writes_one_table_file_a_slice(spark: Any, tmp_path: Path) -> None:
    """Spark reads small Parquet files ~32 to a task: a round of 100 enveloped files (500 records,
    one slice) is still written as one table file, every record whole."""
    table, sink = tmp_path / "t", Sink(tmp_path)
    committer = DeltaCommitter(spark, "t", str(table), StorageReader(local_roots=[str(tmp_path)]))
    files, sent = [], []
    for n in range(100):
        p, envelopes = sink.write(
            f"t{n % 4}", n % 3, [{"id": n * 5 + i, "v": f"s{n}-{i}"} for i in range(5)], FileFormat.PARQUET
        )
        files.append(p)
        sent.extend(envelopes)
    commit_all(committer, TableState("t"), files)
    assert_holds(spark, table, sent)
    assert len(DeltaTable(str(table)).file_uris()) == 1
