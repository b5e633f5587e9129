"""Upsert and Debezium CDC tables on real Spark, Delta and Iceberg (a JDBC catalog on a sqlite
file), each read back by readers other than Lakegate's: delta-rs for Delta; Spark through the
catalog and pyiceberg from the metadata file for Iceberg, each applying the deletes itself.

Each test lands files as the S3 sink writes them (``format.output.fields=key,value,offset``: JSON
lines and Parquet), commits them in rounds through the table's committer with ``upsert=``, and
compares the table after every round with a model computed here, independently, from the records:
one row per live key holding its latest value. The offsets each table records (Delta's ``txn``
versions, Iceberg's snapshot summary) must equal those committed, and a round sent again must
change nothing. A test the same for both formats is one test parametrized by format.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from commit_service.delta.committer import DeltaCommitter
from commit_service.delta.key_ranges import KeyRangeLog
from commit_service.delta.txn import app_id
from commit_service.delta.upsert import UpsertWriter
from commit_service.domain.maintenance import MaintenancePolicy
from commit_service.domain.state import TableState
from commit_service.domain.upsert import Cdc, UpsertSpec
from commit_service.errors import DataFileError, OffsetsMovedError, RoundShortfallError
from commit_service.iceberg import datafiles
from commit_service.iceberg.committer import IcebergCommitter
from commit_service.iceberg.upsert import IcebergUpsert
from commit_service.storage.reader import StorageReader
from lakegate_core.protocol import FileFormat
from lakegate_core.status import MaintenanceKind
from lakegate_core.types import TopicPartition
from lakegate_stack.delta_read import live_rows
from lakegate_stack.iceberg_read import jdbc_rows
from tests.delta_helpers import checkpoint_in_thread, commit_all
from tests.fixtures import ICEBERG_CATALOG
from tests.upsert_helpers import Landing, debezium_model, debezium_round, upsert_model, upserts_and_tombstones

NAMESPACE = "lakegate_upsert"
Rows = dict[int, dict[str, Any]]


def live(rows: list[dict[str, Any]], reader: str) -> Rows:
    """key -> row (the _kafka_* columns and null fields left out); a key twice fails."""
    out: Rows = {}
    for r in rows:
        assert r["id"] not in out, f"{reader}: key {r['id']} is in the table twice"
        out[r["id"]] = {k: v for k, v in r.items() if not k.startswith("_kafka_") and v is not None}
    return out


@dataclass
class UpsertTable:
    """A table under test, whatever its format: its committer, and its rows and offsets as
    independent readers see them."""

    format: str
    name: str
    committer: Any
    read: Callable[[], dict[str, Rows]]  # reader -> key -> row
    offsets: Callable[[list[TopicPartition]], dict[TopicPartition, int]]

    def assert_model(self, model: Rows, when: str) -> None:
        for reader, got in self.read().items():
            assert got == model, (
                f"{self.format} read by {reader}, {when}: {len(got)} keys read, {len(model)} in the model"
            )

    def assert_offsets(self, topic: str, landing: Landing) -> None:
        want = {TopicPartition(topic, p): n for p, n in landing.next.items()}
        assert self.offsets(list(want)) == want

    def version(self) -> int:
        return int(self.committer.snapshot().version)


def delta_table(spark: Any, tmp_path: Path, spec: UpsertSpec) -> UpsertTable:
    path = tmp_path / "t"
    committer = DeltaCommitter(spark, "t", str(path), StorageReader(local_roots=[str(tmp_path)]), upsert=spec)

    def offsets(tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        t = DeltaTable(str(path))
        return {tp: t.transaction_version(app_id("t", tp)) for tp in tps}

    return UpsertTable(
        "delta", "t", committer, lambda: {"delta-rs": live(live_rows(DeltaTable(str(path))), "delta-rs")}, offsets
    )


def iceberg_table(spark: Any, stack_dir: Path, tmp_path: Path, spec: UpsertSpec, name: str) -> UpsertTable:
    name = f"{NAMESPACE}.{name}"
    location = (tmp_path / "tables" / name).as_uri()
    committer = IcebergCommitter(lambda: spark, name, ICEBERG_CATALOG, location, StorageReader(), upsert=spec)

    def read() -> dict[str, Rows]:
        spark_rows = [r.asDict(recursive=True) for r in spark.table(f"{ICEBERG_CATALOG}.{name}").collect()]
        return {
            "spark": live(spark_rows, "spark"),
            "pyiceberg": live(jdbc_rows(stack_dir / "iceberg-catalog.db", name), "pyiceberg"),
        }

    def offsets(tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        held = committer.snapshot().offsets
        return {tp: held[tp] for tp in tps if tp in held}

    return UpsertTable("iceberg", name, committer, read, offsets)


@pytest.fixture
def upsert_table(
    request: pytest.FixtureRequest, spark: Any, stack_dir: Path, tmp_path: Path
) -> Callable[..., UpsertTable]:
    """A maker of the test's table in a format, with its upsert spec (an Iceberg table is named
    after the test: one table per test and parameters)."""

    def make(table_format: str, spec: UpsertSpec) -> UpsertTable:
        if table_format == "delta":
            return delta_table(spark, tmp_path, spec)
        digest = hashlib.sha1(request.node.name.encode()).hexdigest()[:12]  # the catalog outlives each test
        return iceberg_table(spark, stack_dir, tmp_path, spec, f"t_{digest}")

    return make


def deletion_vectors(table: Path) -> dict[str, dict[str, Any]]:
    """The Delta table's live files that carry a deletion vector, read from the log's JSON: path -> vector."""
    files: dict[str, dict[str, Any]] = {}
    for commit in sorted((table / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in commit.read_text().splitlines()]
        for action in actions:  # a commit re-adding a file with a vector removes its old entry too
            files.pop(action.get("remove", {}).get("path"), None)
        for action in actions:
            if "add" in action:
                files[action["add"]["path"]] = action["add"].get("deletionVector")
    return {path: dv for path, dv in files.items() if dv}


def iceberg_delete_files(spark: Any, name: str) -> int:
    return int(spark.sql(f"SELECT count(*) FROM {ICEBERG_CATALOG}.{name}.delete_files").collect()[0][0])


def marks_replaced_rows(t: UpsertTable, spark: Any, tmp_path: Path) -> bool:
    """Whether replaced rows are marked (Delta's deletion vectors, Iceberg's position deletes)
    rather than their files rewritten."""
    if t.format == "delta":
        return bool(deletion_vectors(tmp_path / "t"))
    return iceberg_delete_files(spark, t.name) > 0


def changes_round(
    rng: random.Random, landing: Landing, sent: list[Any], commit: Callable[[list[Any]], Any], tag: str
) -> None:
    """One round of 30 changes to 80 keys (some tombstones), committed; its records added to ``sent``."""
    records = [
        ({"id": k}, None if rng.random() < 0.15 else {"id": k, "name": f"{tag}-{rng.randrange(100)}"})
        for k in rng.sample(range(80), 30)
    ]
    pending, envelopes = landing.write(0, records, FileFormat.JSONL)
    sent.extend(envelopes)
    commit([pending])


# format, deletion vectors (Delta only: Iceberg always marks rows)
FORMATS = [("delta", True), ("delta", False), ("iceberg", True)]
FORMAT_IDS = ["delta", "delta-copy-on-write", "iceberg"]


@pytest.mark.parametrize(
    ("table_format", "vectors", "fmt", "key_text"),
    [
        (table_format, vectors, fmt, key_text)
        for table_format, vectors in FORMATS
        for fmt, key_text in ((FileFormat.JSONL, False), (FileFormat.PARQUET, False), (FileFormat.PARQUET, True))
        if vectors or fmt is FileFormat.JSONL
    ],
    ids=lambda v: v if isinstance(v, str) else v.value if isinstance(v, FileFormat) else None,
)
def test_upserts_and_tombstones_equal_the_model_round_after_round(
    upsert_table: Callable[..., UpsertTable],
    spark: Any,
    tmp_path: Path,
    table_format: str,
    vectors: bool,
    fmt: FileFormat,
    key_text: bool,
) -> None:
    t = upsert_table(table_format, UpsertSpec(("id",), delete_on_tombstone=True, deletion_vectors=vectors))
    landing, state, sent = Landing(tmp_path, "users"), TableState(t.name), []
    rng = random.Random(7)
    for round_no in range(4):
        files = []
        for partition in (0, 1):
            records = upserts_and_tombstones(rng, partition, round_no)
            pending, envelopes = landing.write(
                partition, records, fmt, key_text
            )  # (key_text: the sink's Parquet of JSON keys)
            files.append(pending)
            sent.extend(envelopes)
        commit_all(t.committer, state, files)
        t.assert_model(upsert_model(sent, tombstones_delete=True), f"round {round_no}")
        t.assert_offsets("users", landing)
    assert marks_replaced_rows(t, spark, tmp_path) == vectors
    assert state.plan(now=0, force=True) is None  # nothing is pending: the coordinator would not commit again
    version = t.version()
    # a service whose memory is one round behind the table, offered the last round again
    stale = TableState(t.name, {TopicPartition("users", p): landing.next[p] - 40 for p in (0, 1)})
    with pytest.raises(OffsetsMovedError, match="offset"):
        commit_all(t.committer, stale, files)
    assert t.version() == version
    t.assert_model(upsert_model(sent, tombstones_delete=True), "after the stale round")


@pytest.mark.parametrize(("table_format", "vectors"), FORMATS, ids=FORMAT_IDS)
def test_debezium_creates_updates_deletes_and_skips_tombstones(
    upsert_table: Callable[..., UpsertTable], tmp_path: Path, table_format: str, vectors: bool
) -> None:
    t = upsert_table(table_format, UpsertSpec(("id",), cdc=Cdc.DEBEZIUM, deletion_vectors=vectors))
    landing, state, sent = Landing(tmp_path, "db.users"), TableState(t.name), []
    alive: Rows = {}
    rng = random.Random(11)
    for round_no in range(3):
        records = debezium_round(rng, alive, round_no)
        pending, envelopes = landing.write(0, records, FileFormat.JSONL)
        sent.extend(envelopes)
        commit_all(t.committer, state, [pending])
        assert debezium_model(sent) == alive
        t.assert_model(alive, f"round {round_no}")
        t.assert_offsets("db.users", landing)


@pytest.mark.parametrize(("table_format", "vectors"), FORMATS, ids=FORMAT_IDS)
def test_a_round_of_only_deletes_commits_and_moves_the_offsets(
    upsert_table: Callable[..., UpsertTable], tmp_path: Path, table_format: str, vectors: bool
) -> None:
    t = upsert_table(table_format, UpsertSpec(("id",), delete_on_tombstone=True, deletion_vectors=vectors))
    landing, state = Landing(tmp_path, "users"), TableState(t.name)
    five = [({"id": k}, {"id": k, "name": f"n{k}"}) for k in range(5)]
    commit_all(t.committer, state, [landing.write(0, five, FileFormat.JSONL)[0]])
    # tombstones of two live keys and of one the table never had
    deletes = [({"id": 1}, None), ({"id": 3}, None), ({"id": 99}, None)]
    commit_all(t.committer, state, [landing.write(0, deletes, FileFormat.JSONL)[0]])
    t.assert_offsets("users", landing)
    t.assert_model({k: {"id": k, "name": f"n{k}"} for k in (0, 2, 4)}, "after the deletes")
    # only tombstones of keys the table does not hold: nothing to write or delete, the offsets still move
    commit_all(t.committer, state, [landing.write(0, [({"id": 1}, None), ({"id": 98}, None)], FileFormat.JSONL)[0]])
    assert landing.next[0] == 10
    t.assert_offsets("users", landing)
    t.assert_model({k: {"id": k, "name": f"n{k}"} for k in (0, 2, 4)}, "after no-op deletes")


@pytest.mark.parametrize(("table_format", "vectors"), FORMATS, ids=FORMAT_IDS)
def test_an_ordering_column_keeps_a_newer_row_against_a_later_round(
    upsert_table: Callable[..., UpsertTable], tmp_path: Path, table_format: str, vectors: bool
) -> None:
    t = upsert_table(table_format, UpsertSpec(("id",), "version", delete_on_tombstone=True, deletion_vectors=vectors))
    landing, state = Landing(tmp_path, "users"), TableState(t.name)

    def row(key: int, version: int | None, label: str) -> tuple[Any, Any]:
        return {"id": key}, {"id": key, "version": version, "name": label}

    rounds: list[list[tuple[Any, Any]]] = [
        [row(k, 10, "first") for k in (1, 2, 3, 4)],
        # older (ignored), equal, newer, no version, a new key
        [row(1, 5, "late"), row(2, 10, "same"), row(3, 20, "newer"), row(4, None, "unversioned"), row(5, 1, "new")],
        [({"id": 3}, None)],  # a tombstone has no version: it applies
        [row(3, 15, "after the delete")],  # nothing left to compare with: applies
    ]
    for records in rounds:
        commit_all(t.committer, state, [landing.write(0, records, FileFormat.JSONL)[0]])
    expected = {
        1: {"id": 1, "version": 10, "name": "first"},
        2: {"id": 2, "version": 10, "name": "same"},
        3: {"id": 3, "version": 15, "name": "after the delete"},
        4: {"id": 4, "name": "unversioned"},  # (null fields are left out)
        5: {"id": 5, "version": 1, "name": "new"},
    }
    t.assert_model(expected, "after four rounds")


@pytest.mark.parametrize(("table_format", "vectors"), FORMATS, ids=FORMAT_IDS)
def test_a_round_reads_only_the_files_its_keys_range_can_be_in(
    upsert_table: Callable[..., UpsertTable],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    table_format: str,
    vectors: bool,
) -> None:
    """The merge reads the table under the round's key range: a file whose statistics put its keys
    outside it is not read (Delta: not a candidate, not scanned; Iceberg: the delete scan is
    bounded), and a round of new keys above the table's reads no file; every value stays the model's."""
    t = upsert_table(table_format, UpsertSpec(("id",), delete_on_tombstone=True, deletion_vectors=vectors))
    landing, state, sent = Landing(tmp_path, "users"), TableState(t.name), []
    read: list[list[tuple[int, int]]] = []  # per merge that read the table: each file's least and greatest key

    def key_span(uri: str) -> tuple[int, int]:
        ids = pq.read_table(uri.removeprefix("file:"), columns=["id"]).column(0).to_pylist()
        return min(ids), max(ids)

    if table_format == "delta":
        writer = UpsertWriter
        for step in ("_mark_deleted", "_rewrite"):
            real = getattr(writer, step)

            def spy(self: Any, txn: Any, table: Any, *args: Any, _real: Any = real) -> Any:
                read.append(sorted(key_span(f) for f in table.inputFiles()))
                return _real(self, txn, table, *args)

            monkeypatch.setattr(writer, step, spy)
    else:
        upsert = IcebergUpsert
        real_deletes = upsert._deletes

        def deletes(self: Any, table: Any, snapshot_id: int, keys: Any, *args: Any) -> Any:
            bounds = args[2] if len(args) > 2 else None
            assert bounds is not None, "the delete scan was not bounded by the round's keys"
            read.append([])  # Iceberg plans the files itself; the bound reaching its scan is what is checked
            return real_deletes(self, table, snapshot_id, keys, *args)

        monkeypatch.setattr(upsert, "_deletes", deletes)

    def commit(records: list[tuple[Any, Any]], when: str) -> None:
        pending, envelopes = landing.write(0, records, FileFormat.JSONL)
        sent.extend(envelopes)
        commit_all(t.committer, state, [pending])
        t.assert_model(upsert_model(sent, tombstones_delete=True), when)

    for block in range(4):  # four rounds of new keys: four files, 0-99 ... 300-399
        commit([({"id": k}, {"id": k, "name": "v1"}) for k in range(block * 100, block * 100 + 100)], f"block {block}")
    if table_format == "delta":  # each round's keys were above every file's: no merge read the table
        assert read == []
    read.clear()
    commit([({"id": k}, {"id": k, "name": "v2"}) for k in (150, 160)], "two updates")
    if table_format == "delta":
        assert read == [[(100, 199)]], read
    read.clear()
    commit([({"id": k}, {"id": k, "name": "new"}) for k in range(500, 510)], "new keys above the table's")
    if table_format == "delta":
        assert read == [], read
    read.clear()
    commit([({"id": 5}, {"id": 5, "name": "v3"}), ({"id": 395}, None)], "an update and a delete far apart")
    if table_format == "delta":  # every file of 5..395, not the one of 500..509
        assert len(read) == 1 and read[0] and all(high < 500 for _, high in read[0]), read
    else:
        assert len(read) == 1
    t.assert_offsets("users", landing)


def test_a_round_the_log_finds_no_file_for_still_conflicts_with_a_writer_adding_its_keys(
    upsert_table: Callable[..., UpsertTable], spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Delta round whose keys no file's statistics hold (read from the log,
    commit_service.delta.key_ranges) skips Delta's file filtering but registers its read
    predicates as that filtering does: another writer's MERGE adding one of the round's keys while
    the round writes makes the round's commit conflict, and the round planned again finds that
    file and marks the row deleted. Every key holds the round's value once."""
    t = upsert_table("delta", UpsertSpec(("id",), delete_on_tombstone=True))
    landing, state = Landing(tmp_path, "users"), TableState(t.name)
    seed, sent = landing.write(0, [({"id": k}, {"id": k, "name": "seed"}) for k in range(6)], FileFormat.JSONL)
    commit_all(t.committer, state, [seed])
    fast: list[bool] = []
    none_hold, write = UpsertWriter._none_hold, UpsertWriter._write

    def spy(self: Any, *args: Any) -> bool:
        fast.append(none_hold(self, *args))
        return fast[-1]

    def write_beside_a_merge(self: Any, txn: Any, rows: Any, files: int) -> Any:
        written = write(self, txn, rows, files)
        if len(fast) == 1:  # the first attempt: another writer inserts key 11 first
            spark.sql(
                f"MERGE INTO delta.`{tmp_path / 't'}` t USING (SELECT 11L AS id, 'other' AS name) s ON t.id = s.id"
                " WHEN NOT MATCHED THEN INSERT (id, name) VALUES (s.id, s.name)"
            )
        return written

    monkeypatch.setattr(UpsertWriter, "_none_hold", spy)
    monkeypatch.setattr(UpsertWriter, "_write", write_beside_a_merge)
    update, envelopes = landing.write(
        0, [({"id": k}, {"id": k, "name": "new"}) for k in (10, 11, 12)], FileFormat.JSONL
    )
    sent += envelopes
    with pytest.raises(OffsetsMovedError):
        commit_all(t.committer, state, [update])
    assert fast == [True], "the log's key ranges did not find the table's files outside the round's keys"
    commit_all(t.committer, state, [])  # planned again, as the coordinator does after a concurrent commit
    assert fast == [True, False], "the round planned again did not see the other writer's file of key 11"
    t.assert_model(upsert_model(sent, tombstones_delete=True), "after the other writer's merge")
    t.assert_offsets("users", landing)
    # the same files and key ranges from the JSON commits and from Delta's own checkpoint of them
    committer, version = t.committer, t.version()
    table_id = DeltaTable(str(tmp_path / "t")).metadata().id
    from_commits = KeyRangeLog(committer.storage, committer.root, ("id",)).at(version, table_id)
    committer.checkpoint()  # of the snapshot Delta holds: the reader takes it and the commits after it
    assert list((tmp_path / "t" / "_delta_log").glob("*.checkpoint.parquet"))
    from_checkpoint = KeyRangeLog(committer.storage, committer.root, ("id",)).at(version, table_id)
    assert from_checkpoint.files == from_commits.files and len(from_commits.files) >= 3
    assert not from_checkpoint.may_hold({"id": (13, 99)}) and from_checkpoint.may_hold({"id": (11, 11)})


