"""A Linux process's CPU time, memory and descendants, read from ``/proc`` (see proc(5)).

Read by the benchmarks (``lakegate_bench.pipeline``, ``lakegate_bench.sidecar``) and by the
tests that check what a process spends (a worker that must not spin, a JVM that must not start
processes). Every reader answers for now; callers take the difference of two readings.
"""

from __future__ import annotations

import os
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")

# Indexes into stat_fields(): proc(5) numbers the fields from 1, and stat_fields starts at field 3.
_PPID, _UTIME, _STIME, _CUTIME, _CSTIME = 1, 11, 12, 13, 14


def stat_fields(stat: Path) -> list[str]:
    """The fields of a ``/proc/<pid>/stat`` (or ``/proc/<pid>/task/<tid>/stat``) file after the
    command name, which may hold spaces and parentheses: index 0 is proc(5)'s field 3 (state)."""
    return stat.read_text().rsplit(")", 1)[1].split()


def cpu_seconds(stat: Path) -> float:
    """User + system CPU seconds of the process or thread whose stat file this is; 0 when it is gone."""
    try:
        fields = stat_fields(stat)
        return (int(fields[_UTIME]) + int(fields[_STIME])) / TICKS
    except (OSError, IndexError, ValueError):
        return 0.0


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process (all its threads), children not included."""
    return cpu_seconds(Path(f"/proc/{pid}/stat"))


def children_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of the children of ``pid`` that have exited and been waited for."""
    fields = stat_fields(Path(f"/proc/{pid}/stat"))
    return (int(fields[_CUTIME]) + int(fields[_CSTIME])) / TICKS


def rss_mib(pid: int) -> float:
    """Resident set size of one process, in MiB."""
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE / 2**20


def thp_enabled(pid: int) -> bool:
    """Whether the kernel may give the process transparent huge pages (``THP_enabled`` of its
    status, Linux 5.0 on; 0 once a prctl turned them off for it or a parent)."""
    [line] = [x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("THP_enabled:")]
    return line.split()[1] == "1"


def process_tree(pids: list[int]) -> list[int]:
    """These processes and all their descendants, now (each process once, parents first)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int(stat_fields(entry / "stat")[_PPID])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    tree: list[int] = []
    todo = list(pids)
    while todo:
        pid = todo.pop(0)
        if pid not in tree:
            tree.append(pid)
            todo.extend(children.get(pid, []))
    return tree


def tree_cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of these processes and all their descendants, now."""
    return sum(process_cpu_seconds(pid) for pid in process_tree(pids))
