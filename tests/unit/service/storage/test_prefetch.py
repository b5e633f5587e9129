"""The facts cache: files' footers read ahead once, waited for, re-read only after a failure."""

from __future__ import annotations

import gc
import threading
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from commit_service.domain.coverage import Coverage
from commit_service.errors import DataFileUnavailableError
from commit_service.storage.facts import FileFacts
from commit_service.storage.prefetch import (
    FILES_PER_DRAIN,
    HINT_WINDOW,
    MAX_CHUNK,
    READ_FAILED,
    FactsCache,
    Queued,
    Reading,
    _without_frames,
    key_of,
)
from lakegate_core.protocol import DataFile, FileFormat, OffsetSpan


def data_file(start: int, size: int = 100) -> DataFile:
    return DataFile(f"s3a://b/t/orders-0-{start}", "orders", 0, start, start + 9, size, FileFormat.PARQUET, 10)


class Reads:
    """A fake storage read: counts reads per path, can fail a path a number of times, can be gated."""

    def __init__(self) -> None:
        self.count: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()
        self.gate = threading.Event()
        self.gate.set()
        self.started = threading.Event()

    def __call__(self, f: DataFile) -> FileFacts:
        self.started.set()
        assert self.gate.wait(10)
        self.count[f.path] += 1
        if self.failures[f.path] > 0:
            self.failures[f.path] -= 1
            raise DataFileUnavailableError(f.path, "cannot stat: timeout")
        return FileFacts(f.size_bytes, f.start_offset, num_records=10)


@pytest.fixture
def reads() -> Reads:
    return Reads()


def read_ahead(cache: FactsCache, files: list[DataFile]) -> None:
    """Wait (at most 10 s) until the reads ahead of ``files`` are done: none queued or in flight."""
    deadline = time.monotonic() + 10
    while any(isinstance(cache._entries.get(key_of(f)), (Queued, Reading)) for f in files):
        assert time.monotonic() < deadline, "the reads ahead did not finish"
        time.sleep(0.01)


def test_prefetched_files_are_read_once(reads: Reads) -> None:
    cache = FactsCache(reads, threads=4)
    files = [data_file(i * 10) for i in range(50)]
    cache.prefetch(files)
    cache.prefetch(files[:10])  # offered again (a replayed manifest): not read again
    got = cache.get_all(files)
    assert [f.modification_time_ms for f in got] == [f.start_offset for f in files]
    assert set(reads.count.values()) == {1} and len(reads.count) == 50


class CountingPool(ThreadPoolExecutor):
    """A pool that counts the tasks submitted to it."""

    def __init__(self, threads: int) -> None:
        super().__init__(threads)
        self.tasks = 0

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def,override]
        self.tasks += 1
        return super().submit(fn, *args, **kwargs)


