"""The ``merge`` part of ``python -m lakegate_bench run``: what merging small files with the rounds
costs, and what it leaves.

A stream of small files as a sink's flushes give it: ``--merge-rounds`` rounds (default 180: half an
hour at a 10 s interval) of ``--merge-files`` Parquet files (one per Kafka partition,
``--merge-rows`` rows x 10 columns each, about 40 KB at the default 700; offsets continuing),
each round committed zero-copy through the table's ``TableCoordinator`` as the service runs it,
footers read ahead. Per format, two tables take the same stream:

- ``off``: maintenance off (the sink's files stay as they are);
- ``merge``: ``maintenance.enabled`` with ``small_files_allowed`` (``--merge-allowed``) and the
  default target: after each round the coordinator's upkeep merges a partition's smallest files
  once it holds too many (``commit_service.domain.compaction``).

For each: the rounds' seconds (the round, and the round with the upkeep after it: here the next
round waits for a merge, which in the service runs beside the rounds after it), the merges (how
many, their seconds, the bytes they rewrote over the bytes ingested), the CPU seconds of this
process and its JVM over the stream, the table's live files at the end, and a full scan by Spark
(median of three after a warm-up). Last, the alternative: each round's files rewritten by Spark
into one file as the round would (the seconds and CPU it adds).
"""

from __future__ import annotations

import os
import statistics
import time
from typing import TYPE_CHECKING, Any

from commit_service.domain.compaction import CompactionPlan
from commit_service.domain.maintenance import MaintenancePolicy
from lakegate_bench.process_cpu import cpu_seconds

if TYPE_CHECKING:
    from lakegate_bench.commit_path import Bench

SCANS = 3


def part_merge(
    bench: Bench, rounds: int, files: int, rows: int, allowed: int, formats: tuple[str, ...]
) -> dict[str, Any]:
    from lakegate_bench.commit_path import Landing

    out = []
    print(
        f"{'table':>14} {'round s':>8} {'+upkeep p95':>12} {'merges':>7} {'merge s':>8} {'rewritten':>10} "
        f"{'CPU s':>7} {'files':>6} {'scan s':>7}",
        flush=True,
    )
    for fmt in formats:
        for mode in ("off", "merge"):
            policy = MaintenancePolicy(enabled=mode == "merge", small_files_allowed=allowed)
            table = _table(bench, f"merge_{fmt}_{mode}", fmt, policy)
            landing = Landing(bench.work / f"landing-merge-{fmt}-{mode}", rows, partitions=files)
            merged: list[CompactionPlan] = []
            compact_small = table.committer.compact_small

            def counted(plan: CompactionPlan, merged: list[CompactionPlan] = merged, run: Any = compact_small) -> Any:
                merged.append(plan)
                return run(plan)

            table.committer.compact_small = counted  # type: ignore[method-assign]
            ingested, round_s, with_upkeep = 0, [], []
            cpu_before = cpu_seconds([os.getpid()])
            for n in range(rounds):
                batch = landing.write(files)
                ingested += sum(f.size_bytes for f in batch)
                started = time.perf_counter()
                round_s.append(bench.commit(table, batch))
                # A merge runs on the table's background thread, beside the rounds after it. The
                # stream here has no interval between rounds, so the next round waits for the merge
                # (at a 10 s interval a merge of these files ends before the next round is due).
                table.maybe_maintain()
                table.drain()
                with_upkeep.append(time.perf_counter() - started)
                if (n + 1) % 20 == 0:
                    print(f"  {fmt} {mode}: {n + 1}/{rounds} rounds, {len(merged)} merges", flush=True)
            table.drain()
            merge_s = [r.duration_ms / 1000 for r in table.upkeep.runs if r.detail and r.detail.startswith("merged")]
            cpu = cpu_seconds([os.getpid()]) - cpu_before
            live = table.committer.file_count()
            scan_s = _scan(bench, fmt, table)
            row = {
                "table": f"{fmt} {mode}",
                "rounds": rounds,
                "files_per_round": files,
                "rows_per_file": rows,
                "round_s_median": round(statistics.median(round_s), 3),
                "round_with_upkeep_s_p95": round(_p95(with_upkeep), 3),
                "round_with_upkeep_s_max": round(max(with_upkeep), 3),
                "merges": len(merge_s),
                "merge_s_total": round(sum(merge_s), 2),
                "merge_s_median": round(statistics.median(merge_s), 3) if merge_s else None,
                "bytes_ingested": ingested,
                "bytes_rewritten": sum(g.bytes for p in merged for g in p.groups),
                "rewritten_per_ingested": round(sum(g.bytes for p in merged for g in p.groups) / ingested, 2),
                "cpu_s": round(cpu, 1),
                "live_files": live,
                "full_scan_s": scan_s,
            }
            out.append(row)
            print(
                f"{row['table']:>14} {row['round_s_median']:>8.3f} {row['round_with_upkeep_s_p95']:>12.3f} "
                f"{row['merges']:>7} {row['merge_s_total']:>8.1f} {row['rewritten_per_ingested']:>10.2f} "
                f"{row['cpu_s']:>7.1f} {row['live_files']:>6} {row['full_scan_s']:>7.3f}",
                flush=True,
            )
    out.append(_coalesce(bench, rounds, files, rows))
    return {"tables": out, "small_files_allowed": allowed}


