"""Data files' facts (size, mtime, footer stats, schema key, offset coverage) read ahead of the commit.

One cache per table, made by the production committer factory. The table's coordinator hands it
every file it accepts (:meth:`FactsCache.prefetch`, called from the HTTP thread that took the
manifest; it only queues the reads), a pool of threads (one for all tables) reads them while the file waits in the
buffer, and the table's :class:`~commit_service.delta_commit.DeltaCommitter` takes them at commit
time (:meth:`FactsCache.get_all`): a commit reads only what is not ready yet, and never a footer a
second time.

Reading facts early is safe because a file is only ever sent once it is complete: Connect has
committed an offset past its start, so the sink never writes that object again. A read that
failed is not kept: the commit reads the file again (and raises what it gets then). The cache is
bounded: past ``capacity`` files the oldest entries go (their commit reads them itself).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from lakegate_core.protocol import DataFile, FileFormat

if TYPE_CHECKING:  # pyarrow is imported only where storage is really read
    from commit_service.storage import FileFacts, StorageReader

logger = logging.getLogger(__name__)

THREADS = 16
CAPACITY = 200_000  # files; a FileFacts is well under 1 KiB

FactsKey = tuple[str, int]  # the file's canonical URI and the size its manifest gave
ReadFacts = Callable[[DataFile], "FileFacts"]


def storage_facts(storage: StorageReader) -> ReadFacts:
    """How the service reads a file's facts: stat it, and read its footer when it is Parquet."""
    return lambda f: storage.facts(f.path, parquet=f.format is FileFormat.PARQUET)


def key_of(file: DataFile) -> FactsKey:
    return (file.path, file.size_bytes)


class FactsCache:
    """Facts of accepted files, read in the background; thread-safe."""

    def __init__(
        self,
        read: ReadFacts,
        *,
        pool: ThreadPoolExecutor | None = None,
        threads: int = THREADS,
        capacity: int = CAPACITY,
        name: str = "",
    ) -> None:
        """``pool``: the threads that read (the service shares one among its tables; ``threads``
        is its size); without one the cache makes its own."""
        self._read = read
        self._capacity = capacity
        self._threads = threads
        self._own_pool = pool is None
        self._pool = pool or ThreadPoolExecutor(threads, thread_name_prefix=f"lakegate-facts-{name}")
        self._entries: OrderedDict[FactsKey, Future[FileFacts]] = OrderedDict()
        self._lock = threading.Lock()

    def prefetch(self, files: Iterable[DataFile]) -> None:
        """Start reading each file's facts (unless already read or being read); returns at once."""
        with self._lock:
            started = [self._track(f) for f in files if key_of(f) not in self._entries]
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)
        self._start(started)

    def get_all(self, files: list[DataFile]) -> list[FileFacts]:
        """Each file's facts, in order: taken from the cache when read, waited for when being read,
        read now (in the pool, in parallel) when not prefetched or when its early read failed.
        Raises what the first failing read (in file order) raised."""
        pending = []
        started = []
        with self._lock:
            for f in files:
                fut = self._entries.get(key_of(f))
                fresh = fut is None or (fut.done() and fut.exception() is not None)
                if fresh:
                    started.append(self._track(f))
                    fut = started[-1][1]
                assert fut is not None
                pending.append((f, fut, fresh))
        self._start(started)
        return [self._result(f, fut, fresh) for f, fut, fresh in pending]

    def _track(self, f: DataFile) -> tuple[DataFile, Future[FileFacts]]:
        """A new entry for ``f`` whose read is yet to start (under the lock)."""
        fut: Future[FileFacts] = Future()
        self._entries[key_of(f)] = fut
        return f, fut

    def _start(self, reads: list[tuple[DataFile, Future[FileFacts]]]) -> None:
        """Run ``reads`` on the pool in at most ``threads`` chunks: one task per file would cost the
        HTTP thread more than the rest of accepting it."""
        size = -(-len(reads) // self._threads)
        for i in range(0, len(reads), size or 1):
            self._pool.submit(self._read_chunk, reads[i : i + size])

    def _read_chunk(self, reads: list[tuple[DataFile, Future[FileFacts]]]) -> None:
        for f, fut in reads:
            try:
                fut.set_result(self._read(f))
            except Exception as exc:  # kept in the future: the commit reads the file again
                fut.set_exception(exc)

    def _result(self, f: DataFile, fut: Future[FileFacts], fresh: bool) -> FileFacts:
        try:
            return fut.result()
        except Exception:
            self.forget([f])
            if fresh:
                raise
        return self._read(f)  # its early read failed while the commit waited: once more, now

    def forget(self, files: Iterable[DataFile]) -> None:
        """Drop these files' entries (they were committed, or their read failed)."""
        with self._lock:
            for f in files:
                self._entries.pop(key_of(f), None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def close(self, *, wait: bool = False) -> None:
        """Stop reading ahead (reads not started are dropped); a shared pool is left to its owner."""
        if self._own_pool:
            self._pool.shutdown(wait=wait, cancel_futures=True)