@pytest.mark.parametrize("table_format", ["delta", "iceberg"])
def test_records_without_the_key_are_refused_naming_the_file(
    upsert_table: Callable[..., UpsertTable], tmp_path: Path, table_format: str
) -> None:
    t = upsert_table(table_format, UpsertSpec(("id",)))
    landing, state = Landing(tmp_path, "users"), TableState(t.name)
    good, _ = landing.write(0, [({"id": 1}, {"id": 1, "name": "a"})], FileFormat.JSONL)
    bad, _ = landing.write(1, [({"id": 2}, {"name": "no id"})], FileFormat.JSONL)
    with pytest.raises(DataFileError, match="key") as err:
        commit_all(t.committer, state, [good, bad])
    assert err.value.path == bad.file.path


@pytest.mark.parametrize("table_format", ["delta", "iceberg"])
def test_an_upsert_round_that_reads_fewer_records_than_its_files_hold_is_refused(
    upsert_table: Callable[..., UpsertTable], tmp_path: Path, table_format: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The records a round reads are counted in the pass that keeps each key's last change
    (changes.Measured), not by a job of their own: a round of a table that exists, whose files
    are said to hold one record more than Spark read, is refused by the round guard, nothing
    committed."""
    from commit_service.round.convert import FrameReader

    t = upsert_table(table_format, UpsertSpec(("id",)))
    landing, state = Landing(tmp_path, "users"), TableState(t.name)
    first, _ = landing.write(0, [({"id": k}, {"id": k, "name": "a"}) for k in range(3)], FileFormat.JSONL)
    commit_all(t.committer, state, [first])
    version = t.version()
    second, _ = landing.write(0, [({"id": k}, {"id": k, "name": "b"}) for k in range(2, 6)], FileFormat.JSONL)
    real = FrameReader.rows
    monkeypatch.setattr(FrameReader, "rows", lambda self, p, facts: real(self, p, facts) + 1)
    with pytest.raises(RoundShortfallError, match="hold 5 records but 4 rows were written"):
        commit_all(t.committer, state, [second])
    assert t.version() == version


@pytest.mark.parametrize("table_format", ["delta", "iceberg"])
def test_a_first_round_of_tombstones_with_text_keys_types_the_key_as_the_keys_are(
    upsert_table: Callable[..., UpsertTable], spark: Any, tmp_path: Path, table_format: str
) -> None:
    t = upsert_table(table_format, UpsertSpec(("id",), delete_on_tombstone=True))
    landing, state = Landing(tmp_path, "users"), TableState(t.name)
    tombstones = [({"id": k}, None) for k in (1, 2)]
    commit_all(t.committer, state, [landing.write(0, tombstones, FileFormat.PARQUET, key_text=True)[0]])
    if t.format == "delta":
        assert DeltaTable(str(tmp_path / "t")).schema().fields[0].type.type == "long"  # not the keys' text
    else:
        assert spark.table(f"{ICEBERG_CATALOG}.{t.name}").schema["id"].dataType.typeName() == "long"
    upserts = [({"id": k}, {"id": k, "name": f"n{k}"}) for k in (2, 3)]
    commit_all(t.committer, state, [landing.write(0, upserts, FileFormat.PARQUET, key_text=True)[0]])
    t.assert_model({2: {"id": 2, "name": "n2"}, 3: {"id": 3, "name": "n3"}}, "after the upserts")


# -- Delta only: deletion vectors or copy-on-write, and Delta Kernel's checkpoints ---------------


@pytest.mark.parametrize("vectors", [True, False])
def test_a_delta_round_touches_only_the_files_holding_its_keys(
    upsert_table: Callable[..., UpsertTable], tmp_path: Path, vectors: bool
) -> None:
    t = upsert_table("delta", UpsertSpec(("id",), deletion_vectors=vectors))
    table = tmp_path / "t"
    landing, state = Landing(tmp_path, "users"), TableState("t")
    for block in range(4):  # four rounds of new keys: four files
        records = [({"id": k}, {"id": k, "name": "v1"}) for k in range(block * 100, block * 100 + 100)]
        commit_all(t.committer, state, [landing.write(0, records, FileFormat.JSONL)[0]])
    before = set(DeltaTable(str(table)).file_uris())
    assert len(before) == 4 and not deletion_vectors(table)
    for name, keys in (("v2", (150, 160)), ("v3", (160, 170))):  # the second round merges into the first's vector
        update = [({"id": k}, {"id": k, "name": name}) for k in keys]
        commit_all(t.committer, state, [landing.write(0, update, FileFormat.JSONL)[0]])
    after = set(DeltaTable(str(table)).file_uris())
    if vectors:  # nothing rewritten: the first file keeps 150, 160 and 170, marked deleted; v2's file 160
        assert before < after and len(after - before) == 2
        assert sorted(dv["cardinality"] for dv in deletion_vectors(table).values()) == [1, 3]
    else:  # that file rewritten (twice), three untouched
        assert len(before - after) == 1 and len(after - before) == 1
    got = t.read()["delta-rs"]
    assert (got[150]["name"], got[160]["name"], got[170]["name"], len(got)) == ("v2", "v3", "v3", 400)


def test_a_copy_on_write_delta_table_takes_deletion_vectors_when_they_are_turned_on(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "t"
    landing, state = Landing(tmp_path, "users"), TableState("t")
    roots = StorageReader(local_roots=[str(tmp_path)])
    for vectors, name in ((False, "v1"), (False, "v2"), (True, "v3"), (True, "v4")):
        committer = DeltaCommitter(spark, "t", str(table), roots, upsert=UpsertSpec(("id",), deletion_vectors=vectors))
        records = [({"id": k}, {"id": k, "name": name}) for k in range(0, 50, 1 if name == "v1" else 7)]
        commit_all(committer, state, [landing.write(0, records, FileFormat.JSONL)[0]])
        protocol = DeltaTable(str(table)).protocol()
        assert ("deletionVectors" in (protocol.reader_features or [])) == vectors, name
    # v3 still rewrote (the feature arrived with its commit) into one file; v4 marked 8 rows of it
    assert [dv["cardinality"] for dv in deletion_vectors(table).values()] == [8]
    got = live(live_rows(DeltaTable(str(table))), "delta-rs")
    assert len(got) == 50 and {got[k]["name"] for k in range(0, 50, 7)} == {"v4"} and got[1]["name"] == "v1"


def test_compaction_and_vacuum_keep_a_delta_upsert_table_with_vectors_equal_to_the_model(
    upsert_table: Callable[..., UpsertTable], spark: Any, tmp_path: Path
) -> None:
    t = upsert_table("delta", UpsertSpec(("id",), delete_on_tombstone=True))
    table, committer = tmp_path / "t", t.committer
    landing, state, sent = Landing(tmp_path, "users"), TableState("t"), []
    rng = random.Random(3)

    def round_of_changes(tag: str) -> None:
        changes_round(rng, landing, sent, lambda files: commit_all(committer, state, files), tag)

    for n in range(4):
        round_of_changes(f"r{n}")
    assert deletion_vectors(table), "the rounds after the first marked rows"
    run, _ = checkpoint_in_thread(spark, committer)  # Delta Kernel checkpoints a table with deletion vectors, too
    assert run.detail == f"checkpoint of version {run.version_before} (Delta Kernel)"
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # read back from that checkpoint
    t.assert_model(upsert_model(sent, tombstones_delete=True), "read from the checkpoint")
    policy = MaintenancePolicy(enabled=True, vacuum_retention_hours=0)
    committer.maintain(MaintenanceKind.COMPACT, policy)  # OPTIMIZE rewrites the files, dropping marked rows
    t.assert_model(upsert_model(sent, tombstones_delete=True), "after compaction")
    assert not deletion_vectors(table)
    committer.maintain(MaintenanceKind.VACUUM, policy)
    assert not list(table.glob("deletion_vector_*.bin")), "vacuum left vector files no file refers to"
    round_of_changes("after")  # vectors again, on the compacted file
    t.assert_model(upsert_model(sent, tombstones_delete=True), "a round after maintenance")
    assert len(list(table.glob("deletion_vector_*.bin"))) == 1
    t.assert_offsets("users", landing)


# -- Iceberg only: a row delta's validation, and compaction with position deletes ---------------


def test_an_iceberg_round_planned_from_an_older_snapshot_never_lands(
    upsert_table: Callable[..., UpsertTable], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two services on one upsert table: the one overtaken after it wrote its rows and deletes is
    refused inside Iceberg's commit; its deletes (which point at the older snapshot's rows) are in
    no snapshot, and every key holds the winner's value once."""
    spec = UpsertSpec(("id",), delete_on_tombstone=True)
    alive = upsert_table("iceberg", spec)
    zombie = IcebergCommitter(
        lambda: alive.committer.session(),
        alive.name,
        ICEBERG_CATALOG,
        alive.committer.path,
        StorageReader(),
        upsert=spec,
    )
    landing, alive_state = Landing(tmp_path, "users"), TableState(alive.name)
    seed, sent = landing.write(0, [({"id": k}, {"id": k, "name": "seed"}) for k in range(6)], FileFormat.JSONL)
    commit_all(alive.committer, alive_state, [seed])
    zombie_state = TableState(alive.name, {TopicPartition("users", 0): 6})
    update, envelopes = landing.write(
        0, [({"id": k}, {"id": k, "name": "update"}) for k in (1, 2, 7)] + [({"id": 4}, None)], FileFormat.JSONL
    )
    sent += envelopes
    write = datafiles.write
    overtaken: list[Any] = []
    inside: list[bool] = []

    def write_then_be_overtaken(frame: Any, directory: str, *args: Any, **kwargs: Any) -> None:
        write(frame, directory, *args, **kwargs)
        if directory.endswith("-deletes") and not inside:  # the zombie wrote rows and deletes
            inside.append(True)
            overtaken.append(commit_all(alive.committer, alive_state, [update]))

    monkeypatch.setattr(datafiles, "write", write_then_be_overtaken)
    with pytest.raises(OffsetsMovedError) as moved:
        commit_all(zombie, zombie_state, [update])
    assert overtaken, "the other writer did not commit inside the zombie's round"
    assert moved.value.offsets[TopicPartition("users", 0)] == 10
    alive.assert_model(upsert_model(sent, tombstones_delete=True), "after the race")


def test_compaction_and_expiry_keep_an_iceberg_upsert_table_equal_to_the_model(
    upsert_table: Callable[..., UpsertTable], spark: Any, tmp_path: Path
) -> None:
    t = upsert_table("iceberg", UpsertSpec(("id",), delete_on_tombstone=True))
    landing, state, sent = Landing(tmp_path, "users"), TableState(t.name), []
    rng = random.Random(3)

    def round_of_changes(tag: str) -> None:
        changes_round(rng, landing, sent, lambda files: commit_all(t.committer, state, files), tag)

    for n in range(4):
        round_of_changes(f"r{n}")
    deletes_before = iceberg_delete_files(spark, t.name)
    assert deletes_before > 1
    policy = MaintenancePolicy(enabled=True, compact_min_files=2, vacuum_retention_hours=0.0)
    compacted = t.committer.maintain(MaintenanceKind.COMPACT, policy)
    assert compacted.files_after < compacted.files_before, compacted
    # the deletes it applied go, but for the newest round's: their sequence number is the rewritten
    # files' (Iceberg keeps them, pointing at files no longer in the table, until the next compaction)
    assert iceberg_delete_files(spark, t.name) < deletes_before, compacted
    t.assert_model(upsert_model(sent, tombstones_delete=True), "after compaction")
    t.committer.maintain(MaintenanceKind.VACUUM, policy)
    t.assert_model(upsert_model(sent, tombstones_delete=True), "after expiry")
    round_of_changes("after")
    t.assert_model(upsert_model(sent, tombstones_delete=True), "a round after maintenance")
    t.assert_offsets("users", landing)
