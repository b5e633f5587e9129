"""Data files' facts (size, mtime, footer stats, schema key, offset coverage) read ahead of the commit.

One cache per table, made by the production committer factory. The table's coordinator hands it
every file it accepts (:meth:`FactsCache.prefetch`, called from the HTTP thread that took the
manifest; it only queues the file), a pool of threads (one for all tables) reads the queue while
the files wait in the buffer, and the table's :class:`~commit_service.delta.committer.DeltaCommitter`
takes them at commit time (:meth:`FactsCache.get_all`): a commit reads only what is not ready yet,
and never a footer a second time.

The queue is read by *drains*: pool tasks that each take a share of the queued files (at most
:data:`MAX_CHUNK`), read them as one chunk, and go on until the queue is empty. There is one drain
per :data:`FILES_PER_DRAIN` queued files, rounded up (up to ``threads`` drains): a second starts
only past 8, so under a stream of one-file manifests one drain reads many files per wake-up
instead of the HTTP thread paying a pool task and a future per file, and a burst (a 10,000-file
manifest) is still read by every thread at once. After each chunk a drain gives its thread back
to the pool (it submits its next chunk anew): the pool is shared by every table and by the
commits' own reads, so an archive's thousands of files queued ahead never keep another table's
commit (or a bounded round's files) waiting for more than a chunk. A chunk is small for the same
reason: a commit waiting for a file in flight waits for its chunk, not for the archive.

On local files (one reader thread, see :func:`threads_for`) each read first tells the storage of
the files a window ahead (:meth:`~commit_service.storage.reader.StorageReader.will_read`), so the
kernel fetches their footers into the page cache while the reader parses the ones before: a footer
evicted from memory is then not a wait for the disk in the one thread.

Reading facts early is safe because a file is only ever sent once it is complete: Connect has
committed an offset past its start, so the sink never writes that object again. (A file deleted
by someone else while it waits is not noticed by the commit, as it would not be noticed between
a commit's own read and its Delta commit.) A read that failed is not kept: the commit reads the
file again (and raises what it gets then). The cache is bounded: past ``capacity`` files the
oldest entries go (unread, if they were still queued; their commit reads them itself).

A settled entry holds nothing the garbage collector tracks: the facts packed into a tuple of atoms
(:data:`~commit_service.storage.facts.PackedFacts`), or one shared marker for a failed read. Every full
collection walks every tracked object while the request threads wait, and the cache holds an
entry per buffered file.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from itertools import islice
from typing import TYPE_CHECKING, NamedTuple, TypeAlias

from commit_service.storage.facts import FileFacts, PackedFacts
from lakegate_core.protocol import DataFile, FileFormat

if TYPE_CHECKING:  # pyarrow is imported only where storage is really read
    from commit_service.storage.reader import StorageReader

THREADS = 16  # the shared pool, and a table's read-ahead on an object store (mostly waiting on it)
CAPACITY = 200_000  # files; a FileFacts is well under 1 KiB (an Iceberg table's, with its footer, 1-3 KiB)
FILES_PER_DRAIN = 8  # queued files per running drain before another drain starts
MAX_CHUNK = 16  # files a drain reads as one chunk before it gives its thread back
LINGER_SECONDS = 0.05  # how long the last drain waits for more files before it ends

HINT_WINDOW = 16  # files a read asks the store to fetch ahead of itself (StorageReader.will_read)

FactsKey = tuple[str, int]  # the file's canonical URI and the size its manifest gave
ReadFacts = Callable[[DataFile], FileFacts]
HintReads = Callable[[list[str]], None]  # the URIs about to be read: fetch them ahead (a hint)


class Reading(NamedTuple):
    """A file's read in flight: its chunk's future and the file's place in the chunk."""

    chunk: Future[list[FileFacts | Exception]]
    position: int


class EarlyReadFailed(Exception):
    """The marker a failed read leaves in the cache (one instance for all: the commit reads the
    file again, and raises what it gets then)."""


READ_FAILED = EarlyReadFailed("the read ahead failed; the commit reads the file again")


