"""The CPU a benchmark's processes used, read from ``/proc``: each process with all its descendants
(the service's JVM is a child of its Python process), and the part of it HotSpot's JIT compilers
used. The ``pipeline`` and ``iceberg-peer`` parts read it before and after their measured window."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lakegate_stack import procfs
from lakegate_stack.procfs import process_tree, tree_cpu_seconds


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of these processes and all their descendants, now."""
    return tree_cpu_seconds(pids)


def jit_threads(pids: list[int]) -> dict[str, float]:
    """CPU seconds, now, of every JIT compiler thread (HotSpot's ``C1/C2 CompilerThread``) of these
    processes and their descendants, by ``pid/tid``. A compiler thread that exits between two
    readings takes its time with it, so a difference of two readings can only under-count."""
    found = {}
    for pid in process_tree(pids):
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                name = (task / "comm").read_text().strip()
            except OSError:
                continue
            if name.startswith(("C1 CompilerThre", "C2 CompilerThre")):
                found[f"{pid}/{task.name}"] = procfs.cpu_seconds(task / "stat")
    return found


def jit_seconds(before: dict[str, float], pids: list[int]) -> float:
    """CPU seconds the JIT compilers of ``pids`` used since ``before`` (a :func:`jit_threads`)."""
    return sum(cpu - before.get(thread, 0.0) for thread, cpu in jit_threads(pids).items())


def by_process(row: dict[str, Any]) -> str:
    """A row's CPU seconds by process, each with its JIT compilers' part, as printed."""
    jit = row["jit_by_process_s"]
    return "CPU-s by process: " + ", ".join(f"{k} {v} ({jit[k]} JIT)" for k, v in row["cpu_by_process_s"].items())
