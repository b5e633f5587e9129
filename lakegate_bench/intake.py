"""Benchmark: the cost of accepting manifests in the commit service's HTTP handler.

Builds the real Flask app (``commit_service.http.app.create_app``: validation, path model, routing,
fencing off, the table state) in-process, with no committer work (nothing is committed during the
run; the interval is an hour), and times ``POST /v1/manifests`` through Flask's test client (no
socket, no gunicorn: ``scripts/bench-slowclients`` covers the transport). Cases: one manifest of N
files into an empty buffer; a one-file manifest while N files are already buffered and read ahead
(the partition's buffer must not make each new file slower); and a one-file manifest right after
the N-file one, while the N files are still being read ahead (the read-ahead threads share the
interpreter with the HTTP thread). Prints a table and writes JSON (default
.lakegate/bench/intake.json). Run through ``scripts/bench-intake``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

from commit_service.config import ServiceConfig
from commit_service.http.app import create_app, settle_heap
from commit_service.http.runtime import runtime
from lakegate_core.configfile import build

TOKEN = "bench-sidecar-token-0000000001"
CONFIG = {
    "server": {"max_request_bytes": 64 << 20},
    "auth": {"enabled": True, "tokens": [{"token": TOKEN, "role": "sidecar"}]},
    "storage": {"allowed_roots": ["s3a://landing/"]},
    "tables": [
        {
            "name": "bench",
            "path": "s3a://lake/bench",
            "topics": ["bench"],
            "placement": "copy_into_table",
            "commit": {"interval_seconds": 3600, "max_files": 1_000_000, "max_pending_files": 1_000_000},
        }
    ],
}


class IdleCommitter:
    """Nothing is committed during the benchmark (the table stays empty). Accepted files are queued
    to be read ahead as in production (:class:`~commit_service.storage.prefetch.FactsCache`); the read
    itself is a constant here: the benchmark is about the HTTP thread, not storage."""

    def __init__(self) -> None:
        from commit_service.storage.prefetch import FactsCache
        from commit_service.storage.reader import FileFacts

        self.facts = FactsCache(lambda f: FileFacts(f.size_bytes, 0), name="bench")

    def prefetch(self, files: list[Any]) -> None:
        self.facts.prefetch(files)

    def snapshot(self) -> Any:
        from commit_service.ports import TableSnapshot
        from lakegate_core.types import PartitionOffsets

        return TableSnapshot(-1, PartitionOffsets())

    warm = snapshot


def files(first: int, count: int) -> list[dict[str, Any]]:
    return [
        {
            "path": f"s3a://landing/bench/bench-0-{i * 10:020d}",
            "topic": "bench",
            "partition": 0,
            "start_offset": i * 10,
            "end_offset": i * 10 + 9,
            "size_bytes": 1000,
        }
        for i in range(first, first + count)
    ]


def client() -> tuple[Any, IdleCommitter]:
    committer = IdleCommitter()
    app = create_app(build(ServiceConfig, CONFIG), committer_factory=lambda t: committer, start=False)  # type: ignore[arg-type,return-value]
    runtime(app).coordinator.load()
    settle_heap()  # as the service does once it has started
    return app.test_client(), committer


def read_ahead(committer: IdleCommitter, timeout: float = 60.0) -> None:
    """Wait until the buffered files' facts are read ahead (no drain running)."""
    deadline = time.monotonic() + timeout
    while not committer.facts.idle():
        if time.monotonic() > deadline:
            raise SystemExit("the read-ahead did not finish within 60 s")
        time.sleep(0.01)


def post(c: Any, mid: str, body_files: list[dict[str, Any]]) -> float:
    body = {"manifest_id": mid, "sidecar": {"id": "bench", "worker": "w:1"}, "files": body_files}
    started = time.perf_counter()
    answer = c.post("/v1/manifests", json=body, headers={"Authorization": f"Bearer {TOKEN}"})
    took = time.perf_counter() - started
    assert answer.status_code == 202, answer.get_data(as_text=True)[:300]
    return took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench-intake", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000", help="manifest / buffer sizes, comma list (1000,10000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per case; the median is reported (3)")
    parser.add_argument("--out", type=Path, default=Path(".lakegate/bench/intake.json"), help="JSON output")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[str, Any] = {"machine": platform.machine(), "python": platform.python_version(), "cases": []}
    print(f"{'case':<48} {'median s':>9} {'per file ms':>12}")
    for n in sizes:
        whole = [post(client()[0], f"m{r}", files(0, n)) for r in range(args.repeat)]
        one: list[float] = []
        right_after: list[float] = []
        for r in range(args.repeat):
            c, committer = client()
            post(c, "fill", files(0, n))
            right_after.append(post(c, f"after{r}", files(n, 1)))
            read_ahead(committer)
            one.append(post(c, f"one{r}", files(n + 1, 1)))
        for name, runs, per in (
            (f"one manifest of {n:,} files", whole, n),
            (f"one file with {n:,} buffered", one, 1),
            (f"one file right after {n:,}, read-ahead running", right_after, 1),
        ):
            median = statistics.median(runs)
            results["cases"].append({"case": name, "files": per, "median_s": median, "runs_s": runs})
            print(f"{name:<48} {median:>9.3f} {median / per * 1000:>12.3f}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
