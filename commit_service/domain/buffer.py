"""A table's buffer: the files accepted and not yet committed, per partition by start offset.

Pure: no I/O, no clock. Owned by :class:`~commit_service.domain.state.TableState`, which decides
what enters and leaves; the buffer keeps the indexes a round and the intake read in O(log n) or
better (sorted starts per partition, where each path lies, running totals of files and bytes).
Buffered files of one partition never overlap: the state rejects a file that would.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping

from commit_service.domain.plan import ROW_ARRIVED, ROW_END, ROW_PATH, ROW_SIZE, PendingFile, Place, Row, place
from lakegate_core.protocol import DataFile, OffsetSpan
from lakegate_core.types import PartitionOffsets, TopicPartition


class FileBuffer:
    """The buffered files of one table; not thread-safe (the state's callers lock)."""

    def __init__(self) -> None:
        # per partition, start offset -> the buffered file (see Row), in arrival order; changed by add/remove only
        self._rows: dict[TopicPartition, dict[int, Row]] = {}
        self._starts: dict[TopicPartition, list[int]] = {}  # each partition's buffered starts, sorted
        self._by_path: dict[str, tuple[Place, ...]] = {}  # where each path is buffered
        self.size = 0  # the sum of the buffered files' sizes, kept as files come and go
        self.count = 0  # how many files are buffered, kept likewise (read per manifest)

    def __bool__(self) -> bool:
        return bool(self._rows)

    def partitions(self) -> list[TopicPartition]:
        """The partitions with buffered files, sorted."""
        return sorted(self._rows)

    def add(self, pending: PendingFile) -> None:
        tp, start = pending.tp, pending.file.start_offset
        self._rows.setdefault(tp, {})[start] = pending.row()
        bisect.insort(self._starts.setdefault(tp, []), start)
        self._by_path[pending.file.path] = (*self._by_path.get(pending.file.path, ()), place(tp, start))
        self.size += pending.file.size_bytes
        self.count += 1

    def remove(self, tp: TopicPartition, start: int) -> Row | None:
        """Take the file of ``tp`` starting at ``start`` out of the buffer; None if none is there."""
        files = self._rows.get(tp)
        row = None if files is None else files.pop(start, None)
        if files is None or row is None:
            return None
        starts = self._starts[tp]
        del starts[bisect.bisect_left(starts, start)]
        path, here = row[ROW_PATH], place(tp, start)
        places = tuple(p for p in self._by_path[path] if p != here)
        if places:
            self._by_path[path] = places
        else:
            del self._by_path[path]
        self.size -= row[ROW_SIZE]
        self.count -= 1
        if not files:
            del self._rows[tp], self._starts[tp]
        return row

    def get(self, tp: TopicPartition, start: int) -> PendingFile | None:
        row = self._rows.get(tp, {}).get(start)
        return None if row is None else PendingFile.from_row(row)

    def where(self, path: str) -> tuple[TopicPartition, int] | None:
        """The partition and start of the (first) buffered file at ``path``, if any."""
        places = self._by_path.get(path)
        if not places:
            return None
        topic, partition, start = places[0]
        return TopicPartition(topic, partition), start

    def files(self, tp: TopicPartition) -> list[PendingFile]:
        """``tp``'s buffered files, in arrival order."""
        return [PendingFile.from_row(row) for row in self._rows.get(tp, {}).values()]

    def starts_below(self, tp: TopicPartition, offset: int) -> list[int]:
        """The starts of ``tp``'s buffered files below ``offset``."""
        starts = self._starts.get(tp, [])
        return starts[: bisect.bisect_left(starts, offset)]

    def ending_below(self, tp: TopicPartition, offset: int) -> list[str]:
        """The paths of ``tp``'s buffered files that end below ``offset``."""
        rows = self._rows.get(tp, {})
        return [rows[s][ROW_PATH] for s in self._starts.get(tp, []) if rows[s][ROW_END] < offset]

    def overlapping(self, f: DataFile, tp: TopicPartition) -> PendingFile | None:
        """A buffered file of ``f``'s partition overlapping ``f``, found in O(log n): buffered files
        never overlap each other, so only the one with the greatest start at or below ``f``'s end
        can (any earlier one ends before that one starts)."""
        found = self.at_or_below(tp, f.end_offset)
        return PendingFile.from_row(found[1]) if found is not None and found[1][ROW_END] >= f.start_offset else None

    def at_or_below(self, tp: TopicPartition, offset: int) -> tuple[int, Row] | None:
        """``tp``'s buffered file with the greatest start at or below ``offset``: its start and row."""
        starts = self._starts.get(tp, [])
        i = bisect.bisect_right(starts, offset)
        return (starts[i - 1], self._rows[tp][starts[i - 1]]) if i else None

    def through(self, tp: TopicPartition, cursor: int) -> int:
        """The next offset after the contiguous run of ``tp``'s files from ``cursor``."""
        files = self._rows.get(tp, {})
        while cursor in files:
            cursor = files[cursor][ROW_END] + 1
        return cursor

    def runs_after(self, tp: TopicPartition, cursor: int, most: int) -> tuple[OffsetSpan, ...]:
        """The first ``most`` runs of ``tp``'s buffered files starting at or after ``cursor``, each
        ``first..last`` over files that follow one another without a gap, in offset order."""
        rows, starts = self._rows.get(tp, {}), self._starts.get(tp, [])
        runs: list[OffsetSpan] = []
        for start in starts[bisect.bisect_left(starts, cursor) :]:
            end = rows[start][ROW_END]
            if runs and runs[-1].last + 1 == start:
                runs[-1] = OffsetSpan(runs[-1].first, end)
            elif len(runs) == most:
                break
            else:
                runs.append(OffsetSpan(start, end))
        return tuple(runs)

    def run(self, tp: TopicPartition, cursor: int, limit: int | None) -> Iterator[Row]:
        """``tp``'s buffered rows from ``cursor`` on, read lazily (they must not change meanwhile)."""
        return _walk(self._rows.get(tp, {}), cursor, limit)

    def oldest_arrival(self) -> float | None:
        """When the longest-waiting buffered file arrived; None with nothing buffered. A partition's
        files are kept in arrival order (a dict), so its first is its oldest: O(partitions)."""
        return min((next(iter(fs.values()))[ROW_ARRIVED] for fs in self._rows.values() if fs), default=None)

    def ends(self) -> PartitionOffsets:
        """Per partition with buffered files, the end of the furthest one + 1: the file with the
        greatest start (buffered files never overlap), O(partitions)."""
        return PartitionOffsets(
            {tp: self._rows[tp][starts[-1]][ROW_END] + 1 for tp, starts in self._starts.items() if starts}
        )


def _walk(files: Mapping[int, Row], cursor: int, limit: int | None) -> Iterator[Row]:
    """A partition's buffered rows from ``cursor`` on while each starts where the last ended
    (and, with ``limit``, ends below it)."""
    while cursor in files:
        row = files[cursor]
        if limit is not None and row[ROW_END] + 1 > limit:
            return
        yield row
        cursor = row[ROW_END] + 1


def row_size(row: Row) -> int:
    return row[ROW_SIZE]
