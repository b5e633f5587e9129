"""What storage says about one data file (:class:`FileFacts`), and its compact form for caches.

Made by :class:`commit_service.storage.reader.StorageReader` (stat and footer); kept, between the read and
the commit, by :class:`commit_service.storage.prefetch.FactsCache` as :data:`PackedFacts`; read by the
commit path (:mod:`commit_service.delta.committer`, :mod:`commit_service.round.convert`). No pyarrow here:
the HTTP threads' modules import this one.
"""

from __future__ import annotations

from dataclasses import dataclass

from commit_service.domain.coverage import Coverage
from lakegate_core.protocol import OffsetSpan

# A FileFacts as a plain tuple of atoms (and tuples of atoms), which Python's garbage collector
# stops tracking: a cache of 100,000 files' facts then adds nothing to what every full collection
# walks while the request threads wait. Fields in FileFacts' order, the coverage flattened to its
# first offset, last offset and record count (three None without one).
PackedFacts = tuple[
    int,
    int,
    "int | None",
    "str | None",
    "str | None",
    "tuple[tuple[str, bool], ...]",
    "int | None",
    "int | None",
    "int | None",
    "tuple[str, ...]",
    "tuple[tuple[str, int, int], ...]",
    "bytes | None",
]


@dataclass(frozen=True)
class FileFacts:
    """What storage says about one data file."""

    size_bytes: int
    modification_time_ms: int
    num_records: int | None = None
    stats_json: str | None = None  # Delta AddFile stats (numRecords, minValues, maxValues, nullCount)
    schema_key: str | None = None  # the footer's Arrow schema as text: files sharing it share a schema
    columns: tuple[tuple[str, bool], ...] = ()  # Parquet: each top-level column and whether it is a struct
    coverage: Coverage | None = None  # Parquet in the sink's envelope: the offsets its footer bounds
    # Parquet: the dotted paths of string columns (not inside a list or map) null in every row: a
    # sink's type for values it never saw, which never wins over a real type (round_schema.VOID)
    null_strings: tuple[str, ...] = ()
    # Parquet: top-level timestamp columns' exact bounds (name, min, max in microseconds since the
    # epoch, UTC; ``stats_json`` has them in milliseconds): where a partitioned table's file lies
    times: tuple[tuple[str, int, int], ...] = ()
    # Parquet, when the reader was asked for it (Iceberg tables): the footer as Thrift, from which
    # Iceberg builds an in-place file's metrics without reading the file again (about 1 KiB a file)
    footer: bytes | None = None

    def packed(self) -> PackedFacts:
        c = self.coverage
        return (
            self.size_bytes,
            self.modification_time_ms,
            self.num_records,
            self.stats_json,
            self.schema_key,
            self.columns,
            None if c is None else c.span.first,
            None if c is None else c.span.last,
            None if c is None else c.records,
            self.null_strings,
            self.times,
            self.footer,
        )

    @classmethod
    def unpacked(cls, packed: PackedFacts) -> FileFacts:
        size, mtime, records, stats, schema, columns, first, last, covered, null_strings, times, footer = packed
        coverage = (
            None if first is None or last is None or covered is None else Coverage(OffsetSpan(first, last), covered)
        )
        return cls(size, mtime, records, stats, schema, columns, coverage, null_strings, times, footer)
