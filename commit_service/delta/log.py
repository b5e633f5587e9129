"""Read a table's version and ``txn`` (SetTransaction) versions straight from its ``_delta_log``.

Called by :meth:`DeltaCommitter.snapshot <commit_service.delta.committer.DeltaCommitter.snapshot>`
when the service starts, so that readiness after a crash does not wait for Spark to replay the
log. Delta itself finds the txn versions in the version checksum (``.crc``) when it is there; a
SIGKILL between a commit and its checksum leaves none, and then Delta rebuilds the whole table
state with Spark jobs (30-45 s measured). What we need is small and defined by the Delta
protocol: the latest complete checkpoint's ``txn`` column (read alone, through pyarrow) and the
``txn`` actions of the JSON commits after it, the newest version of each ``appId`` winning.

Anything this reader does not understand (a V2 or incomplete checkpoint only, a missing commit
file, an unreadable object) raises :class:`LogReadError`, and the caller asks Delta instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from commit_service.storage.reader import StorageReader

LOG_FOLDER = "_delta_log"
_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")


class LogReadError(Exception):
    """The log is not one this reader can interpret with certainty; ask Delta."""


@dataclass(frozen=True)
class LogState:
    """A table's latest version (-1: no table) and each ``txn`` appId's version at it."""

    version: int
    txns: dict[str, int]


def latest_checkpoint(names: Iterable[str], at_most: int) -> tuple[int, list[str]] | None:
    """The newest complete classic checkpoint at or below ``at_most``: its version and file names."""
    parts: dict[int, dict[int, str]] = {}
    expected: dict[int, int] = {}
    for name in names:
        m = _CHECKPOINT.match(name)
        if m is None:
            continue
        version = int(m[1])
        part, total = (int(m[2]), int(m[3])) if m[2] else (1, 1)
        if expected.setdefault(version, total) != total:
            expected[version] = -1  # two checkpoints of one version with different part counts: skip it
        parts.setdefault(version, {})[part] = name
    for version in sorted(parts, reverse=True):
        if version <= at_most and len(parts[version]) == expected[version]:
            return version, [parts[version][i] for i in sorted(parts[version])]
    return None


def commit_txns(text: str) -> dict[str, int]:
    """The ``txn`` actions of one JSON commit file: appId -> version."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        if line.strip():
            txn = json.loads(line).get("txn")
            if txn is not None:
                out[str(txn["appId"])] = int(txn["version"])
    return out


@dataclass(frozen=True)
class LogSegment:
    """The objects a table's state at ``version`` is read from: the newest complete checkpoint at or
    below it (its parts' URIs; empty: none) and the JSON commits after it, in order."""

    version: int  # -1: no table
    checkpoint: tuple[str, ...]
    commits: tuple[str, ...]


def commit_uri(table_root: str, version: int) -> str:
    """The URI of the table's JSON commit of ``version``."""
    return f"{table_root}{LOG_FOLDER}/{version:020d}.json"


def log_segment(storage: StorageReader, table_root: str, version: int | None = None) -> LogSegment:
    """The :class:`LogSegment` of the table under ``table_root`` (a canonical prefix ending in
    ``/``) at its latest version or at ``version``; raises :class:`LogReadError` when a commit after
    the checkpoint is missing (listing the log is the only storage call)."""
    uris = storage.list_own(f"{table_root}{LOG_FOLDER}")
    names = {uri.rsplit("/", 1)[1]: uri for uri in uris}
    found = [int(m[1]) for name in names if (m := _COMMIT.match(name))]
    commits = sorted(v for v in found if version is None or v <= version)
    if not commits:
        if any(_CHECKPOINT.match(n) for n in names):
            raise LogReadError("a checkpoint but no commit file")
        return LogSegment(-1, (), ())
    latest = commits[-1]
    checkpoint = latest_checkpoint(names, latest)
    first = checkpoint[0] + 1 if checkpoint is not None else 0
    missing = set(range(first, latest + 1)) - set(commits)
    if missing:
        raise LogReadError(f"commit files missing after the checkpoint: {sorted(missing)[:5]}")
    parts = tuple(names[n] for n in checkpoint[1]) if checkpoint is not None else ()
    return LogSegment(latest, parts, tuple(names[f"{v:020d}.json"] for v in range(first, latest + 1)))


def read_log(storage: StorageReader, table_root: str, version: int | None = None) -> LogState:
    """The table's :class:`LogState` from its log under ``table_root`` (a canonical prefix ending in
    ``/``), at its latest version or at ``version`` (what a transaction read)."""
    try:
        segment = log_segment(storage, table_root, version)
        txns: dict[str, int] = {}
        for part in segment.checkpoint:
            for row in storage.read_own_column(part, "txn"):
                if row is not None:
                    txns[str(row["appId"])] = int(row["version"])
        for uri in segment.commits:
            txns.update(commit_txns(storage.read_own(uri).decode("utf-8")))
    except LogReadError:
        raise
    except Exception as exc:  # storage, Parquet or JSON trouble: the caller falls back to Delta
        raise LogReadError(f"{type(exc).__name__}: {exc}") from exc
    return LogState(segment.version, txns)