class Queued:
    """The marker of a file waiting in the queue for a drain (one instance for all: :data:`QUEUED`)."""


QUEUED = Queued()

# A file's entry: queued, then its read in flight, then, once the chunk is done, the packed facts or
# the marker of a failed read.
Entry: TypeAlias = "Queued | Reading | PackedFacts | EarlyReadFailed"


def storage_facts(storage: StorageReader, *, footers: bool = False) -> ReadFacts:
    """How the service reads a file's facts: stat it, and read its footer when it is Parquet (a
    Parquet file whose manifest says when it was written is not stat'ed: its footer is read at
    the manifest's size), kept whole with ``footers`` (Iceberg tables build a file's metrics from it)."""
    return lambda f: storage.facts(
        f.path,
        parquet=f.format is FileFormat.PARQUET,
        size=f.size_bytes,
        modified_ms=f.modified_ms,
        keep_footer=footers,
    )


def threads_for(root: str) -> int:
    """How many footers a table reads at once: on an object store :data:`THREADS` (a read is mostly
    the store's latency); on local files one. A local read is mostly interpreter time, and a second
    thread only takes the interpreter lock in turns, waiting for it after each of its own I/O calls:
    10,000 local footers took 2.9 s on 16 threads, 1.9 s on 2; one reader reads a footer in 93 us,
    two in 119-179 us each (2 cores, docs/performance.md)."""
    if root.startswith(("file:", "/")):
        return 1
    return THREADS


def read_threads(root: str) -> int:
    """How many of a round's text and Avro files are read at once: on an object store :data:`THREADS`;
    on local files one a core (unlike a footer, most of such a read is outside the interpreter
    lock: decompressing, and Arrow typing the records)."""
    if root.startswith(("file:", "/")):
        return os.cpu_count() or 1
    return THREADS


def table_facts(
    storage: StorageReader, pool: ThreadPoolExecutor, name: str, root: str, *, footers: bool = False
) -> FactsCache:
    """A table's read-ahead in the service: on the service's shared ``pool`` (of :data:`THREADS`),
    as many at once as :func:`threads_for` its root (``footers``: see :func:`storage_facts`); local
    files are hinted a window ahead of their reads (:meth:`StorageReader.will_read`)."""
    threads = threads_for(root)
    hint = storage.will_read if threads == 1 else None
    return FactsCache(storage_facts(storage, footers=footers), pool=pool, threads=threads, name=name, hint=hint)


def key_of(file: DataFile) -> FactsKey:
    return (file.path, file.size_bytes)


