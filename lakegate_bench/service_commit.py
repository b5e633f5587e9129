"""The ``service`` part of ``python -m lakegate_bench run``: one round of N Parquet files through the
real service, from the outside.

For each N of ``--service-files``: N Parquet files (``--rows`` rows x 10 columns, the ``commit``
part's files) spread over ``--service-partitions`` partitions of one topic, a fresh
``lakegate-service`` (gunicorn, Spark, auth on) whose one table adds them in place, the files sent
in manifests of ``--manifest-files`` each (500 by default, as a sidecar batches them by default;
at most 10,000), each ``POST /v1/manifests`` timed, and ``POST /v1/tables/bench/commit`` sent the
moment the last manifest is accepted (a commit nothing was read ahead for but what the read-ahead
managed meanwhile) or ``--settle-seconds`` later (as a round follows its files by up to the
interval). The files are just written, so in the page cache, unless ``--cold-files`` evicts them
first (``posix_fadvise``: a footer then comes from the disk, as for files written hours ago).
The figure depends on all three; each is printed with it. Before it, one file per partition is
committed in a round of its own, which creates the table (its time is reported apart): the
measured round commits into a table that exists, as the ``commit`` part's do. The service's memory is the peak of
its process tree (gunicorn's worker and Spark's JVM), sampled every 50 ms from before the first
manifest to the commit's answer. The committed table is then read back: every file once, every
partition's offset recorded.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakegate_bench.commit_path import TOPIC, Landing
from lakegate_core.protocol import MAX_FILES_PER_MANIFEST, DataFile, Manifest, SidecarInfo
from lakegate_stack import page_cache
from lakegate_stack.procfs import process_tree, rss_mib

JSON = {"Content-Type": "application/json"}


class PeakRss:
    """The peak resident memory of a process and its descendants, sampled on a thread; and the
    peak of each kind of process in it (``java``: Spark's JVM; ``python``: the rest).

    The descendants are looked up again every ``tree_every`` seconds, not at every sample: that
    walks all of ``/proc``, and at 20 samples a second it took 40-80% of a core from the two that
    the system under test has (the ``adopt`` part's bench process at 82% CPU in ``ps``)."""

    def __init__(self, pid: int, every: float = 0.05, tree_every: float = 1.0) -> None:
        self.pid = pid
        self.every = every
        self.tree_every = tree_every
        self.peak_mib = 0.0
        self.peak_by_kind: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._tree: dict[int, str] = {}  # pid: kind
        self._tree_at = -float("inf")

    def _processes(self) -> dict[int, str]:
        now = time.monotonic()
        if now - self._tree_at >= self.tree_every:
            self._tree_at = now
            known, self._tree = self._tree, {}
            for pid in process_tree([self.pid]):
                try:
                    self._tree[pid] = known.get(pid) or (
                        "java" if Path(f"/proc/{pid}/comm").read_text().strip() == "java" else "python"
                    )
                except OSError:
                    continue  # gone between the listing and the read
        return self._tree

    def _sample(self) -> float:
        total = 0.0
        kinds: dict[str, float] = {}
        for pid, kind in self._processes().items():
            try:
                rss = rss_mib(pid)
            except OSError:
                continue  # gone since the tree was read
            total += rss
            kinds[kind] = kinds.get(kind, 0.0) + rss
        for kind, rss in kinds.items():
            self.peak_by_kind[kind] = max(self.peak_by_kind.get(kind, 0.0), rss)
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_mib = max(self.peak_mib, self._sample())
            self._stop.wait(self.every)

    def __enter__(self) -> PeakRss:
        self.peak_mib = self._sample()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_mib = max(self.peak_mib, self._sample())


SIDECAR_MANIFEST_FILES = 500  # the sidecar's default max_files_per_manifest (sidecar/config.py)


@dataclass(frozen=True)
class Delivery:
    """How the measured round's files reach the service (see the module docstring)."""

    manifest_files: int = SIDECAR_MANIFEST_FILES
    settle_seconds: float = 0.0
    cold_files: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.manifest_files <= MAX_FILES_PER_MANIFEST or self.settle_seconds < 0:
            raise ValueError(f"--manifest-files: 1..{MAX_FILES_PER_MANIFEST}; --settle-seconds: >= 0")

    def text(self) -> str:
        cache = "evicted from the page cache" if self.cold_files else "in the page cache"
        return f"manifests of {self.manifest_files:,}, commit {self.settle_seconds:g} s after the last, files {cache}"


def manifest_bodies(files: list[DataFile], name: str, size: int = MAX_FILES_PER_MANIFEST) -> list[bytes]:
    """The files as a sidecar sends them: manifests of at most ``size`` files, encoded ahead."""
    sidecar = SidecarInfo("bench-sidecar", "bench-worker:8083")
    return [
        json.dumps(Manifest(f"{name}-{i}", sidecar, tuple(files[i : i + size])).to_dict()).encode()
        for i in range(0, len(files), size)
    ]


def evict(files: list[DataFile]) -> None:
    """Drop ``files`` from the page cache (the kernel may keep what it likes; clean pages go)."""
    for f in files:
        page_cache.evict(f.path.removeprefix("file://"))


def footers_cached(files: list[DataFile], sample: int = 1000) -> float:
    """The share of ``files`` (``sample`` of them, spread evenly) whose last page, where a Parquet
    footer ends, the page cache holds: "files in the page cache" is what the bench leaves there,
    and a VM whose memory is reclaimed keeps much less of what it wrote minutes before."""
    step = max(1, len(files) // sample)
    picked = files[::step]
    return sum(page_cache.tail_cached(f.path.removeprefix("file://")) for f in picked) / max(len(picked), 1)


def phases_text(phases: dict[str, int]) -> str:
    """Where the commit's time went, as the service measured it (``CommitRecord.phases_ms``)."""
    names = {"facts": "footer wait", "open": "opening", "write": "actions", "commit": "Delta's commit"}
    return ", ".join(f"{names.get(k, k)} {v / 1000:.2f}" for k, v in phases.items()) or "no phases"


def one_round(work: Path, n: int, rows: int, partitions: int, delivery: Delivery) -> dict[str, Any]:
    """One measured round of ``n`` files on a fresh service (see the module docstring)."""
    from lakegate_stack.services import ServiceProcess

    landing_dir = work / f"service-landing-{n}"
    root = work / f"service-table-{n}"
    print(f"writing {n:,} Parquet files of {rows:,} rows over {partitions:,} partitions ...", flush=True)
    started = time.monotonic()
    landing = Landing(landing_dir, rows, partitions=partitions)
    first = landing.write(partitions)  # the round that creates the table, one file per partition
    files = landing.write(n, progress=True)
    print(f"  written in {time.monotonic() - started:.1f} s", flush=True)
    first_bodies, bodies = manifest_bodies(first, "first"), manifest_bodies(files, "round", delivery.manifest_files)
    table = {
        "name": "bench",
        "path": f"file://{root}",
        "topics": [TOPIC],
        "placement": "in_place_absolute",  # the landing is outside the table's root: add, never rewrite
        "commit": {
            "interval_seconds": 3600,
            "max_files": 1_000_000,
            "max_bytes": 1 << 50,
            "max_pending_files": 10_000_000,
        },
    }
    roots = [f"file://{landing_dir}/", f"file://{root}/"]
    # a 10,000-file manifest is about 2.3 MB: over the default 1 MiB request limit
    service = ServiceProcess(work / f"service-{n}", [table], roots, server={"max_request_bytes": 16 << 20})
    print("starting the service (gunicorn, then Spark) ...", flush=True)
    service.start()
    try:
        pid = service.process.pid
        assert pid is not None
        for body in first_bodies:
            assert service.call("POST", "/v1/manifests", data=body, headers=JSON).status_code == 202
        t0 = time.perf_counter()
        service.commit_now("bench")
        first_s = time.perf_counter() - t0
        if delivery.cold_files:
            evict(files)
        cached = footers_cached(files)
        with PeakRss(pid) as memory:
            idle_mib = memory.peak_mib
            accepts = []
            for body in bodies:
                t0 = time.perf_counter()
                answer = service.call("POST", "/v1/manifests", data=body, headers=JSON)
                accepts.append(time.perf_counter() - t0)
                assert answer.status_code == 202, answer.text[:500]
                statuses = {f["status"] for f in answer.json()["files"]}
                assert statuses == {"accepted"}, statuses
            time.sleep(delivery.settle_seconds)
            t0 = time.perf_counter()
            outcome = service.commit_now("bench")
            commit_s = time.perf_counter() - t0
        phases = outcome.get("phases_ms") or {}
        print(
            f"{n:>7,} files ({delivery.text()}): manifests accepted in {sum(accepts):.3f} s ({len(accepts)} of them, the largest "
            f"{max(accepts):.3f} s), {cached:.0%} of the footers in the page cache, commit {commit_s:.3f} s "
            f"({phases_text(phases)}), service RSS peak {memory.peak_mib:,.0f} MiB "
            f"(idle {idle_mib:,.0f}; the JVM's peak {memory.peak_by_kind.get('java', 0):,.0f}, the Python processes' "
            f"{memory.peak_by_kind.get('python', 0):,.0f})",
            flush=True,
        )
    finally:
        service.stop()
    offsets = {int(p): o for p, o in outcome["offsets"][TOPIC].items()}
    assert outcome["committed"] and outcome["files"] == n and outcome["records"] == n * rows, outcome
    assert offsets == landing.next, "the commit's offsets are not where the files end"
    return {
        "files": n,
        "rows_per_file": rows,
        "partitions": partitions,
        "manifests": len(bodies),
        "manifest_files": delivery.manifest_files,
        "settle_seconds": delivery.settle_seconds,
        "cold_files": delivery.cold_files,
        "accept_s_total": round(sum(accepts), 4),
        "accept_s_max": round(max(accepts), 4),
        "commit_s": round(commit_s, 4),
        "commit_phases_ms": phases,
        "footers_cached": round(cached, 3),
        "first_commit_s": round(first_s, 4),
        "rss_mib_peak": round(memory.peak_mib, 1),
        "rss_mib_idle": round(idle_mib, 1),
        "rss_mib_peak_jvm": round(memory.peak_by_kind.get("java", 0.0), 1),
        "rss_mib_peak_python": round(memory.peak_by_kind.get("python", 0.0), 1),
    }


def part_service(work: Path, sizes: list[int], rows: int, partitions: int, delivery: Delivery) -> dict[str, Any]:
    """One fresh service per size (see the module docstring)."""
    return {"results": [one_round(work, n, rows, partitions, delivery) for n in sizes]}
