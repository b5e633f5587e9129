"""The orphan guard: does a data file's content hold exactly the offsets it was sent with?

Pure (no I/O): :class:`~commit_service.delta.committer.DeltaCommitter` calls :func:`check` for every
file of a plan before it starts the Delta transaction, with the :class:`Coverage` read from the
file itself (the Parquet footer's statistics of the sink's ``offset`` column, or the first and
last line of a JSON-lines file: the sink writes records in offset order).

Why: a sink task that uploads files and dies before Connect commits its offset writes the range
again after the rewind, with other flush boundaries. The new object for the committed offset
replaces the old one (same name), but an old object named by an offset *inside* the new one's
range stays: an orphan. The sidecar can only tell a file's range from the names (a file ends where
the next one starts), so the orphan makes it claim too short a range for the file before it, and
the orphan's own records would be committed a second time. Reading the offsets from the content
closes that: a file is committed only if its content starts at the claimed start and ends at or
before the claimed end (a trailing gap is legal: transaction markers, compaction), and it holds no
more records than the range has offsets. A too-short claim is refused with what the content holds
(:class:`~commit_service.errors.ContentRangeError`), which the sidecar then claims instead; any
file starting inside that span is an orphan and is refused too. Since every committed file's rows
lie inside its claimed range and the claimed ranges of one partition are disjoint and contiguous,
no offset is committed twice.

The check needs the sink's ``offset`` field in the content (Aiven: ``format.output.fields``
including ``offset``). ``tables[].offset_check`` says what to do without it: ``auto`` commits the
file on its name's word, ``required`` refuses it, ``off`` never checks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from commit_service.domain.content import ENVELOPE_FIELDS
from commit_service.errors import ContentRangeError, DataFileError
from lakegate_core.protocol import DataFile, OffsetSpan

OFFSET_FIELD = "offset"  # the sink envelope's field holding the record's Kafka offset


class OffsetCheck(str, Enum):
    """A table's ``offset_check`` setting."""

    AUTO = "auto"  # check files whose content carries the sink's offset field
    REQUIRED = "required"  # refuse a file whose content does not carry it
    OFF = "off"  # never check


@dataclass(frozen=True)
class Coverage:
    """The offsets a file's content holds (lowest and highest) and how many records it has."""

    span: OffsetSpan
    records: int


def check(f: DataFile, coverage: Coverage | None, mode: OffsetCheck) -> None:
    """Raise unless ``f``'s content fits its claimed range (see the module docstring).

    :class:`ContentRangeError` (with the content's span) when the content runs past the claimed
    end: the sender may claim the span instead. :class:`DataFileError` for what no claim can fix
    (content that starts elsewhere than its name says, more records than offsets, no offsets under
    ``required``)."""
    if mode is OffsetCheck.OFF:
        return
    if coverage is None:
        if mode is OffsetCheck.REQUIRED:
            raise DataFileError(f.path, f"its content has no {OFFSET_FIELD!r} field (tables[].offset_check: required)")
        return
    span = coverage.span
    if span.first != f.start_offset:
        raise DataFileError(
            f.path, f"its content starts at offset {span.first}, its name and range at {f.start_offset}"
        )
    if span.last > f.end_offset:
        raise ContentRangeError(f.path, span, f.start_offset, f.end_offset)
    if coverage.records > f.end_offset - f.start_offset + 1:
        raise DataFileError(
            f.path,
            f"holds {coverage.records} records, more than the {f.end_offset - f.start_offset + 1} offsets "
            f"{f.start_offset}..{f.end_offset}",
        )


def from_statistics(columns: Sequence[str], bounds: Mapping[str, tuple[Any, Any]], rows: int) -> Coverage | None:
    """The coverage of a Parquet file in the sink's envelope, from its footer: ``columns`` are the
    top-level column names, ``bounds`` the (min, max) of each column with exact statistics."""
    if not _is_envelope(columns) or OFFSET_FIELD not in bounds or rows == 0:
        return None
    low, high = bounds[OFFSET_FIELD]
    if not _is_offset(low) or not _is_offset(high):
        return None
    return Coverage(OffsetSpan(low, high), rows)


def from_bounds(columns: Sequence[str], first: Any, last: Any, records: int) -> Coverage | None:
    """The coverage of a file in the sink's envelope whose first and last record hold the offsets
    ``first`` and ``last`` (an Avro file: records are written in offset order)."""
    if not _is_envelope(columns) or not _is_offset(first) or not _is_offset(last) or records == 0:
        return None
    return Coverage(OffsetSpan(first, last), records)


def from_lines(lines: Sequence[str]) -> Coverage | None:
    """The coverage of a JSON-lines file in the sink's envelope: records are written in offset
    order, so the first and last line bound it (only those two are parsed)."""
    if not lines:
        return None
    first, last = _line_offset(lines[0]), _line_offset(lines[-1])
    if first is None or last is None:
        return None
    return Coverage(OffsetSpan(first, last), len(lines))


def _line_offset(line: str) -> int | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict) or not _is_envelope(list(record)):
        return None
    value = record.get(OFFSET_FIELD)
    return value if _is_offset(value) else None


def _is_envelope(columns: Sequence[str]) -> bool:
    """Only the sink's envelope says for sure that ``offset`` is the Kafka offset (a record's own
    field of that name is not)."""
    names = set(columns)
    return OFFSET_FIELD in names and "value" in names and names <= ENVELOPE_FIELDS


def _is_offset(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