def _without_frames(exc: Exception) -> Exception:
    """``exc`` with no traceback along its cause/context chain: a kept error must not hold the
    reading thread's frames (tens of objects each, all walked by every full garbage collection)."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        link.__traceback__ = None
        link = link.__cause__ or link.__context__
    return exc


def _common_prefix(a: list[str], b: list[str]) -> int:
    """How many first items ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class FactsCache:
    """Facts of accepted files, read in the background; thread-safe.

    Its size matters beyond memory: every buffered file's entry is walked by each full garbage
    collection of the service, so a settled entry is the bare facts (or error), not the chunk's
    future with its condition, lock and waiter queue.
    """

    def __init__(
        self,
        read: ReadFacts,
        *,
        pool: ThreadPoolExecutor | None = None,
        threads: int = THREADS,
        capacity: int = CAPACITY,
        name: str = "",
        hint: HintReads | None = None,
    ) -> None:
        """``pool``: the threads that read (the service shares one among its tables; ``threads``
        is its size); without one the cache makes its own. ``hint``: told which files a read
        will read next, a window ahead (a local table's: the page cache fetches their footers
        while the ones before are parsed)."""
        self._read = read
        self._hint = hint
        self._told: list[str] = []  # the files the last chunk read ahead told the store of beyond itself
        self._capacity = capacity
        self._threads = threads
        self._own_pool = pool is None
        self._pool = pool or ThreadPoolExecutor(threads, thread_name_prefix=f"lakegate-facts-{name}")
        self._entries: OrderedDict[FactsKey, Entry] = OrderedDict()
        self._queue: dict[FactsKey, DataFile] = {}  # files to read ahead, oldest first
        self._drains = 0  # drains submitted and not finished
        # reentrant: a chunk that is already done settles in the thread that submitted it
        self._lock = threading.RLock()

    def prefetch(self, files: Iterable[DataFile]) -> None:
        """Queue each file's facts to be read (unless already queued, read or being read); returns at once."""
        with self._lock:
            for f in files:
                key = key_of(f)
                if key not in self._entries:
                    self._entries[key] = QUEUED
                    self._queue[key] = f
            while len(self._entries) > self._capacity:
                self._queue.pop(self._entries.popitem(last=False)[0], None)
            self._add_drains()

    def _add_drains(self) -> None:
        """Submit drains until there is one per :data:`FILES_PER_DRAIN` queued files, at most
        ``threads`` (under the lock). A pool that was shut down reads nothing more ahead."""
        while self._drains < min(self._threads, -(-len(self._queue) // FILES_PER_DRAIN)):
            self._drains += 1  # before the submit: a pool may run the drain at once, in this thread
            try:
                self._pool.submit(self._drain)
            except RuntimeError:  # shut down: the commit reads what is left itself
                self._drains -= 1
                return

    def _drain(self) -> None:
        """Read the queue a chunk at a time until it is empty (a pool task). Each chunk is this
        drain's share of the queue, its entries one future's :class:`Reading` while it is read."""
        lingered = False
        try:
            while True:
                with self._lock:
                    self._add_drains()
                    share = min(MAX_CHUNK, -(-len(self._queue) // self._drains))
                    chunk = [self._queue.pop(key) for key in list(islice(self._queue, share))]
                    ahead = [f.path for f in islice(self._queue.values(), HINT_WINDOW)] if self._hint else []
                    known = _common_prefix([f.path for f in chunk], self._told)  # told with the chunk before
                    self._told = ahead
                    if not chunk and (lingered or self._drains > 1):
                        self._drains -= 1
                        return
                    if chunk:
                        future: Future[list[FileFacts | Exception]] = Future()
                        for j, f in enumerate(chunk):
                            self._entries[key_of(f)] = Reading(future, j)
                if not chunk:  # the last drain waits a little for more files before it ends
                    time.sleep(LINGER_SECONDS)
                    lingered = True
                    continue
                lingered = False
                try:
                    future.set_result(self._read_chunk(chunk, ahead, known))
                except BaseException as exc:  # a waiting commit reads these files itself
                    future.set_exception(exc)
                    raise
                self._settle(chunk, future)
                if self._yielded():
                    return
        except BaseException:  # not a read's error (those are kept per file): the drain is gone
            with self._lock:
                self._drains -= 1
            raise

    def _yielded(self) -> bool:
        """After a chunk, with files still queued: go on as a new pool task, behind what others
        submitted meanwhile (this drain's thread is given back). False when the pool takes no
        more tasks (shut down): the drain goes on in this thread."""
        with self._lock:
            if not self._queue:
                return False
            try:
                self._pool.submit(self._drain)
            except RuntimeError:
                return False
            return True  # the drain goes on in its new task: the count of drains is unchanged

    def get_all(self, files: list[DataFile]) -> list[FileFacts]:
        """Each file's facts, in order: taken from the cache when read, waited for when being read,
        read now (in the pool, in parallel) when not prefetched or when its early read failed.
        Raises what the first failing read (in file order) raised."""
        with self._lock:
            for f in files:  # a queued file is read now, with the rest of the commit's
                self._queue.pop(key_of(f), None)
            early = {key_of(f) for f in files if self._usable(self._entries.get(key_of(f)))}
            # a fresh read's own Reading, not the entry: a chunk done at once settles its entries
            # before this line, and a failure leaves only the shared marker there
            fresh = self._start([f for f in files if key_of(f) not in early])
            pending = [(f, fresh.get(key_of(f)) or self._entries[key_of(f)], key_of(f) in fresh) for f in files]
        return [self._result(f, entry, is_fresh) for f, entry, is_fresh in pending]

    @staticmethod
    def _outcome(entry: Entry) -> FileFacts | Exception:
        """What a settled entry, or a finished chunk, gave for its file (waits for a chunk in flight)."""
        assert not isinstance(entry, Queued), "a queued file has no outcome yet"
        if isinstance(entry, EarlyReadFailed):
            return entry
        if not isinstance(entry, Reading):
            return FileFacts.unpacked(entry)
        try:
            return entry.chunk.result()[entry.position]
        except Exception as exc:  # the chunk itself did not run (the pool was shut down)
            return exc

    @classmethod
    def _usable(cls, entry: Entry | None) -> bool:
        """An entry worth waiting for: being read, or read without an error."""
        if entry is None or isinstance(entry, Queued):
            return False
        if isinstance(entry, Reading):
            return not entry.chunk.done() or not isinstance(cls._outcome(entry), Exception)
        return not isinstance(entry, EarlyReadFailed)  # settled: packed facts are not unpacked to tell

    def _start(self, files: list[DataFile]) -> dict[FactsKey, Reading]:
        """Read a commit's ``files`` on the pool now, in at most ``threads`` chunks, one future per
        chunk (under the lock). Returns each file's read."""
        size = -(-len(files) // self._threads)
        started: dict[FactsKey, Reading] = {}
        for i in range(0, len(files), size or 1):
            chunk = files[i : i + size]
            future = self._pool.submit(self._read_chunk, chunk)
            for j, f in enumerate(chunk):
                started[key_of(f)] = self._entries[key_of(f)] = Reading(future, j)
            future.add_done_callback(partial(self._settle, chunk))
        return started

    def _settle(self, files: list[DataFile], chunk: Future[list[FileFacts | Exception]]) -> None:
        """Replace a finished chunk's entries by what each read gave, packed (entries since
        forgotten, or started again by a commit, are left alone)."""
        with self._lock:
            for j, f in enumerate(files):
                key = key_of(f)
                reading = Reading(chunk, j)
                if self._entries.get(key) == reading:
                    got = self._outcome(reading)
                    self._entries[key] = READ_FAILED if isinstance(got, Exception) else got.packed()

    def _read_chunk(
        self, files: list[DataFile], ahead: list[str] | None = None, known: int = 0
    ) -> list[FileFacts | Exception]:
        """Each file's facts, or what its read raised, in order. With a hint, the store is told of
        each :data:`HINT_WINDOW` of files while the window before it is read (the first two at
        once, but the ``known`` first files, told already; ``ahead``, the files queued after
        these, follow them)."""
        out: list[FileFacts | Exception] = []
        hint = self._hint
        told = [f.path for f in files] + (ahead or []) if hint is not None else []
        for i, f in enumerate(files):
            if hint is not None and i % HINT_WINDOW == 0:
                hint(told[i + HINT_WINDOW if i else known : i + 2 * HINT_WINDOW])
            try:
                out.append(self._read(f))
            except Exception as exc:  # kept: the commit reads the file again
                out.append(_without_frames(exc))
        return out

    def _result(self, f: DataFile, entry: Entry, fresh: bool) -> FileFacts:
        got = self._outcome(entry)
        if not isinstance(got, Exception):
            return got
        self.forget([f])
        if fresh:
            raise got
        return self._read(f)  # its early read failed while the commit waited: once more, now

    def forget(self, files: Iterable[DataFile]) -> None:
        """Drop these files' entries (they were committed, or their read failed)."""
        with self._lock:
            for f in files:
                self._entries.pop(key_of(f), None)
                self._queue.pop(key_of(f), None)

    def idle(self) -> bool:
        """Nothing queued and no drain running (every read ahead so far is done)."""
        with self._lock:
            return not self._queue and self._drains == 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def close(self, *, wait: bool = False) -> None:
        """Stop reading ahead (reads not started are dropped); a shared pool is left to its owner."""
        if self._own_pool:
            self._pool.shutdown(wait=wait, cancel_futures=True)