def _coalesce(bench: Bench, rounds: int, files: int, rows: int) -> dict[str, Any]:
    """The alternative to merging after the rounds: each round's files rewritten by Spark into one
    (``read.parquet(files).coalesce(1).write.parquet``, not committed), what a round that coalesced
    its own small files would add to every round."""
    from lakegate_bench.commit_path import Landing

    landing = Landing(bench.work / "landing-merge-coalesce", rows, partitions=files)
    seconds = []
    cpu_before = cpu_seconds([os.getpid()])
    for n in range(rounds):
        batch = landing.write(files)
        started = time.perf_counter()
        frame = bench.spark.read.parquet(*[f.path for f in batch]).coalesce(1)
        frame.write.mode("overwrite").parquet(f"file://{bench.work}/coalesced-{n}")
        seconds.append(time.perf_counter() - started)
    cpu = cpu_seconds([os.getpid()]) - cpu_before
    row = {
        "table": "coalesce each round",
        "rounds": rounds,
        "round_s_median": round(statistics.median(seconds), 3),
        "round_with_upkeep_s_p95": round(_p95(seconds), 3),
        "cpu_s": round(cpu, 1),
        "live_files": rounds,
    }
    print(
        f"{row['table']:>14} {row['round_s_median']:>8.3f} {row['round_with_upkeep_s_p95']:>12.3f} "
        f"{'':>7} {'':>8} {'':>10} {row['cpu_s']:>7.1f} {row['live_files']:>6}",
        flush=True,
    )
    return row


def _table(bench: Bench, name: str, fmt: str, policy: MaintenancePolicy) -> Any:
    if fmt == "delta":
        return bench.coordinator(name, policy=policy)
    from lakegate_bench.iceberg import iceberg_coordinator

    return iceberg_coordinator(bench, name, policy=policy)


def _scan(bench: Bench, fmt: str, table: Any) -> float:
    from lakegate_bench.iceberg import CATALOG

    if fmt == "delta":
        frame = bench.spark.read.format("delta").load(table.config.path)
    else:
        frame = bench.spark.table(f"{CATALOG}.{table.config.name}")
    query = frame.selectExpr("count(*)", "sum(offset)")
    query.collect()  # the warm-up
    times = []
    for _ in range(SCANS):
        started = time.perf_counter()
        query.collect()
        times.append(time.perf_counter() - started)
    return round(statistics.median(times), 3)


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
