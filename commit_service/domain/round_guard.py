"""The last check before a round commits: what is written holds everything its files hold.

Pure. Called by :class:`~commit_service.delta.committer.DeltaCommitter` (append and upsert rounds)
after the round's data is written into the transaction and before ``txn.commit``; it compares
counts taken from the files themselves (lines of text, Parquet footers) with what Delta's write
reports, and each file's typed columns with the schema committed. It does not trust the code that
read, reconciled and converted the files: a shortfall means that code lost something, and the
round is refused (:class:`~commit_service.errors.RoundShortfallError`) instead of committed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from commit_service.domain.round_schema import Schema, leaf_columns
from commit_service.errors import RoundShortfallError


@dataclass(frozen=True)
class Source:
    """One file of the round: the records it holds and its columns as the table gets them."""

    path: str
    records: int
    shape: Schema


def check(table: str, sources: Sequence[Source], written_rows: int, written: Schema) -> None:
    """Raise :class:`RoundShortfallError` unless ``written_rows`` equals the records of ``sources``
    and every typed column of every source is a column of ``written``."""
    expected = sum(s.records for s in sources)
    if written_rows != expected:
        raise RoundShortfallError(
            f"table {table}: the round's {len(sources)} file(s) hold {expected} records but {written_rows} "
            "rows were written; nothing was committed"
        )
    columns = leaf_columns(written)
    lacking: dict[int, list[str]] = {}  # by shape: the files of a round share a few shapes
    for s in sources:
        if id(s.shape) not in lacking:
            lacking[id(s.shape)] = sorted(leaf_columns(s.shape) - columns)
        missing = lacking[id(s.shape)]
        if missing:
            raise RoundShortfallError(
                f"table {table}: the columns {missing[:5]} of {s.path} would not be written; nothing was committed"
            )


def written_rows(add_stats: Sequence[Mapping[str, object] | None]) -> int:
    """The rows Delta wrote, summed from its AddFile statistics (``numRecords``); -1 when a file
    has none (the table collects no statistics: the caller counts another way)."""
    total = 0
    for stats in add_stats:
        rows = stats.get("numRecords") if stats else None
        if not isinstance(rows, int):
            return -1
        total += rows
    return total