def test_one_file_manifests_share_a_drain_and_a_burst_uses_every_thread(reads: Reads) -> None:
    """One-file manifests arriving while a read is slow cost no pool task each: they wait in the
    queue for the running drains (one per FILES_PER_DRAIN queued files); a burst starts every thread."""
    pool = CountingPool(4)
    cache = FactsCache(reads, pool=pool, threads=4)
    reads.gate.clear()
    trickle = [data_file(i * 10) for i in range(20)]
    cache.prefetch(trickle[:1])
    assert reads.started.wait(5)  # the first drain is reading (held at the gate)
    for f in trickle[1:]:
        cache.prefetch([f])
    assert pool.tasks <= -(-19 // FILES_PER_DRAIN)  # not one per manifest: one per 8 queued
    burst = [data_file(1000 + i * 10) for i in range(100)]
    cache.prefetch(burst)
    assert cache._drains == 4  # every thread
    assert not cache.idle()
    reads.gate.set()
    read_ahead(cache, trickle + burst)
    assert set(reads.count.values()) == {1} and len(reads.count) == 120
    deadline = time.monotonic() + 10
    while not cache.idle():  # the last drain lingers a moment for more files, then ends
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert [f.modification_time_ms for f in cache.get_all(trickle + burst)] == [f.start_offset for f in trickle + burst]
    assert sum(reads.count.values()) == 120  # the commit read nothing again
    pool.shutdown(wait=True)


def test_a_commit_reads_what_was_not_prefetched(reads: Reads) -> None:
    cache = FactsCache(reads, threads=2)
    cache.prefetch([data_file(0)])
    got = cache.get_all([data_file(0), data_file(10)])
    assert [g.modification_time_ms for g in got] == [0, 10]
    assert reads.count == Counter({data_file(0).path: 1, data_file(10).path: 1})


def test_a_commit_waits_for_a_read_in_flight_instead_of_reading_again(reads: Reads) -> None:
    cache = FactsCache(reads, threads=2)
    reads.gate.clear()
    cache.prefetch([data_file(0)])
    assert reads.started.wait(5)
    result: list[FileFacts] = []
    waiter = threading.Thread(target=lambda: result.extend(cache.get_all([data_file(0)])))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and not result  # blocked on the read in flight
    reads.gate.set()
    waiter.join(5)
    assert len(result) == 1 and reads.count[data_file(0).path] == 1


def test_a_failed_early_read_is_read_again_at_commit(reads: Reads) -> None:
    cache = FactsCache(reads, threads=2)
    f = data_file(0)
    reads.failures[f.path] = 1
    cache.prefetch([f])
    read_ahead(cache, [f])
    got = cache.get_all([f])
    assert got[0].size_bytes == 100 and reads.count[f.path] == 2


def test_a_read_failing_at_commit_raises_and_is_not_kept(reads: Reads) -> None:
    cache = FactsCache(reads, threads=2)
    f = data_file(0)
    reads.failures[f.path] = 2
    cache.prefetch([f])
    read_ahead(cache, [f])  # failed once
    with pytest.raises(DataFileUnavailableError):
        cache.get_all([f])
    assert len(cache) == 0
    assert cache.get_all([f])[0].size_bytes == 100  # storage is back: the next round reads it


class InlinePool(ThreadPoolExecutor):
    """Runs each task in the caller, so its future is done before any callback is attached: the
    callback then runs at once, in the caller (as a fast read on a busy pool can)."""

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def,override]
        future: Future[Any] = Future()
        future.set_result(fn(*args, **kwargs))
        return future


def test_a_read_done_at_once_still_raises_its_own_error(reads: Reads) -> None:
    """A read that is done before the commit looks at its entry has settled it already: the
    commit must still raise that read's error, not the cache's marker for failed reads."""
    cache = FactsCache(reads, pool=InlinePool(1), threads=1)
    f = data_file(0)
    reads.failures[f.path] = 5
    with pytest.raises(DataFileUnavailableError, match="timeout"):
        cache.get_all([f])
    reads.failures[f.path] = 0
    assert [x.modification_time_ms for x in cache.get_all([f])] == [0]


def test_the_same_path_with_another_size_is_another_file(reads: Reads) -> None:
    cache = FactsCache(reads, threads=2)
    cache.prefetch([data_file(0, size=100)])
    read_ahead(cache, [data_file(0, size=100)])
    assert cache.get_all([data_file(0, size=200)])[0].size_bytes == 200
    assert reads.count[data_file(0).path] == 2


def test_committed_files_are_forgotten_and_the_cache_is_bounded(reads: Reads) -> None:
    cache = FactsCache(reads, threads=2, capacity=5)
    files = [data_file(i * 10) for i in range(8)]
    cache.prefetch(files)
    assert len(cache) == 5  # the oldest three went before they were read
    read_ahead(cache, files)
    cache.forget(files[5:7])
    assert len(cache) == 3
    cache.get_all(files)
    cache.close(wait=True)
    assert sum(reads.count.values()) == 5 + 3 + 2  # the evicted and the forgotten are read by the commit
    assert set(reads.count.values()) == {1, 2}


def test_finished_reads_keep_only_their_outcome(reads: Reads) -> None:
    """A buffered file costs every full garbage collection its entry: once read, the entry is the
    packed facts (untracked by the collector) or the shared failure marker, not the chunk's future
    with its lock and waiters, nor a FileFacts or an exception per file."""
    pool = ThreadPoolExecutor(2)
    cache = FactsCache(reads, pool=pool, threads=2)
    files = [data_file(i * 10) for i in range(6)]
    reads.failures[files[0].path] = 1
    cache.prefetch(files)
    pool.shutdown(wait=True)  # every read ahead has run
    kept = [cache._entries[key_of(f)] for f in files]
    assert kept[0] is READ_FAILED
    gc.collect()
    gc.collect()  # a tuple is untracked once its elements are
    assert not any(gc.is_tracked(k) for k in kept[1:])
    assert [FileFacts.unpacked(k).modification_time_ms for k in kept[1:]] == [f.start_offset for f in files[1:]]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "facts",
    [
        FileFacts(100, 7),
        FileFacts(
            2048, 9, 40, '{"numRecords":40}', "a: int64", (("a", False), ("b", True)), Coverage(OffsetSpan(10, 49), 40)
        ),
        FileFacts(2048, 9, 40, times=(("ts", 1, 2),), footer=b"\x15\x00footer"),
    ],
)
def test_packed_facts_read_back_whole_and_untracked(facts: FileFacts) -> None:
    packed = facts.packed()
    assert FileFacts.unpacked(packed) == facts
    gc.collect()
    gc.collect()
    assert not gc.is_tracked(packed)


