"""Which data files are complete, and what to report: pure functions of what the loop saw.

Called by the loop each round with, per owned partition: the files listed in storage (sorted by
start offset), Connect's committed offset for the partition (group ``connect-<connector>``) and
the table's next offset from the service. No I/O.

Completeness (docs/design.md, "Invariants"): the sink uploads a file before Connect commits the group offset past
it, so a file starting below the committed offset ``C`` is complete; its end offset is the next
file's start minus one, or ``C - 1`` for the last complete file. Files starting at or above ``C``
may still be rewritten (a task that crashes re-consumes from ``C``) and are never reported.

Orphans: a task that uploaded files and died before Connect committed re-writes the range with
other boundaries, leaving an old object named by an offset inside a new object's range. Names
alone then give the file before it too short a range; the service reads the offsets from the
content and answers with what the file really holds (``FileReceipt.holds``). Given those spans
(``holds``, keyed by object key and size), a file ends where its content ends, and a file starting
inside an earlier file's known span is an orphan and is skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lakegate_core.protocol import OffsetSpan
from lakegate_core.types import TopicPartition
from sidecar.storage import StoredFile


@dataclass(frozen=True)
class CompleteFile:
    """A file the sidecar may report, with the offset range it holds (inclusive)."""

    file: StoredFile
    end_offset: int

    @property
    def tp(self) -> TopicPartition:
        return self.file.tp


def complete_files(
    files: list[StoredFile],
    connect_committed: int | None,
    table_next: int,
    holds: Mapping[tuple[str, int], OffsetSpan] | None = None,
) -> list[CompleteFile]:
    """The complete files of one partition at or above the table's next offset, in order.

    ``files`` must be one partition's, sorted by start offset; ``holds`` the spans the service
    read from files' content. A file straddling ``table_next`` (start below, end above) is
    reported too: the service rejects it with a clear reason rather than the sidecar hiding it.
    """
    if connect_committed is None:
        return []
    known = holds or {}
    out: list[CompleteFile] = []
    covered = -1  # the highest offset an earlier file's content is known to hold
    for i, f in enumerate(files):
        if f.start_offset >= connect_committed:
            break
        if f.start_offset <= covered:
            continue  # an orphan: an earlier file holds its first offset
        span = known.get((f.key, f.size))
        if span is not None and span.first == f.start_offset:
            end = covered = span.last
        else:
            nxt = files[i + 1].start_offset if i + 1 < len(files) else connect_committed
            end = min(nxt, connect_committed) - 1
        if end < f.start_offset or end < table_next:
            continue  # an empty range (a duplicate name) or already in the table
        out.append(CompleteFile(f, end))
    return out
