"""Upsert and Debezium CDC tables on real Spark + Iceberg 1.11 (a JDBC catalog on a sqlite file).

Each test lands files as the S3 sink writes them (``format.output.fields=key,value,offset``: JSON
lines and Parquet), commits them in rounds through :class:`IcebergCommitter` with ``upsert=``, and
compares the table after every round with a model computed here from the records (one row per live
key, its latest value), read two ways: Spark through the catalog, and pyiceberg from the metadata
file the catalog's database points at, each applying the position deletes itself. The offsets in
the snapshot summary must equal those committed; a round planned from an older snapshot never
lands.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from commit_service.domain.maintenance import MaintenancePolicy
from commit_service.domain.state import TableState
from commit_service.domain.upsert import Cdc, UpsertSpec
from commit_service.errors import OffsetsMovedError
from commit_service.iceberg import datafiles
from commit_service.iceberg.committer import IcebergCommitter
from commit_service.storage.reader import StorageReader
from lakegate_core.protocol import FileFormat
from lakegate_core.status import MaintenanceKind
from lakegate_core.types import TopicPartition
from lakegate_stack.iceberg_read import jdbc_rows
from tests.delta_helpers import commit_all
from tests.fixtures import ICEBERG_CATALOG
from tests.upsert_helpers import Landing, debezium_model, debezium_round, upsert_model, upserts_and_tombstones

NAMESPACE = "lakegate_upsert"


def committer(spark: Any, name: str, tmp_path: Path, spec: UpsertSpec) -> IcebergCommitter:
    location = (tmp_path / "tables" / name).as_uri()
    return IcebergCommitter(lambda: spark, name, ICEBERG_CATALOG, location, StorageReader(), upsert=spec)


def live(rows: list[dict[str, Any]], reader: str) -> dict[int, dict[str, Any]]:
    """key -> row (the _kafka_* columns and null fields left out); a key twice fails."""
    out: dict[int, dict[str, Any]] = {}
    for r in rows:
        assert r["id"] not in out, f"{reader}: key {r['id']} is in the table twice"
        out[r["id"]] = {k: v for k, v in r.items() if not k.startswith("_kafka_") and v is not None}
    return out


def read_both(spark: Any, stack_dir: Path, name: str) -> dict[str, dict[int, dict[str, Any]]]:
    spark_rows = [r.asDict(recursive=True) for r in spark.table(f"{ICEBERG_CATALOG}.{name}").collect()]
    return {
        "spark": live(spark_rows, "spark"),
        "pyiceberg": live(jdbc_rows(stack_dir / "iceberg-catalog.db", name), "pyiceberg"),
    }


def assert_model(spark: Any, stack_dir: Path, name: str, model: dict[int, dict[str, Any]], when: str) -> None:
    for reader, got in read_both(spark, stack_dir, name).items():
        assert got == model, f"{reader}, {when}: {len(got)} keys read, {len(model)} in the model"


def delete_files(spark: Any, name: str) -> int:
    return int(spark.sql(f"SELECT count(*) FROM {ICEBERG_CATALOG}.{name}.delete_files").collect()[0][0])


@pytest.mark.parametrize(
    ("fmt", "key_text"),
    [(FileFormat.JSONL, False), (FileFormat.PARQUET, False), (FileFormat.PARQUET, True)],
    ids=["jsonl", "parquet", "parquet-text-keys"],
)
def test_upserts_and_tombstones_equal_the_model_round_after_round(
    spark: Any, stack_dir: Path, tmp_path: Path, fmt: FileFormat, key_text: bool
) -> None:
    name = f"{NAMESPACE}.tombstones_{fmt.value}{'_text' if key_text else ''}"
    c = committer(spark, name, tmp_path, UpsertSpec(("id",), delete_on_tombstone=True))
    landing, state, sent = Landing(tmp_path, "users"), TableState(name), []
    rng = random.Random(7)
    for round_no in range(4):
        files = []
        for partition in (0, 1):
            records = upserts_and_tombstones(rng, partition, round_no)
            pending, envelopes = landing.write(partition, records, fmt, key_text)
            files.append(pending)
            sent.extend(envelopes)
        commit_all(c, state, files)
        assert_model(spark, stack_dir, name, upsert_model(sent, tombstones_delete=True), f"round {round_no}")
        assert dict(c.snapshot().offsets) == {TopicPartition("users", p): n for p, n in landing.next.items()}
    assert delete_files(spark, name) > 0, "replaced rows were not marked by position deletes"
    version = c.snapshot().version
    # a service whose memory is one round behind the table, offered the last round again
    stale = TableState(name, {TopicPartition("users", p): landing.next[p] - 40 for p in (0, 1)})
    with pytest.raises(OffsetsMovedError):
        commit_all(c, stale, files)
    assert c.snapshot().version == version
    assert_model(spark, stack_dir, name, upsert_model(sent, tombstones_delete=True), "after the stale round")


def test_debezium_creates_updates_deletes_and_skips_tombstones(spark: Any, stack_dir: Path, tmp_path: Path) -> None:
    name = f"{NAMESPACE}.debezium"
    c = committer(spark, name, tmp_path, UpsertSpec(("id",), cdc=Cdc.DEBEZIUM))
    landing, state, sent = Landing(tmp_path, "db.users"), TableState(name), []
    alive: dict[int, dict[str, Any]] = {}
    rng = random.Random(11)
    for round_no in range(3):
        records = debezium_round(rng, alive, round_no)
        pending, envelopes = landing.write(0, records, FileFormat.JSONL)
        sent.extend(envelopes)
        commit_all(c, state, [pending])
        assert debezium_model(sent) == alive
        assert_model(spark, stack_dir, name, alive, f"round {round_no}")


def test_a_round_of_only_deletes_commits_and_moves_the_offsets(spark: Any, stack_dir: Path, tmp_path: Path) -> None:
    name = f"{NAMESPACE}.only_deletes"
    c = committer(spark, name, tmp_path, UpsertSpec(("id",), delete_on_tombstone=True))
    landing, state = Landing(tmp_path, "users"), TableState(name)
    commit_all(
        c, state, [landing.write(0, [({"id": k}, {"id": k, "name": f"n{k}"}) for k in range(5)], FileFormat.JSONL)[0]]
    )
    # tombstones of two live keys and of one the table never had
    commit_all(
        c, state, [landing.write(0, [({"id": 1}, None), ({"id": 3}, None), ({"id": 99}, None)], FileFormat.JSONL)[0]]
    )
    assert dict(c.snapshot().offsets) == {TopicPartition("users", 0): 8}
    assert_model(spark, stack_dir, name, {k: {"id": k, "name": f"n{k}"} for k in (0, 2, 4)}, "after the deletes")
    # only tombstones of keys the table does not hold: nothing to write or delete, the offsets still move
    commit_all(c, state, [landing.write(0, [({"id": 1}, None), ({"id": 98}, None)], FileFormat.JSONL)[0]])
    assert dict(c.snapshot().offsets) == {TopicPartition("users", 0): 10}
    assert_model(spark, stack_dir, name, {k: {"id": k, "name": f"n{k}"} for k in (0, 2, 4)}, "after no-op deletes")


def test_an_ordering_column_keeps_a_newer_row_against_a_later_round(
    spark: Any, stack_dir: Path, tmp_path: Path
) -> None:
    name = f"{NAMESPACE}.ordering"
    c = committer(spark, name, tmp_path, UpsertSpec(("id",), "version", delete_on_tombstone=True))
    landing, state = Landing(tmp_path, "users"), TableState(name)

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
        commit_all(c, state, [landing.write(0, records, FileFormat.JSONL)[0]])
    expected = {
        1: {"id": 1, "version": 10, "name": "first"},
        2: {"id": 2, "version": 10, "name": "same"},
        3: {"id": 3, "version": 15, "name": "after the delete"},
        4: {"id": 4, "name": "unversioned"},
        5: {"id": 5, "version": 1, "name": "new"},
    }
    assert_model(spark, stack_dir, name, expected, "after four rounds")


def test_a_round_planned_from_an_older_snapshot_never_lands(
    spark: Any, stack_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two services on one upsert table: the one overtaken after it wrote its rows and deletes is
    refused inside Iceberg's commit; its deletes (which point at the older snapshot's rows) are in
    no snapshot, and every key holds the winner's value once."""
    name = f"{NAMESPACE}.race"
    spec = UpsertSpec(("id",), delete_on_tombstone=True)
    alive, zombie = committer(spark, name, tmp_path, spec), committer(spark, name, tmp_path, spec)
    landing, alive_state = Landing(tmp_path, "users"), TableState(name)
    seed, sent = landing.write(0, [({"id": k}, {"id": k, "name": "seed"}) for k in range(6)], FileFormat.JSONL)
    commit_all(alive, alive_state, [seed])
    zombie_state = TableState(name, {TopicPartition("users", 0): 6})
    update, envelopes = landing.write(
        0, [({"id": k}, {"id": k, "name": "update"}) for k in (1, 2, 7)] + [({"id": 4}, None)], FileFormat.JSONL
    )
    sent += envelopes
    write = datafiles.write
    overtaken: list[Any] = []
    inside: list[bool] = []

    def write_then_be_overtaken(frame: Any, directory: str) -> None:
        write(frame, directory)
        if directory.endswith("-deletes") and not inside:  # the zombie wrote rows and deletes
            inside.append(True)
            overtaken.append(commit_all(alive, alive_state, [update]))

    monkeypatch.setattr(datafiles, "write", write_then_be_overtaken)
    with pytest.raises(OffsetsMovedError) as moved:
        commit_all(zombie, zombie_state, [update])
    assert overtaken, "the other writer did not commit inside the zombie's round"
    assert moved.value.offsets[TopicPartition("users", 0)] == 10
    assert_model(spark, stack_dir, name, upsert_model(sent, tombstones_delete=True), "after the race")


