"""A freshness run's figures, from what its :class:`~lakegate_bench.freshness.FreshnessPoller` saw:
freshness p50 / p99 / max, where that time went stage by stage, commits, and CPU per million
records (a row of the ``pipeline`` and ``iceberg-peer`` parts' results)."""

from __future__ import annotations

import statistics
from typing import Any

from lakegate_bench.freshness import FreshnessPoller


def quantiles(values: list[float]) -> dict[str, float]:
    """p50 / p99 / max of ``values`` (seconds), rounded to 10 ms."""
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 2),
        "p99": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 2),
        "max": round(ordered[-1], 2),
    }


def stage_figures(stages_ms: list[tuple[int, int, int, int]]) -> dict[str, dict[str, float]]:
    """Where a record's freshness went, per stage (p50 / p99 / max over the records, s): until its
    file was on the S3 server (the sink: Connect's flush), until the commit that added it (the
    committer: for Lakegate the sidecar's poll, the wait for the round and the commit), until the
    poller saw that commit (the reader's own poll)."""
    if not stages_ms:
        return {}
    return {
        "to_file": quantiles([(w - p) / 1000 for p, w, _, _ in stages_ms]),
        "file_to_commit": quantiles([(c - w) / 1000 for _, w, c, _ in stages_ms]),
        "commit_to_seen": quantiles([(v - c) / 1000 for _, _, c, v in stages_ms]),
    }


def figures(
    poller: FreshnessPoller, expected: int, cpu: float, marginal: float | None, rate: int, jit: float
) -> dict[str, Any]:
    """A run's freshness and CPU; ``jit`` is the part of ``cpu`` its JIT compilers used."""
    fresh = [(v - p) / 1000 for p, v in poller.seen_ms]
    if len(fresh) != expected:
        raise SystemExit(f"the table holds {len(fresh)} records, {expected} were produced")
    q = quantiles(fresh)
    out = {
        "records": expected,
        "rate": rate,
        "commits": len(poller.versions) - poller.warm_up_versions,  # in the measured run
        "freshness_p50_s": q["p50"],
        "freshness_p99_s": q["p99"],
        "freshness_max_s": q["max"],
        **({"stages_s": stage_figures(poller.stages_ms)} if poller.stages_ms else {}),
        "cpu_s": round(cpu, 1),
        "cpu_s_per_million": round(cpu / expected * 1e6, 1),
        "jit_cpu_s": round(jit, 1),
    }
    if marginal is not None:
        out.update(marginal_cpu_s=round(marginal, 1), marginal_cpu_s_per_million=round(marginal / expected * 1e6, 1))
    return out
