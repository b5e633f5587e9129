"""The fidelity property: random record shapes, written as sinks write them, come back whole.

Used by ``tests/integration/test_fidelity.py`` (a bounded number of examples in every CI run) and
by ``scripts/fidelity --examples N --seed S`` (more). One example is a :class:`Case`: 2-3 topics
whose records draw fields from one pool (a field name has one type wherever it appears: nested
structs that gain fields, arrays, unicode and empty strings, longs and doubles, nulls anywhere,
whole files where a field is null), written as JSON lines, JSON arrays, Parquet, Aiven's headerless CSV or
Avro container files (the schema Connect's Avro data would give: every field optional),
with Aiven's envelope or plain, split into files and rounds at random, and committed through the real
:class:`~commit_service.delta.committer.DeltaCommitter` into an append, an upsert or a Debezium table,
unpartitioned or partitioned by a random spec (:func:`partition_specs`).
:func:`check` then reads the table with delta-rs and with Spark and compares every field of every
row with a model computed here from the records alone.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st

from lakegate_core.protocol import CsvLayout, DataFile, FileFormat

MODES = ("append", "upsert", "debezium")
KEYS = 6  # upsert keys per partition: few, so that keys change and are deleted often


@dataclass(frozen=True)
class SinkFile:
    """One file a sink wrote: its records (envelopes) and how it was written."""

    topic: str
    partition: int
    start: int
    envelopes: tuple[dict[str, Any], ...]
    fmt: FileFormat
    envelope: bool
    # the value's own fields and their types (a pool type, see type_strategy): what a schemaful
    # writer (Avro) declares, whether or not a record of the file holds a value
    types: tuple[tuple[str, Any], ...] = ()
    mode: str = "append"  # the records' shape: MODES


@dataclass
class Case:
    """One example: a table mode and the rounds of files committed into it, in order."""

    mode: str
    rounds: list[list[SinkFile]] = field(default_factory=list)
    partition_by: tuple[str, ...] = ()  # the table's ``partition_by`` (empty: unpartitioned)

    def describe(self) -> str:
        files = [f for r in self.rounds for f in r]
        spec = f", partition_by {list(self.partition_by)}" if self.partition_by else ""
        return (
            f"{self.mode}: {len(self.rounds)} rounds, {len(files)} files, "
            f"{sum(len(f.envelopes) for f in files)} records{spec}"
        )


# -- record shapes ---------------------------------------------------------------------------

texts = st.text(st.characters(codec="utf-8"), max_size=6)  # utf-8: no lone surrogates
ATOMS = {
    "long": st.integers(-(2**62), 2**62),
    "double": st.floats(allow_nan=False, allow_infinity=False, width=64).map(lambda x: x if x != 0 else 0.5),
    "string": texts,
    "boolean": st.booleans(),
}


def type_strategy() -> st.SearchStrategy[Any]:
    """A field type: an atom, an array of one, or a struct of 1-3 typed fields (one level deep in
    a struct, two levels deep overall)."""
    atom = st.sampled_from(sorted(ATOMS))
    inner = st.one_of(atom, atom.map(lambda a: ("array", a)))
    nested = st.dictionaries(st.sampled_from(["x", "y", "z", "é"]), inner, min_size=1, max_size=3)
    return st.one_of(atom, atom.map(lambda a: ("array", a)), nested.map(lambda d: ("struct", tuple(sorted(d.items())))))


def value_of(t: Any, draw: Any, *, nulls: bool) -> Any:
    """A value of type ``t`` (None with some probability when ``nulls``); a struct may lack fields
    (a record written before the struct gained them)."""
    if nulls and draw(st.integers(0, 4)) == 0:
        return None
    if isinstance(t, str):
        return draw(ATOMS[t])
    if t[0] == "array":
        return draw(st.lists(ATOMS[t[1]], min_size=0 if t[1] == "string" else 1, max_size=3))
    present = draw(st.lists(st.sampled_from([n for n, _ in t[1]]), unique=True, min_size=1))
    return {n: value_of(ft, draw, nulls=True) for n, ft in t[1] if n in present}


@st.composite
def cases(draw: Any, mode: str | None = None) -> Case:
    """A :class:`Case` (its ``mode`` drawn unless given)."""
    mode = mode or draw(st.sampled_from(MODES))
    pool = draw(
        st.dictionaries(st.sampled_from(["a", "b", "c", "d", "Ünï", "e_f"]), type_strategy(), min_size=1, max_size=4)
    )
    topics = [f"t{i}" for i in range(draw(st.integers(2, 3)))]
    fields_of = {t: draw(st.lists(st.sampled_from(sorted(pool)), unique=True, min_size=1)) for t in topics}
    # an upsert table's files share one format: a schemaless key is JSON text in Parquet and an
    # object in JSON lines, two types of one _kafka_key column (refused, see docs/configuration.md)
    one_format = draw(st.sampled_from(list(FileFormat))) if mode != "append" else None
    case = Case(mode, partition_by=draw(partition_specs(mode, pool, fields_of)))
    next_offset: dict[tuple[str, int], int] = {}
    live: dict[int, dict[str, Any]] = {}  # debezium: each key's current row, for before images
    for _ in range(draw(st.integers(1, 3))):
        files = []
        for topic in draw(st.lists(st.sampled_from(topics), min_size=1, max_size=4)):
            partition = draw(st.integers(0, 1))
            start = next_offset.get((topic, partition), 0)
            fmt = one_format or draw(st.sampled_from(list(FileFormat)))
            envelope = mode != "append" or draw(st.booleans())
            all_null = draw(st.sets(st.sampled_from(fields_of[topic]), max_size=1))  # a field null in the whole file
            envelopes = []
            for i in range(draw(st.integers(1, 5))):
                row = {n: (None if n in all_null else value_of(pool[n], draw, nulls=True)) for n in fields_of[topic]}
                envelopes.append(_record(mode, topic, partition, start + i, row, draw, live))
            next_offset[(topic, partition)] = start + len(envelopes)
            types = tuple((n, pool[n]) for n in fields_of[topic])
            files.append(SinkFile(topic, partition, start, tuple(envelopes), fmt, envelope, types, mode))
        case.rounds.append(files)
    return case


@st.composite
def partition_specs(draw: Any, mode: str, pool: dict[str, Any], fields_of: dict[str, list[str]]) -> tuple[str, ...]:
    """Half the time none; else a transform of the key (``rid``, or the upsert key ``k``: the merge
    then reads only its keys' partitions) and maybe one of a long or string column every topic's
    records have (nulls among them). No identity of a string column: Delta stores an empty string
    partition value as null (its rule, not Lakegate's)."""
    if draw(st.booleans()):
        return ()
    key = "rid" if mode == "append" else "k"
    # (not the key's identity: a round whose other columns are all null would hold nothing but
    # partition columns, which Delta refuses, and Lakegate with it: test_partitioned)
    spec = [draw(st.sampled_from([f"bucket(4, {key})", f"truncate(3, {key})"]))]
    shared = [
        n
        for n in sorted(pool)
        if pool[n] in ("long", "string") and n.isascii() and all(n in f for f in fields_of.values())
    ]
    if shared and draw(st.booleans()):
        column = draw(st.sampled_from(shared))
        spec.append(draw(st.sampled_from([f"bucket(3, {column})", f"truncate(2, {column})"])))
        if pool[column] == "long" and draw(st.booleans()):
            spec[-1] = column
    return tuple(spec)


def late_typed_partition() -> Case:
    """An append table partitioned by ``bucket(3, b)`` whose first round's JSON lines hold ``b``
    null in every record (no type yet: the round waits) and whose second round types it (both
    commit together). Drawn by :func:`cases` now and then; pinned as an explicit example."""
    rounds = []
    for start, b in ((0, None), (2, 7)):
        envelopes = tuple(
            {"key": None, "value": {"b": b, "a": f"x{i}", "rid": f"t0-0-{start + i}"}, "offset": start + i}
            for i in range(2)
        )
        types = (("a", "string"), ("b", "long"))
        rounds.append([SinkFile("t0", 0, start, envelopes, FileFormat.JSONL, False, types)])
    return Case("append", rounds, ("bucket(4, rid)", "bucket(3, b)"))


def nul_partition_value() -> Case:
    """An append table partitioned by ``truncate(2, a)`` of a string: a first round of plain
    values, then a file (JSON lines: its rows rewritten by Spark) whose second record's ``a``
    begins with NUL (U+0000). A Delta table refuses that file, naming it (Spark would write the
    partition's value raw into a path no file system or S3 listing can hold); an Iceberg table
    escapes it in its paths and keeps it. Drawn by :func:`cases` now and then (its texts may hold
    NUL); pinned as an explicit example."""
    rounds = []
    for start, a in ((0, "ok"), (2, "\x00x")):
        envelopes = tuple(
            {"key": None, "value": {"a": a if i else "ok", "rid": f"t0-0-{start + i}"}, "offset": start + i}
            for i in range(2)
        )
        rounds.append([SinkFile("t0", 0, start, envelopes, FileFormat.JSONL, False, (("a", "string"),))])
    return Case("append", rounds, ("truncate(2, a)",))


def _record(
    mode: str, topic: str, partition: int, offset: int, row: dict[str, Any], draw: Any, live: dict[int, Any]
) -> dict[str, Any]:
    """One envelope: append rows carry a unique ``rid``; upsert and Debezium rows a key ``k``
    owned by one topic partition (keys stay in their partition, as Kafka's partitioner keeps them)."""
    if mode == "append":
        value = {**row, "rid": f"{topic}-{partition}-{offset}"}
        return {"key": None, "value": value, "offset": offset}
    owner = (int(topic[1:]) * 2 + partition) * KEYS
    k = owner + draw(st.integers(0, KEYS - 1))
    if mode == "upsert":
        tombstone = draw(st.integers(0, 4)) == 0
        return {"key": {"k": k}, "value": None if tombstone else {**row, "k": k}, "offset": offset}
    if k in live and draw(st.integers(0, 3)) == 0:
        if draw(st.booleans()):  # the tombstone Debezium sends after a delete
            return {"key": {"k": k}, "value": None, "offset": offset}
        before = live.pop(k)
        return {"key": {"k": k}, "value": {"before": before, "after": None, "op": "d"}, "offset": offset}
    after = {**row, "k": k}
    op = "u" if k in live else draw(st.sampled_from(["c", "r"]))
    value = {"before": live.get(k), "after": after, "op": op}
    live[k] = after
    return {"key": {"k": k}, "value": value, "offset": offset}


# -- writing ---------------------------------------------------------------------------------


def name(f: SinkFile) -> str:
    """The object name a sink gives ``f`` (Aiven's prefix naming)."""
    return f"{f.topic}-{f.partition}-{f.start:020d}"


def encode(f: SinkFile) -> tuple[bytes, CsvLayout | None]:
    """``f``'s bytes as the sink writes them, and a CSV file's layout. A schemaless key is its JSON
    text in Parquet (as the sink's Parquet output writes it) and an object in JSON lines; CSV is
    Aiven's (no header, key and value base64 of their JSON text; "plain" is
    ``format.output.fields=value``)."""
    rows = [dict(e) for e in f.envelopes] if f.envelope else [e["value"] for e in f.envelopes]
    if f.fmt is FileFormat.CSV:
        layout = CsvLayout(("key", "value", "offset") if f.envelope else ("value",))
        lines = [",".join(str(e[n]) if n == "offset" else _csv_field(e[n]) for n in layout.fields) for e in f.envelopes]
        return "\n".join(lines).encode(), layout
    if f.fmt is FileFormat.JSONL:
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode(), None
    if f.fmt is FileFormat.JSON:  # Aiven's array framing
        return ("[\n" + ",\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n]").encode(), None
    if f.fmt is FileFormat.AVRO:
        return _avro(f, rows), None
    if f.envelope:
        rows = [{**r, "key": None if r["key"] is None else json.dumps(r["key"])} for r in rows]
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    return buf.getvalue(), None


def _avro(f: SinkFile, rows: list[Any]) -> bytes:
    """An Avro container file of ``rows`` (envelopes, or values), its schema from ``f``'s types as
    Aiven's Avro writer declares it: the envelope a ``connector_records`` record of ``key``,
    ``value`` and ``offset``; every value field a union with null; the codec drawn from the file's
    start offset (null, deflate, snappy), and every other file inside a gzip stream (Aiven's
    default ``file.compression.type``)."""
    names = iter(range(1, 1_000))

    def avro(t: Any) -> Any:
        if isinstance(t, str):
            return t
        if t[0] == "array":
            return {"type": "array", "items": t[1]}
        return record(f"record_{next(names)}", t[1])

    def record(name: str, fields: Any) -> dict[str, Any]:
        typed = [{"name": n, "type": ["null", avro(ft)], "default": None} for n, ft in fields]
        return {"type": "record", "name": name, "fields": typed}

    value = record("Value", [*f.types, ("rid", "string") if f.mode == "append" else ("k", "long")])
    if f.mode == "debezium":  # before and after: the row's one record type, named once
        value = {
            "type": "record",
            "name": "Envelope",
            "fields": [
                {"name": "before", "type": ["null", {**value, "name": "Row"}], "default": None},
                {"name": "after", "type": ["null", "Row"], "default": None},
                {"name": "op", "type": ["null", "string"], "default": None},
            ],
        }
    schema: dict[str, Any] = value
    if f.envelope:
        key = "string" if f.mode == "append" else record("Key", [("k", "long")])
        schema = {
            "type": "record",
            "name": "connector_records",
            "namespace": "io.aiven.avro.output.schema",
            "fields": [
                {"name": "key", "type": ["null", key]},
                {"name": "value", "type": ["null", value]},
                {"name": "offset", "type": "long"},
            ],
        }
    buf = io.BytesIO()
    codec = ("null", "deflate", "snappy")[f.start % 3]
    fastavro.writer(buf, fastavro.parse_schema(schema), rows, codec=codec)
    return gzip.compress(buf.getvalue()) if f.start % 2 else buf.getvalue()


def data_file(f: SinkFile, uri: str, size: int, csv: CsvLayout | None) -> DataFile:
    """The manifest entry of ``f`` stored at ``uri``."""
    return DataFile(uri, f.topic, f.partition, f.start, f.start + len(f.envelopes) - 1, size, f.fmt, csv=csv)


def write(f: SinkFile, root: Path) -> DataFile:
    """``f`` written under the local folder ``root``."""
    data, csv = encode(f)
    path = root / name(f)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data_file(f, f"file://{path}", len(data), csv)


def _csv_field(value: Any) -> str:
    """A key or value as Aiven's CSV holds it: base64 of its JSON text; null an empty field."""
    return "" if value is None else base64.b64encode(json.dumps(value, ensure_ascii=False).encode()).decode()


# -- the model and the check -----------------------------------------------------------------


def model(case: Case) -> dict[Any, dict[str, Any]]:
    """What the table must hold: append, each record's value by ``rid``; upsert and Debezium, each
    live key's last row (records applied in offset order per partition), by ``k``."""
    out: dict[Any, dict[str, Any]] = {}
    envelopes = [e for r in case.rounds for f in r for e in f.envelopes]
    if case.mode == "append":
        return {e["value"]["rid"]: e["value"] for e in envelopes}
    for e in envelopes:  # per key, offsets grow in file order (a key lives in one partition)
        v = e["value"]
        if case.mode == "upsert":
            if v is None:
                out.pop(e["key"]["k"], None)
            else:
                out[v["k"]] = v
        elif v is not None:
            if v["op"] == "d":
                out.pop(v["before"]["k"], None)
            else:
                out[v["after"]["k"]] = v["after"]
    return out


def untyped(case: Case, columns: list[str]) -> list[str]:
    """The ``columns`` no row the table must hold gives a value (so no round may have typed them)."""
    rows = model(case).values()
    return [c for c in columns if all(r.get(c) is None for r in rows)]


def same(expected: Any, got: Any) -> bool:
    """Equal as values: a missing field equals null; numbers compare by value (a long column that
    became double holds the same number)."""
    if isinstance(expected, dict) or isinstance(got, dict):
        a, b = expected or {}, got or {}
        if not isinstance(a, dict) or not isinstance(b, dict):
            return False
        return all(same(a.get(k), b.get(k)) for k in set(a) | set(b))
    if isinstance(expected, list) and isinstance(got, list):
        return len(expected) == len(got) and all(same(x, y) for x, y in zip(expected, got, strict=True))
    if isinstance(expected, bool) or isinstance(got, bool):
        return isinstance(expected, bool) and isinstance(got, bool) and expected == got
    return bool(expected == got)


def differences(
    case: Case, readers: dict[str, list[dict[str, Any]]], derived: frozenset[str] = frozenset()
) -> list[str]:
    """Every way in which what each reader returned differs from :func:`model` (empty: whole); the
    ``derived`` columns (a Delta table's generated partition columns) are not the records'."""
    want = model(case)
    key = "rid" if case.mode == "append" else "k"
    problems = []
    for reader, rows in readers.items():
        got: dict[Any, dict[str, Any]] = {}
        for r in rows:
            row = {k: v for k, v in r.items() if not k.startswith("_kafka_") and k not in derived}
            if row.get(key) in got:
                problems.append(f"{reader}: {key}={row.get(key)!r} twice")
            got[row.get(key)] = row
        for k in sorted(set(want) - set(got), key=str)[:5]:
            problems.append(f"{reader}: {key}={k!r} missing")
        for k in sorted(set(got) - set(want), key=str)[:5]:
            problems.append(f"{reader}: {key}={k!r} should not be there: {got[k]}")
        for k in sorted(set(want) & set(got), key=str):
            if not same(want[k], got[k]):
                problems.append(f"{reader}: {key}={k!r}: wrote {want[k]} read {got[k]}")
    return problems
