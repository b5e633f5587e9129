"""Which files of a Delta table may hold a round's keys, from the log alone
(commit_service.delta.key_ranges): never a file left out that may hold one."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from commit_service.delta.key_ranges import KeyRangeLog, KeyRanges
from commit_service.delta.log import LogReadError
from commit_service.storage.reader import StorageReader

TABLE_ID = "6f1c0d55-0000-4000-8000-000000000001"


def stats(low: dict[str, Any], high: dict[str, Any]) -> str:
    return json.dumps({"numRecords": 10, "minValues": low, "maxValues": high, "nullCount": {}})


def add(path: str, low: dict[str, Any] | None = None, high: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"path": path, "size": 1, "dataChange": True}
    if low is not None and high is not None:
        out["stats"] = stats(low, high)
    return out


def ranges(key: tuple[str, ...], *adds: dict[str, Any]) -> KeyRanges:
    state = KeyRanges(key)
    for a in adds:
        state.add(a)
    return state


# -- the state --------------------------------------------------------------------------------


def test_a_file_outside_the_range_cannot_hold_it_and_one_inside_can() -> None:
    state = ranges(("id",), add("a", {"id": 0}, {"id": 99}), add("b", {"id": 100}, {"id": 199}))
    assert not state.may_hold({"id": (200, 299)})
    assert not state.may_hold({"id": (-10, -1)})
    assert state.may_hold({"id": (150, 160)})
    assert state.may_hold({"id": (99, 99)})  # the bounds are inclusive
    assert not ranges(("id",)).may_hold({"id": (0, 1)})  # no file at all


@pytest.mark.parametrize(
    "file",
    [
        add("no-stats"),
        add("other-column", {"n": 0}, {"n": 1}),
        add("min-only", {"id": 0}, {}),
        add("null-max", {"id": 0}, {"id": None}),
        add("text", {"id": "0"}, {"id": "1"}),  # not comparable with an integer with certainty
        add("boolean", {"id": False}, {"id": False}),
        add("float", {"id": 0.5}, {"id": 0.75}),
    ],
    ids=lambda f: f["path"],
)
def test_a_file_whose_statistics_do_not_settle_it_may_hold_any_key(file: dict[str, Any]) -> None:
    assert ranges(("id",), file).may_hold({"id": (1000, 2000)})


def test_dates_and_decimals_compare_as_their_types() -> None:
    days = ranges(("day",), add("d", {"day": "2024-01-01"}, {"day": "2024-01-31"}))
    assert not days.may_hold({"day": (dt.date(2024, 2, 1), dt.date(2024, 2, 3))})
    assert days.may_hold({"day": (dt.date(2024, 1, 31), dt.date(2024, 2, 3))})
    assert ranges(("day",), add("x", {"day": "not a day"}, {"day": "2024-01-31"})).may_hold(
        {"day": (dt.date(2025, 1, 1), dt.date(2025, 1, 2))}
    )
    money = ranges(("amount",))
    money.add({"path": "m", "stats": '{"minValues": {"amount": 1.50}, "maxValues": {"amount": 2.50}}'})
    assert not money.may_hold({"amount": (Decimal("2.51"), Decimal("3.00"))})
    assert money.may_hold({"amount": (Decimal("2.50"), Decimal("3.00"))})


def test_one_key_column_outside_is_enough() -> None:
    state = ranges(("tenant", "id"), add("a", {"tenant": 1, "id": 0}, {"tenant": 1, "id": 99}))
    assert not state.may_hold({"tenant": (2, 3), "id": (0, 10)})
    assert state.may_hold({"tenant": (1, 1), "id": (0, 10)})
    assert not state.may_hold({"tenant": (1, 1), "id": (100, 110)})


def test_a_commit_removes_before_it_adds_so_a_file_re_added_with_a_vector_stays() -> None:
    state = ranges(("id",), add("a", {"id": 0}, {"id": 9}), add("b", {"id": 10}, {"id": 19}))
    state.version = 4
    vector = {"storageType": "u", "pathOrInlineDv": "x", "sizeInBytes": 1, "cardinality": 1}
    state.apply(
        5,
        [
            {"add": {**add("a", {"id": 0}, {"id": 9}), "deletionVector": vector}},  # listed first
            {"remove": {"path": "a", "deletionVector": None}},
            {"remove": {"path": "b"}},
            {"metaData": {"id": TABLE_ID}},
        ],
    )
    assert set(state.files) == {"a"} and state.version == 5 and state.table_id == TABLE_ID
    assert state.may_hold({"id": (5, 5)}) and not state.may_hold({"id": (10, 19)})
    with pytest.raises(LogReadError, match="commit 7 after version 5"):
        state.apply(7, [])


# -- read from the log ------------------------------------------------------------------------


@pytest.fixture
def log(tmp_path: Path) -> Path:
    folder = tmp_path / "t" / "_delta_log"
    folder.mkdir(parents=True)
    return folder


def commit(log: Path, version: int, *actions: dict[str, Any]) -> None:
    lines = [{"commitInfo": {"operation": "WRITE"}}, *actions]
    (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in lines))


def checkpoint(log: Path, version: int, adds: list[dict[str, Any]], table_id: str = TABLE_ID) -> None:
    add_type = pa.struct([("path", pa.string()), ("stats", pa.string())])
    rows = [{"path": a["path"], "stats": a.get("stats")} for a in adds]
    pq.write_table(
        pa.table(
            {
                "add": pa.array([*rows, None], add_type),
                "metaData": pa.array([None] * len(rows) + [{"id": table_id}], pa.struct([("id", pa.string())])),
            }
        ),
        log / f"{version:020d}.checkpoint.parquet",
    )


def reader(log: Path) -> KeyRangeLog:
    return KeyRangeLog(StorageReader(), f"file://{log.parent}/", ("id",))


def test_the_files_at_a_version_read_forward_one_commit_at_a_time(log: Path) -> None:
    commit(log, 0, {"metaData": {"id": TABLE_ID}}, {"add": add("a", {"id": 0}, {"id": 99})})
    commit(log, 1, {"add": add("b", {"id": 100}, {"id": 199})})
    keys = reader(log)
    assert set(keys.at(1, TABLE_ID).files) == {"a", "b"}
    for old in (0, 1):  # what was read is kept: only the new commit is read next
        (log / f"{old:020d}.json").unlink()
    commit(log, 2, {"remove": {"path": "a"}}, {"add": add("c", {"id": 200}, {"id": 299})})
    state = keys.at(2, TABLE_ID)
    assert state.version == 2 and set(state.files) == {"b", "c"}
    assert not state.may_hold({"id": (0, 99)})


def test_a_checkpoint_then_its_later_commits(log: Path) -> None:
    checkpoint(log, 10, [add("a", {"id": 0}, {"id": 99}), add("s")])
    commit(log, 10, {"add": add("s")})
    commit(log, 11, {"add": add("b", {"id": 100}, {"id": 199})})
    commit(log, 12, {"remove": {"path": "s"}})
    state = reader(log).at(12, TABLE_ID)
    assert set(state.files) == {"a", "b"} and state.table_id == TABLE_ID
    assert not state.may_hold({"id": (200, 300)}) and state.may_hold({"id": (150, 150)})


def test_another_table_at_the_path_is_read_again_and_a_stranger_refused(log: Path) -> None:
    commit(log, 0, {"metaData": {"id": TABLE_ID}}, {"add": add("a", {"id": 0}, {"id": 9})})
    keys = reader(log)
    keys.at(0, TABLE_ID)
    for old in log.iterdir():  # the table dropped and made again at its path
        old.unlink()
    commit(log, 0, {"metaData": {"id": "another"}}, {"add": add("z", {"id": 500}, {"id": 509})})
    assert set(keys.at(0, "another").files) == {"z"}
    with pytest.raises(LogReadError, match="the transaction's"):
        keys.at(0, "a third")


def test_a_missing_commit_is_refused_and_nothing_is_kept(log: Path) -> None:
    commit(log, 0, {"metaData": {"id": TABLE_ID}}, {"add": add("a", {"id": 0}, {"id": 9})})
    keys = reader(log)
    keys.at(0, TABLE_ID)
    with pytest.raises(LogReadError):
        keys.at(2, TABLE_ID)  # commit 1 is not there
    commit(log, 1, {"add": add("b", {"id": 10}, {"id": 19})})
    commit(log, 2, {"remove": {"path": "a"}})
    assert set(keys.at(2, TABLE_ID).files) == {"b"}