def test_compaction_and_expiry_keep_an_upsert_table_equal_to_the_model(
    spark: Any, stack_dir: Path, tmp_path: Path
) -> None:
    name = f"{NAMESPACE}.maintained"
    c = committer(spark, name, tmp_path, UpsertSpec(("id",), delete_on_tombstone=True))
    landing, state, sent = Landing(tmp_path, "users"), TableState(name), []
    rng = random.Random(3)

    def round_of_changes(tag: str) -> None:
        records = [
            ({"id": k}, None if rng.random() < 0.15 else {"id": k, "name": f"{tag}-{rng.randrange(100)}"})
            for k in rng.sample(range(80), 30)
        ]
        pending, envelopes = landing.write(0, records, FileFormat.JSONL)
        sent.extend(envelopes)
        commit_all(c, state, [pending])

    for n in range(4):
        round_of_changes(f"r{n}")
    deletes_before = delete_files(spark, name)
    assert deletes_before > 1
    policy = MaintenancePolicy(enabled=True, compact_min_files=2, vacuum_retention_hours=0.0)
    compacted = c.maintain(MaintenanceKind.COMPACT, policy)
    assert compacted.files_after < compacted.files_before, compacted
    # the deletes it applied go, but for the newest round's: their sequence number is the rewritten
    # files' (Iceberg keeps them, pointing at files no longer in the table, until the next compaction)
    assert delete_files(spark, name) < deletes_before, compacted
    assert_model(spark, stack_dir, name, upsert_model(sent, tombstones_delete=True), "after compaction")
    c.maintain(MaintenanceKind.VACUUM, policy)
    assert_model(spark, stack_dir, name, upsert_model(sent, tombstones_delete=True), "after expiry")
    round_of_changes("after")
    assert_model(spark, stack_dir, name, upsert_model(sent, tombstones_delete=True), "a round after maintenance")
    assert dict(c.snapshot().offsets) == {TopicPartition("users", 0): landing.next[0]}
