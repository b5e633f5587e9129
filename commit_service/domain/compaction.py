"""Compaction planned with the rounds: which small files of a table to bin-pack, and when to look.
Pure: no I/O, no clock.

A Connect sink flushes one small file per Kafka partition per flush, and a zero-copy round adds
them where they lie. The one writer of the table merges them between its rounds, so no compaction
ever conflicts with a commit (``commit_service.coordination.table_maintenance``):

- after each round the files it added are counted (:class:`CompactionWatch`); no table is read
  until enough were added that some partition could hold more than ``small_files_allowed`` small
  files (``slack``), so most rounds cost nothing more;
- then the table's files smaller than ``target_file_size_bytes`` are read by partition, and
  :func:`plan_compaction` merges, in each partition holding more than ``small_files_allowed`` of
  them, its smallest files: the most of them whose largest is no larger than ``GROWTH`` times the
  others together (at least two, or none). They are those below a size (``below_bytes``), which
  both formats' bin-packing takes as its candidates (Delta's ``OPTIMIZE`` ``minFileSize``;
  Iceberg's ``rewriteDataFiles`` ``min-file-size-bytes``) and packs into files of up to the target.

Every file a merge takes is at most ``GROWTH`` times the rest it merges with, so a record's file
grows at least 1.5 times each time it is rewritten: a record is rewritten at most
``log1.5(target / a round's file size)`` times, and in practice about ``log2`` of it (a simulation
of 20,000 rounds of 15 files of 20-90 KB, 128 allowed, into a 128 MiB target: 4.0). Merging a
partition's smallest files down to a count instead rewrites the same growing file every merge (59
rewrites per byte in the unit test's stream). Asking the same of each file against only the files
smaller than it stalls behind a gap in sizes: a pipeline's first few small files (300 records of a
warm-up) before its steady ones of 40 KB merged only each other, and the partition stayed over its
allowance while hundreds of files came (``scripts/bench --parts iceberg-peer --long``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# a table partition, as its values read back (``(column, value)`` pairs; ``()``: an unpartitioned table)
PartitionKey = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class CompactionGroup:
    """One partition's files to merge: those smaller than ``below_bytes`` (``files`` of them)."""

    partition: PartitionKey
    below_bytes: int
    files: int
    bytes: int


@dataclass(frozen=True)
class CompactionPlan:
    """What to merge now (maybe nothing), and how many files later rounds may add before any
    partition could be due (``slack``: the next look waits for that many)."""

    target_bytes: int
    groups: tuple[CompactionGroup, ...]
    slack: int

    @property
    def files(self) -> int:
        return sum(g.files for g in self.groups)


def plan_compaction(small: Mapping[PartitionKey, Sequence[int]], target_bytes: int, allowed: int) -> CompactionPlan:
    """The plan for a table whose files smaller than ``target_bytes`` are ``small`` (their sizes,
    by partition); ``allowed``: the small files a partition may keep (``small_files_allowed``)."""
    groups, slack = [], allowed + 1  # a partition with no small file yet takes allowed + 1 to be due
    for partition, sizes in sorted(small.items(), key=lambda kv: [(c, v or "") for c, v in kv[0]]):
        ordered = sorted(s for s in sizes if s < target_bytes)
        chosen = _smallest(ordered) if len(ordered) > allowed else []
        if len(chosen) < 2:
            slack = min(slack, allowed + 1 - len(ordered))
            continue
        groups.append(CompactionGroup(partition, chosen[-1] + 1, len(chosen), sum(chosen)))
        slack = min(slack, allowed + 1 - (len(ordered) - len(chosen) + 1))
    return CompactionPlan(target_bytes, tuple(groups), max(1, slack))


GROWTH = 2  # the largest file of a merge is at most this many times the others together


def _smallest(ordered: Sequence[int]) -> list[int]:
    """The smallest files that merge (``ordered``: ascending): the longest run of them whose
    largest is at most ``GROWTH`` times the others together (none when no two qualify). A run of
    the smallest, since both formats take every file below a size."""
    rest = sum(ordered)
    for end in range(len(ordered) - 1, 0, -1):
        rest -= ordered[end]  # the files before ``end``, together
        if ordered[end] <= GROWTH * rest:
            return list(ordered[: end + 1])
    return []


@dataclass
class CompactionWatch:
    """Files added since the table's small files were last read (one table; its coordinator's)."""

    added: int = 0
    wait_for: int | None = None  # files to add before the next look; None: look after the first round

    def committed(self, files: int) -> None:
        self.added += files

    def due(self) -> bool:
        return self.added > 0 and (self.wait_for is None or self.added >= self.wait_for)

    def looked(self, slack: int) -> None:
        self.added, self.wait_for = 0, slack

    def planned(self, slack: int) -> None:
        """A look that began with :meth:`looked` (files added since count for the next) ended
        with a plan: the next look waits for its slack."""
        self.wait_for = slack


def bins(sizes: Sequence[int], target_bytes: int) -> list[range]:
    """The merges of files of ``sizes`` (in the order they are written) into files of up to about
    ``target_bytes``: runs of consecutive files whose sizes add up to at most the target (a file
    that alone reaches it ends a run), each of at least two files (one alone is left as it is)."""
    out, start, total = [], 0, 0
    for i, size in enumerate(sizes):
        if i > start and total + size > target_bytes:
            if i - start >= 2:
                out.append(range(start, i))
            start, total = i, 0
        total += size
    if len(sizes) - start >= 2:
        out.append(range(start, len(sizes)))
    return out
