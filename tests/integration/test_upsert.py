"""Upsert and Debezium CDC tables on real Spark + Delta, read back with delta-rs.

Each test lands files as the S3 sink writes them (``format.output.fields=key,value,offset``: JSON
lines and Parquet), commits them in rounds through :class:`DeltaCommitter` with ``upsert=``, and
compares the table after every round with a model computed here, independently, from the records:
one row per live key holding its latest value. The partitions' ``txn`` versions must equal the
offsets committed, and a round sent again must change nothing.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from commit_service.delta.committer import DeltaCommitter
from commit_service.delta.txn import app_id
from commit_service.domain.maintenance import MaintenancePolicy
from commit_service.domain.state import TableState
from commit_service.domain.upsert import Cdc, UpsertSpec
from commit_service.errors import CommitError, DataFileError
from commit_service.storage.reader import StorageReader
from lakegate_core.protocol import FileFormat
from lakegate_core.status import MaintenanceKind
from lakegate_core.types import TopicPartition
from lakegate_stack.delta_read import live_rows
from tests.delta_helpers import checkpoint_in_thread, commit_all
from tests.upsert_helpers import Landing, debezium_model, debezium_round, upsert_model, upserts_and_tombstones


def rows(table: Path) -> dict[int, dict[str, Any]]:
    """The table as delta-rs reads it: key -> row (the _kafka_* columns left out)."""
    out = {}
    for r in live_rows(DeltaTable(str(table))):
        assert r["id"] not in out, f"key {r['id']} is in the table twice"
        out[r["id"]] = {k: v for k, v in r.items() if not k.startswith("_kafka_") and v is not None}
    return out


def deletion_vectors(table: Path) -> dict[str, dict[str, Any]]:
    """The table's live files that carry a deletion vector, read from the log's JSON: path -> vector."""
    live: dict[str, dict[str, Any]] = {}
    for commit in sorted((table / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in commit.read_text().splitlines()]
        for action in actions:  # a commit re-adding a file with a vector removes its old entry too
            live.pop(action.get("remove", {}).get("path"), None)
        for action in actions:
            if "add" in action:
                live[action["add"]["path"]] = action["add"].get("deletionVector")
    return {path: dv for path, dv in live.items() if dv}


def check_txn(table: Path, topic: str, landing: Landing) -> None:
    t = DeltaTable(str(table))
    for partition, end in landing.next.items():
        assert t.transaction_version(app_id("t", TopicPartition(topic, partition))) == end


@pytest.mark.parametrize(
    ("fmt", "vectors", "key_text"),
    [
        (FileFormat.JSONL, True, False),
        (FileFormat.PARQUET, True, False),
        (FileFormat.PARQUET, True, True),  # what the sink's Parquet output writes for JSON keys
        (FileFormat.JSONL, False, False),
    ],
)
def test_upserts_and_tombstones_equal_the_model_round_after_round(
    spark: Any, tmp_path: Path, fmt: FileFormat, vectors: bool, key_text: bool
) -> None:
    table = tmp_path / "t"
    spec = UpsertSpec(("id",), delete_on_tombstone=True, deletion_vectors=vectors)
    committer = DeltaCommitter(spark, "t", str(table), StorageReader(local_roots=[str(tmp_path)]), upsert=spec)
    landing, state, sent = Landing(tmp_path, "users"), TableState("t"), []
    rng = random.Random(7)
    for round_no in range(4):
        files = []
        for partition in (0, 1):
            records = upserts_and_tombstones(rng, partition, round_no)
            pending, envelopes = landing.write(partition, records, fmt, key_text)
            files.append(pending)
            sent.extend(envelopes)
        record = commit_all(committer, state, files)
        assert record.version == round_no
        assert rows(table) == upsert_model(sent, tombstones_delete=True), f"round {round_no}"
        check_txn(table, "users", landing)
    assert bool(deletion_vectors(table)) == vectors
    replay = state.plan(now=0, force=True)
    assert replay is None  # nothing is pending: the coordinator would not commit again
    version = DeltaTable(str(table)).version()
    # a service whose memory is one round behind the table, offered the last round again
    stale = TableState("t", {TopicPartition("users", p): landing.next[p] - 40 for p in (0, 1)})
    with pytest.raises(CommitError, match="offset"):
        commit_all(committer, stale, files)
    assert DeltaTable(str(table)).version() == version
    assert rows(table) == upsert_model(sent, tombstones_delete=True)


@pytest.mark.parametrize("vectors", [True, False])
def test_debezium_creates_updates_deletes_and_skips_tombstones(spark: Any, tmp_path: Path, vectors: bool) -> None:
    table = tmp_path / "t"
    spec = UpsertSpec(("id",), cdc=Cdc.DEBEZIUM, deletion_vectors=vectors)
    committer = DeltaCommitter(spark, "t", str(table), StorageReader(local_roots=[str(tmp_path)]), upsert=spec)
    landing, state, sent = Landing(tmp_path, "db.users"), TableState("t"), []
    live: dict[int, dict[str, Any]] = {}
    rng = random.Random(11)
    for round_no in range(3):
        records = debezium_round(rng, live, round_no)
        pending, envelopes = landing.write(0, records, FileFormat.JSONL)
        sent.extend(envelopes)
        commit_all(committer, state, [pending])
        assert rows(table) == debezium_model(sent) == live, f"round {round_no}"
        check_txn(table, "db.users", landing)


@pytest.mark.parametrize("vectors", [True, False])
def test_a_round_touches_only_the_files_holding_its_keys(spark: Any, tmp_path: Path, vectors: bool) -> None:
    table = tmp_path / "t"
    spec = UpsertSpec(("id",), deletion_vectors=vectors)
    committer = DeltaCommitter(spark, "t", str(table), StorageReader(local_roots=[str(tmp_path)]), upsert=spec)
    landing, state = Landing(tmp_path, "users"), TableState("t")
    for block in range(4):  # four rounds of new keys: four files
        records = [({"id": k}, {"id": k, "name": "v1"}) for k in range(block * 100, block * 100 + 100)]
        commit_all(committer, state, [landing.write(0, records, FileFormat.JSONL)[0]])
    before = set(DeltaTable(str(table)).file_uris())
    assert len(before) == 4 and not deletion_vectors(table)
    for name, keys in (("v2", (150, 160)), ("v3", (160, 170))):  # the second round merges into the first's vector
        update = [({"id": k}, {"id": k, "name": name}) for k in keys]
        commit_all(committer, state, [landing.write(0, update, FileFormat.JSONL)[0]])
    after = set(DeltaTable(str(table)).file_uris())
    if vectors:  # nothing rewritten: the first file keeps 150, 160 and 170, marked deleted; v2's file 160
        assert before < after and len(after - before) == 2
        assert sorted(dv["cardinality"] for dv in deletion_vectors(table).values()) == [1, 3]
    else:  # that file rewritten (twice), three untouched
        assert len(before - after) == 1 and len(after - before) == 1
    got = rows(table)
    assert (got[150]["name"], got[160]["name"], got[170]["name"], len(got)) == ("v2", "v3", "v3", 400)


def test_records_without_the_key_are_refused_naming_the_file(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "t"
    spec = UpsertSpec(("id",))
    committer = DeltaCommitter(spark, "t", str(table), StorageReader(local_roots=[str(tmp_path)]), upsert=spec)
    landing, state = Landing(tmp_path, "users"), TableState("t")
    good, _ = landing.write(0, [({"id": 1}, {"id": 1, "name": "a"})], FileFormat.JSONL)
    bad, _ = landing.write(1, [({"id": 2}, {"name": "no id"})], FileFormat.JSONL)
    with pytest.raises(DataFileError, match="key") as err:
        commit_all(committer, state, [good, bad])
    assert err.value.path == bad.file.path


def test_a_copy_on_write_table_takes_deletion_vectors_when_they_are_turned_on(spark: Any, tmp_path: Path) -> None:
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
    got = rows(table)
    assert len(got) == 50 and {got[k]["name"] for k in range(0, 50, 7)} == {"v4"} and got[1]["name"] == "v1"


@pytest.mark.parametrize("vectors", [True, False])
def test_an_ordering_column_keeps_a_newer_row_against_a_later_round(spark: Any, tmp_path: Path, vectors: bool) -> None:
    table = tmp_path / "t"
    spec = UpsertSpec(("id",), "version", delete_on_tombstone=True, deletion_vectors=vectors)
    committer = DeltaCommitter(spark, "t", str(table), StorageReader(local_roots=[str(tmp_path)]), upsert=spec)
    landing, state = Landing(tmp_path, "users"), TableState("t")

    def row(key: int, version: int | None, name: str) -> tuple[Any, Any]:
        return {"id": key}, {"id": key, "version": version, "name": name}

    rounds: list[list[tuple[Any, Any]]] = [
        [row(k, 10, "first") for k in (1, 2, 3, 4)],
        # older (ignored), equal, newer, no version, a new key
        [row(1, 5, "late"), row(2, 10, "same"), row(3, 20, "newer"), row(4, None, "unversioned"), row(5, 1, "new")],
        [({"id": 3}, None)],  # a tombstone has no version: it applies
        [row(3, 15, "after the delete")],  # nothing left to compare with: applies
    ]
    for records in rounds:
        commit_all(committer, state, [landing.write(0, records, FileFormat.JSONL)[0]])
    got = {k: (v.get("version"), v["name"]) for k, v in rows(table).items()}  # rows() leaves out nulls
    assert got == {
        1: (10, "first"),
        2: (10, "same"),
        3: (15, "after the delete"),
        4: (None, "unversioned"),
        5: (1, "new"),
    }


def test_compaction_and_vacuum_keep_an_upsert_table_with_vectors_equal_to_the_model(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "t"
    spec = UpsertSpec(("id",), delete_on_tombstone=True)
    committer = DeltaCommitter(spark, "t", str(table), StorageReader(local_roots=[str(tmp_path)]), upsert=spec)
    landing, state, sent = Landing(tmp_path, "users"), TableState("t"), []
    rng = random.Random(3)

    def round_of_changes(tag: str) -> None:
        records = [
            ({"id": k}, None if rng.random() < 0.15 else {"id": k, "name": f"{tag}-{rng.randrange(100)}"})
            for k in rng.sample(range(80), 30)
        ]
        pending, envelopes = landing.write(0, records, FileFormat.JSONL)
        sent.extend(envelopes)
        commit_all(committer, state, [pending])

    for n in range(4):
        round_of_changes(f"r{n}")
    assert deletion_vectors(table), "the rounds after the first marked rows"
    run, _ = checkpoint_in_thread(spark, committer)  # Delta Kernel checkpoints a table with deletion vectors, too
    assert run.detail == f"checkpoint of version {run.version_before} (Delta Kernel)"
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # read back from that checkpoint
    assert rows(table) == upsert_model(sent, tombstones_delete=True)
    policy = MaintenancePolicy(enabled=True, vacuum_retention_hours=0)
    committer.maintain(MaintenanceKind.COMPACT, policy)  # OPTIMIZE rewrites the files, dropping marked rows
    assert rows(table) == upsert_model(sent, tombstones_delete=True)
    assert not deletion_vectors(table)
    committer.maintain(MaintenanceKind.VACUUM, policy)
    assert not list(table.glob("deletion_vector_*.bin")), "vacuum left vector files no file refers to"
    round_of_changes("after")  # vectors again, on the compacted file
    assert rows(table) == upsert_model(sent, tombstones_delete=True)
    assert len(list(table.glob("deletion_vector_*.bin"))) == 1
    check_txn(table, "users", landing)


def test_a_first_round_of_tombstones_with_text_keys_types_the_key_as_the_keys_are(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "t"
    spec = UpsertSpec(("id",), delete_on_tombstone=True)
    committer = DeltaCommitter(spark, "t", str(table), StorageReader(local_roots=[str(tmp_path)]), upsert=spec)
    landing, state = Landing(tmp_path, "users"), TableState("t")
    tombstones = [({"id": k}, None) for k in (1, 2)]
    commit_all(committer, state, [landing.write(0, tombstones, FileFormat.PARQUET, key_text=True)[0]])
    assert DeltaTable(str(table)).schema().fields[0].type.type == "long"  # not the keys' text
    upserts = [({"id": k}, {"id": k, "name": f"n{k}"}) for k in (2, 3)]
    commit_all(committer, state, [landing.write(0, upserts, FileFormat.PARQUET, key_text=True)[0]])
    assert rows(table) == {2: {"id": 2, "name": "n2"}, 3: {"id": 3, "name": "n3"}}
