"""Avro container files decoded to Arrow in the service, by Apache DataFusion's Avro reader.

Used by :class:`~commit_service.round.avro_reads.AvroReads`: a round's Avro files are read once,
by the service (their bytes give their offsets), so rather than have Spark's Avro source read each
of them again (a file-source scan over a thousand small files: 10-12 s a 1,000-file commit), their
containers are spooled to a local folder as they are read, and the files of one writer schema are
decoded together, on DataFusion's threads outside the interpreter lock, into one Arrow table that
Spark takes as it takes JSON records (``createDataFrame``).

Only writer schemas :func:`commit_service.domain.avro_files.arrow_refusal` accepts come here, and
what comes back is checked before a round uses it: as many rows as the files' blocks hold, and
castable to Spark's schema of the file (Spark's Avro source's reading of the same writer schema).
Anything else raises :class:`~commit_service.storage.arrow_tables.ArrowReadError`, and Spark's Avro source reads the files as before.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import threading
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from commit_service.storage.arrow_tables import ArrowReadError

FILE_COLUMN = "__lakegate_file"  # the spooled file each decoded record came from


class AvroSpool:
    """A local folder of one round's Avro containers, and their decoding. Not shared across rounds;
    :meth:`close` deletes the folder.

    Files are spooled by writer schema, one folder a file (``<schema>-<n>/__lakegate_file=<number>/``)
    so that DataFusion gives each record's file as a column and reads a writer schema's folder
    whole; a folder once decoded is not added to (the schema's next files go to its next folder)."""

    def __init__(self, parent: str | None = None) -> None:
        self._parent = parent
        self._root: str | None = None
        self._lock = threading.Lock()
        self._names = itertools.count()
        self._folders: dict[str, str] = {}  # a writer schema -> the folder its next files go to
        self._paths: dict[int, str] = {}  # a spooled file's number -> its path
        self._ctx: Any = None

    def put(self, key: str, container: bytes) -> int:
        """Spool one container file of writer schema ``key``; its number in this spool."""
        with self._lock:
            if self._root is None:
                self._root = tempfile.mkdtemp(prefix="lakegate-avro-", dir=self._parent)
            number = next(self._names)
            if key not in self._folders:
                self._folders[key] = os.path.join(self._root, f"s{number}")
            folder = os.path.join(self._folders[key], f"{FILE_COLUMN}={number}")
            self._paths[number] = os.path.join(folder, "0.avro")
        os.makedirs(folder)
        with open(self._paths[number], "wb") as out:
            out.write(container)
        return number

    def container(self, number: int) -> bytes:
        """The bytes of spooled file ``number``."""
        with open(self._paths[number], "rb") as spooled:
            return spooled.read()

    def decode(self, key: str, numbers: Sequence[int], records: Sequence[int]) -> pa.Table:
        """The records of the files of writer schema ``key`` spooled since its last decoding (the
        files ``numbers``, holding ``records`` each by their blocks) as one Arrow table, each row's
        file number in :data:`FILE_COLUMN`; :class:`ArrowReadError` unless every file gave exactly
        its records."""
        import datafusion
        import pyarrow.compute as pc

        with self._lock:
            folder = self._folders.pop(key)
            if self._ctx is None:
                cores = os.cpu_count() or 1
                config = datafusion.SessionConfig().with_target_partitions(max(4, cores)).with_batch_size(65_536)
                self._ctx = datafusion.SessionContext(config)
        try:
            table = self._ctx.read_avro(folder, file_partition_cols=[(FILE_COLUMN, pa.int64())]).to_arrow_table()
        except Exception as exc:  # DataFusion raises its errors as Exception
            raise ArrowReadError(f"DataFusion: {str(exc).splitlines()[0][:300]}") from None
        counts = pc.value_counts(table[FILE_COLUMN]) if table.num_rows else None
        counted = (
            dict(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True))
            if counts
            else {}
        )
        for number, want in zip(numbers, records, strict=True):
            got = counted.get(number, 0)
            if got != want:
                raise ArrowReadError(f"DataFusion read {got} records of a file whose blocks hold {want}")
        if set(counted) - set(numbers):
            raise ArrowReadError(
                f"DataFusion read records of files not asked for: {sorted(set(counted) - set(numbers))[:5]}"
            )
        return table

    def close(self) -> None:
        """Delete the spooled containers."""
        with self._lock:
            root, self._root = self._root, None
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