def test_a_kept_error_holds_no_frames_along_its_chain() -> None:
    def fail() -> None:
        try:
            raise OSError("socket timeout")
        except OSError as exc:
            raise DataFileUnavailableError("s3a://b/k", "cannot stat") from exc

    with pytest.raises(DataFileUnavailableError) as caught:
        fail()
    kept = _without_frames(caught.value)
    assert kept is caught.value and str(kept) == str(caught.value)
    assert kept.__traceback__ is None and kept.__cause__ is not None and kept.__cause__.__traceback__ is None


def test_a_long_queue_does_not_keep_a_commits_own_read_waiting(reads: Reads) -> None:
    """The pool is shared by every table: a commit's read of a file nobody prefetched (another
    table's, say) runs after at most a chunk per drain, not after the whole queue of an archive."""
    before: list[int] = []  # how many of the archive's files were read when the commit's file was

    def read(f: DataFile) -> FileFacts:
        if f.topic == "users":
            before.append(sum(reads.count.values()))
        return reads(f)

    pool = ThreadPoolExecutor(2)
    cache = FactsCache(read, pool=pool, threads=2)
    reads.gate.clear()  # both drains hold their first chunk at the gate
    archive = [data_file(i * 10) for i in range(1_000)]
    cache.prefetch(archive)
    assert reads.started.wait(5)
    other = DataFile("s3a://b/u/users-0-0", "users", 0, 0, 9, 100, FileFormat.PARQUET, 10)
    got: list[FileFacts] = []
    commit = threading.Thread(target=lambda: got.extend(cache.get_all([other])))
    commit.start()
    deadline = time.monotonic() + 10
    while not isinstance(cache._entries.get(key_of(other)), Reading):  # its read is on the pool's queue
        assert time.monotonic() < deadline
        time.sleep(0.01)
    reads.gate.set()
    commit.join(10)
    assert got and got[0].modification_time_ms == 0
    assert before[0] <= 4 * MAX_CHUNK * 2, f"the commit's read waited for {before[0]} of the archive's reads"
    read_ahead(cache, archive)
    pool.shutdown(wait=True)


def test_a_local_read_tells_the_store_of_each_window_before_reading_it() -> None:
    """Each file is hinted once, before it is read, at most two windows ahead, and a drain's chunk
    tells the store of the files queued after it too (they are the next chunk's)."""
    events: list[tuple[str, str]] = []

    def read(f: DataFile) -> FileFacts:
        events.append(("read", f.path))
        return FileFacts(f.size_bytes, 0)

    def hint(paths: list[str]) -> None:
        events.extend(("hint", p) for p in paths)

    pool = ThreadPoolExecutor(1)
    cache = FactsCache(read, pool=pool, threads=1, hint=hint)
    files = [data_file(i * 10) for i in range(3 * HINT_WINDOW + 5)]
    cache.get_all(files)  # a commit's own read: one chunk of every file
    cache.prefetch(more := [data_file(10_000 + i * 10) for i in range(2 * MAX_CHUNK)])
    read_ahead(cache, more)
    pool.shutdown()
    reads = [p for kind, p in events if kind == "read"]
    assert reads == [f.path for f in files + more]
    for n, (kind, path) in enumerate(events):
        if kind == "read":
            hinted = [i for i, (k, p) in enumerate(events[:n]) if k == "hint" and p == path]
            assert hinted, f"{path} was read before the store was told of it"
            assert sum(k == "read" for k, _ in events[hinted[-1] : n]) <= 2 * HINT_WINDOW
    told = [p for kind, p in events if kind == "hint"]
    assert sorted(told) == sorted(reads), "each file is told of once"
    # the drains' first chunk told the store of the second chunk's files while it read its own
    first_chunk_read = events.index(("read", more[MAX_CHUNK - 1].path))
    assert ("hint", more[MAX_CHUNK].path) in events[:first_chunk_read]
