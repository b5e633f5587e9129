"""The ``partitions`` part of ``python -m lakegate_bench run``: what a round costs the service's
coordinator as its tables and partitions grow, with the files per round held fixed.

The service's own ``Coordinator`` (intake, leases, fencing's bookkeeping, every table's state and
round) with an in-memory committer in place of Delta: the figures are the coordination's, which is
what grows with the partitions; a commit's Delta and storage work grows with its files and is
the ``service`` part's. For each layout of ``--layouts`` (tables x partitions per table, default
1x100, 100x100): one sidecar claims every partition each round (watermarks included), one
``--round-files`` files are sent spread over the partitions, and the loop's pass runs every table's
round. ``--rounds`` rounds; the medians of the claim, the intake and the pass are reported.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, cast

from commit_service.config import ServiceConfig, TableConfig
from commit_service.coordination.coordinator import Coordinator
from commit_service.domain.plan import CommitPlan
from commit_service.ports import Committer, TableSnapshot
from lakegate_core.configfile import build
from lakegate_core.protocol import DataFile, FileFormat, LeaseRequest, Manifest, SidecarInfo, Watermark
from lakegate_core.status import CommitRecord
from lakegate_core.types import PartitionOffsets, TopicPartition

SIDECAR = SidecarInfo("bench-sidecar", "bench-worker:8083")
INTERVAL = 10.0


@dataclass
class MemoryCommitter:
    """A table that commits in memory (the coordination's cost alone)."""

    name: str
    committed: dict[TopicPartition, int] = field(default_factory=dict)
    version: int = -1

    def snapshot(self) -> TableSnapshot:
        return TableSnapshot(self.version, PartitionOffsets(self.committed))

    warm = snapshot

    def prefetch(self, files: list[DataFile]) -> None:
        pass

    def commit(self, plan: CommitPlan) -> CommitRecord:
        self.version += 1
        self.committed.update(plan.offsets)
        return CommitRecord(self.name, self.version, f"c{self.version}", len(plan.files), plan.records, plan.offsets)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def one_layout(tables: int, partitions: int, round_files: int, rounds: int) -> dict[str, Any]:
    config = build(
        ServiceConfig,
        {
            "auth": {"enabled": False},
            "storage": {"allowed_roots": ["s3a://landing/"]},
            "tables": [
                {
                    "name": f"t{i}",
                    "path": f"s3a://lake/t{i}",
                    "topics": [f"topic{i}"],
                    "placement": "copy_into_table",
                    "commit": {"interval_seconds": INTERVAL, "max_files": 1_000_000, "max_pending_files": 10_000_000},
                }
                for i in range(tables)
            ],
        },
    )
    clock = Clock()
    committers: list[MemoryCommitter] = []

    def factory(table: TableConfig) -> Committer:
        committers.append(MemoryCommitter(table.name))
        return cast(Committer, committers[-1])  # the coordinator asks nothing more of it here

    coordinator = Coordinator(config, factory, clock=clock)
    coordinator.load()
    tps = [TopicPartition(f"topic{i}", p) for i in range(tables) for p in range(partitions)]
    next_offset = dict.fromkeys(tps, 0)
    claims, intakes, passes = [], [], []
    for r in range(rounds):
        # the round's files: round_files of them, on partitions taken in turn across rounds
        chosen = [tps[(r * round_files + i) % len(tps)] for i in range(round_files)]
        # with the claim, every partition's watermark: all it sent up to the previous round
        marks = tuple(Watermark(tp.topic, tp.partition, next_offset[tp], int(clock.now * 1000)) for tp in tps)
        files = []
        for tp in chosen:
            start = next_offset[tp]
            next_offset[tp] = start + 100
            path = f"s3a://landing/{tp.topic}/{tp.topic}-{tp.partition}-{start:020d}"
            files.append(DataFile(path, tp.topic, tp.partition, start, start + 99, 1000, FileFormat.PARQUET, 100))
        t0 = time.perf_counter()
        coordinator.claim(LeaseRequest(SIDECAR, "bench", (0,), tuple(tps), marks))
        t1 = time.perf_counter()
        for i in range(0, len(files), 10_000):
            coordinator.submit(Manifest(f"r{r}-{i}", SIDECAR, tuple(files[i : i + 10_000])))
        t2 = time.perf_counter()
        clock.now += INTERVAL
        coordinator.tick()
        t3 = time.perf_counter()
        claims.append(t1 - t0)
        intakes.append(t2 - t1)
        passes.append(t3 - t2)
    committed = sum(sum(c.committed.values()) for c in committers) // 100  # each file holds 100 offsets
    assert committed == round_files * rounds, (committed, round_files * rounds)  # every file committed once
    row = {
        "tables": tables,
        "partitions": tables * partitions,
        "round_files": round_files,
        "rounds": rounds,
        "claim_s": round(statistics.median(claims), 4),
        "intake_s": round(statistics.median(intakes), 4),
        "pass_s": round(statistics.median(passes), 4),
    }
    print(
        f"{tables:>4} tables x {partitions:>4} partitions, {round_files:,} files a round: claim "
        f"{row['claim_s'] * 1000:8.1f} ms  intake {row['intake_s'] * 1000:8.1f} ms  pass {row['pass_s'] * 1000:8.1f} ms",
        flush=True,
    )
    return row


def part_partitions(layouts: list[str], round_files: int, rounds: int) -> dict[str, Any]:
    """Each layout ``<tables>x<partitions per table>`` (see the module docstring)."""
    results = []
    for layout in layouts:
        tables, _, partitions = layout.partition("x")
        results.append(one_layout(int(tables), int(partitions), round_files, rounds))
    return {"results": results}
