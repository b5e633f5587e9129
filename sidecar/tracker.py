"""Which data files are complete, and what to report: pure functions of what the loop saw.

Called by the loop each round with, per owned partition: the files listed in storage (sorted by
start offset), Connect's committed offset for the partition (group ``connect-<connector>``) and
the table's next offset from the service. No I/O.

Completeness (DESIGN §1): the sink uploads a file before Connect commits the group offset past
it, so a file starting below the committed offset ``C`` is complete; its end offset is the next
file's start minus one, or ``C - 1`` for the last complete file. Files starting at or above ``C``
may still be rewritten (a task that crashes re-consumes from ``C``) and are never reported.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def complete_files(files: list[StoredFile], connect_committed: int | None, table_next: int) -> list[CompleteFile]:
    """The complete files of one partition at or above the table's next offset, in order.

    ``files`` must be one partition's, sorted by start offset. A file straddling ``table_next``
    (start below, end above) is reported too: the service rejects it with a clear reason rather
    than the sidecar hiding it.
    """
    if connect_committed is None:
        return []
    out: list[CompleteFile] = []
    for i, f in enumerate(files):
        if f.start_offset >= connect_committed:
            break
        nxt = files[i + 1].start_offset if i + 1 < len(files) else connect_committed
        end = min(nxt, connect_committed) - 1
        if end < f.start_offset or end < table_next:
            continue  # an empty range (a duplicate name) or already in the table
        out.append(CompleteFile(f, end))
    return out
