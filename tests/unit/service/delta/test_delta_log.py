"""Reading txn versions from a _delta_log without Spark (commit_service.delta.log)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from commit_service.delta.log import LogReadError, LogState, latest_checkpoint, read_log
from commit_service.storage.reader import StorageReader


def commit(log: Path, version: int, *txns: tuple[str, int]) -> None:
    lines = [json.dumps({"commitInfo": {"operation": "STREAMING UPDATE"}})]
    lines += [json.dumps({"txn": {"appId": a, "version": v, "lastUpdated": 0}}) for a, v in txns]
    lines.append(json.dumps({"add": {"path": f"f{version}", "size": 1}}))
    (log / f"{version:020d}.json").write_text("\n".join(lines) + "\n")


def checkpoint(log: Path, version: int, txns: dict[str, int], part: tuple[int, int] | None = None) -> None:
    rows = [{"appId": a, "version": v, "lastUpdated": 0} for a, v in txns.items()] + [None, None]
    name = f"{version:020d}.checkpoint" + (f".{part[0]:010d}.{part[1]:010d}" if part else "") + ".parquet"
    pq.write_table(
        pa.table({"txn": pa.array(rows), "add": pa.array([None] * len(rows), pa.struct([("path", pa.string())]))}),
        log / name,
    )


@pytest.fixture
def log(tmp_path: Path) -> Path:
    folder = tmp_path / "t" / "_delta_log"
    folder.mkdir(parents=True)
    return folder


def read(log: Path) -> LogState:
    return read_log(StorageReader(), f"file://{log.parent}/")


def test_no_table(log: Path) -> None:
    assert read(log) == LogState(-1, {})


def test_commits_only_newest_wins(log: Path) -> None:
    commit(log, 0, ("a", 10), ("b", 5))
    commit(log, 1, ("a", 20))
    commit(log, 2)
    assert read(log) == LogState(2, {"a": 20, "b": 5})


def test_checkpoint_then_later_commits_and_older_commits_gone(log: Path) -> None:
    checkpoint(log, 10, {"a": 100, "b": 50})
    commit(log, 10, ("a", 100))
    commit(log, 11, ("b", 60))
    commit(log, 12, ("c", 1))
    assert read(log) == LogState(12, {"a": 100, "b": 60, "c": 1})


def test_multi_part_checkpoints_count_only_when_complete(log: Path) -> None:
    for v in range(0, 8):
        commit(log, v, ("a", v))
    checkpoint(log, 3, {"a": 3}, (1, 2))
    checkpoint(log, 3, {"b": 7}, (2, 2))
    checkpoint(log, 6, {"a": 6}, (1, 2))  # part 2 of 2 never landed: version 3's checkpoint is the one
    assert latest_checkpoint((p.name for p in log.iterdir()), 7) == (
        3,
        [f"{3:020d}.checkpoint.{1:010d}.{2:010d}.parquet", f"{3:020d}.checkpoint.{2:010d}.{2:010d}.parquet"],
    )
    assert read(log) == LogState(7, {"a": 7, "b": 7})


def test_a_gap_after_the_checkpoint_is_refused(log: Path) -> None:
    checkpoint(log, 5, {"a": 5})
    commit(log, 7, ("a", 7))
    with pytest.raises(LogReadError, match="missing"):
        read(log)


def test_an_unreadable_commit_is_refused(log: Path) -> None:
    commit(log, 0, ("a", 1))
    (log / f"{1:020d}.json").write_text("{not json\n")
    with pytest.raises(LogReadError, match="JSONDecodeError"):
        read(log)


def test_read_at_a_version_ignores_later_commits(log: Path) -> None:
    checkpoint(log, 2, {"a": 2})
    for v in range(2, 6):
        commit(log, v, ("a", v * 10))
    checkpoint(log, 5, {"a": 50})
    assert read_log(StorageReader(), f"file://{log.parent}/", 3) == LogState(3, {"a": 30})
    assert read(log) == LogState(5, {"a": 50})
