"""Which files of a Delta table may hold keys in a round's range, from the table's log alone.

Called by :class:`~commit_service.delta.upsert.UpsertWriter` before it asks Delta. An upsert round
of keys above the table's (an identity, a sequence) touches no file, and Delta finds that out in
``txn.filterFiles``, which rebuilds the snapshot's state with Spark jobs: three jobs and about a
second of a round of 50,000 records (docs/performance.md). Lakegate writes the log it would read,
so it reads the same thing itself: the key columns' statistics of the live files at the
transaction's read version, kept between rounds and brought forward by each new JSON commit (the
newest checkpoint's ``add`` column is read when the service starts, or when the table is not the
one it kept). When no file can hold a changed key, the round registers its read predicates as
``filterFiles`` would, so Delta's conflict detection is the same, and writes its rows.

The answer may keep a file in that cannot hold a key, never the reverse: a file whose statistics
lack a key column, or hold a value this reader does not compare with certainty (only integers,
decimals and dates, the types a round's range has), may hold any key. Anything about the log it
does not understand raises :class:`~commit_service.delta.log.LogReadError`, and the caller asks Delta.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from commit_service.delta.log import LogReadError, commit_uri, log_segment

if TYPE_CHECKING:
    from commit_service.storage.reader import StorageReader

Limits = Mapping[str, tuple[Any, Any]]  # key column -> (least, greatest) of a round's keys


@dataclass
class KeyRanges:
    """The live files of one table version and their key columns' (min, max) statistics, as the
    log holds them (JSON values; a column without both is left out)."""

    key: tuple[str, ...]
    version: int = -1
    table_id: str | None = None
    files: dict[str, dict[str, tuple[Any, Any]]] = field(default_factory=dict)

    def apply(self, version: int, actions: Iterable[Mapping[str, Any]]) -> None:
        """Bring the state to ``version`` with that commit's actions. A commit that re-adds a file
        with a new deletion vector also removes its old entry (the same path): removes go first."""
        if version != self.version + 1:
            raise LogReadError(f"commit {version} after version {self.version}")
        adds: list[Mapping[str, Any]] = []
        for action in actions:
            if "remove" in action:
                self.files.pop(str(action["remove"]["path"]), None)
            elif "add" in action:
                adds.append(action["add"])
            elif "metaData" in action:
                self.table_id = str(action["metaData"]["id"])
        for add in adds:
            self.add(add)
        self.version = version

    def add(self, add: Mapping[str, Any]) -> None:
        """One live file (a checkpoint's ``add`` row, or a commit's ``add`` action)."""
        self.files[str(add["path"])] = self._ranges(add.get("stats"))

    def _ranges(self, stats: str | None) -> dict[str, tuple[Any, Any]]:
        if not stats:
            return {}
        parsed = json.loads(stats, parse_float=Decimal)
        low, high = parsed.get("minValues") or {}, parsed.get("maxValues") or {}
        return {k: (low[k], high[k]) for k in self.key if low.get(k) is not None and high.get(k) is not None}

    def may_hold(self, limits: Limits) -> bool:
        """Whether any live file's statistics leave room for a key within ``limits``."""
        return any(not _outside(ranges, limits) for ranges in self.files.values())


def _outside(ranges: Mapping[str, tuple[Any, Any]], limits: Limits) -> bool:
    """Whether a file's statistics prove that none of its rows has a key within ``limits``: some
    key column's (min, max) is known, comparable and disjoint from the round's."""
    for column, (lo, hi) in limits.items():
        if column not in ranges:
            continue
        low, high = (_comparable(v, lo) for v in ranges[column])
        if low is not None and high is not None and (high < lo or low > hi):
            return True
    return False


def _comparable(value: Any, like: Any) -> Any | None:
    """A statistics value as the type of the round's bound ``like``; None when not certain."""
    if isinstance(value, bool) or isinstance(like, bool):
        return None
    if isinstance(like, int):
        return value if isinstance(value, int) else None
    if isinstance(like, Decimal):
        return Decimal(value) if isinstance(value, (int, Decimal)) else None
    if isinstance(like, dt.date) and not isinstance(like, dt.datetime) and isinstance(value, str):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            return None
    return None


class KeyRangeLog:
    """One table's :class:`KeyRanges`, kept between rounds and read forward from its log (owned by
    the table's UpsertWriter: one round at a time)."""

    def __init__(self, storage: StorageReader, table_root: str, key: tuple[str, ...]) -> None:
        self.storage = storage
        self.table_root = table_root
        self.key = key
        self._kept: KeyRanges | None = None

    def at(self, version: int, table_id: str) -> KeyRanges:
        """The table's files at ``version`` of table ``table_id`` (the transaction's read
        version and its metadata's id); raises LogReadError when unsure."""
        try:
            kept = self._kept
            self._kept = None  # until it is whole again
            if kept is None or kept.version > version or kept.table_id != table_id:
                kept = self._load(version)
            for v in range(kept.version + 1, version + 1):
                kept.apply(v, _actions(self.storage.read_own(commit_uri(self.table_root, v))))
            if kept.table_id != table_id:
                raise LogReadError(f"the log's table is {kept.table_id}, the transaction's {table_id}")
        except LogReadError:
            raise
        except Exception as exc:  # storage, Parquet or JSON trouble: the caller asks Delta
            raise LogReadError(f"{type(exc).__name__}: {exc}") from exc
        self._kept = kept
        return kept

    def _load(self, version: int) -> KeyRanges:
        """The state at the newest checkpoint at or below ``version`` (no checkpoint: before version 0)."""
        segment = log_segment(self.storage, self.table_root, version)
        state = KeyRanges(self.key)
        if not segment.checkpoint:
            return state
        for part in segment.checkpoint:
            for add in self.storage.read_own_fields(part, ("add.path", "add.stats")):
                if add["path"] is not None:  # a row of another action
                    state.add(add)
            for meta in self.storage.read_own_fields(part, ("metaData.id",)):
                if meta["id"] is not None:
                    state.table_id = str(meta["id"])
        state.version = segment.version - len(segment.commits)
        return state


def _actions(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
