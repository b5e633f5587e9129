"""Table maintenance: when a table is compacted and vacuumed. Pure: no I/O, no clock of its own.

The service is the single writer of its tables, so it also keeps them fast to read: Connect sinks
flush small files every few seconds per partition, and Lakegate commits them as they are. The
coordinator asks :func:`due` after each commit round of a table (holding that table's commit lock,
so maintenance never overlaps a round) and runs what it returns through the table's committer:

- ``compact``: ``OPTIMIZE`` (optionally ``ZORDER BY``) once the table holds at least
  ``compact_min_files`` files, at most every ``compact_interval_seconds``. It rewrites data files
  only: the ``txn`` actions holding the Kafka offsets are untouched.
- compaction planned with the rounds (``small_files_allowed`` > 0): after a round, the small files
  of a partition holding more than ``small_files_allowed`` files under ``target_file_size_bytes``
  are bin-packed into files of up to the target (``commit_service.domain.compaction``);
- ``vacuum``: ``VACUUM ... RETAIN <vacuum_retention_hours> HOURS`` every
  ``vacuum_interval_seconds``: files removed from the table (by compaction) and files under the
  table root that no commit references (orphans a sink left) older than the retention are deleted.
  The retention must cover the longest read of an old version and the longest time a sink's file
  may wait under the table root before it is committed.
- ``checkpoint`` (on unless ``checkpoint_interval_commits`` is 0, even when ``enabled`` is
  false): Delta no longer writes a checkpoint inside every 10th commit (the table property
  ``delta.checkpointInterval`` is set out of reach); the coordinator writes one from a background
  thread after every that-many commits instead, so no commit round waits for one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from lakegate_core.status import MaintenanceKind


@dataclass(frozen=True)
class MaintenancePolicy:
    """A table's ``maintenance`` config section (read by the config loader)."""

    enabled: bool = False
    compact_interval_seconds: float = 3600.0
    compact_min_files: int = 100
    zorder_by: tuple[str, ...] = ()
    vacuum_interval_seconds: float = 86_400.0
    vacuum_retention_hours: float = 168.0
    checkpoint_interval_commits: int = 10  # 0: Delta checkpoints inside the commit, as it does by itself
    target_file_size_bytes: int = 128 * 1024 * 1024  # what compaction writes; smaller files are small
    small_files_allowed: int = 128  # per partition, before the rounds' compaction merges them (0: off)

    @property
    def compacts_with_rounds(self) -> bool:
        """Small files are merged between rounds as they come (not only every compact interval)."""
        return self.enabled and self.small_files_allowed > 0

    @property
    def background_checkpoints(self) -> bool:
        """Checkpoints are written off the commit path (whether or not compaction and vacuum run)."""
        return self.checkpoint_interval_commits > 0

    def __post_init__(self) -> None:
        if self.checkpoint_interval_commits < 0:
            raise ValueError("maintenance.checkpoint_interval_commits must not be negative")
        if self.compact_interval_seconds <= 0 or self.vacuum_interval_seconds <= 0:
            raise ValueError("maintenance.compact_interval_seconds and vacuum_interval_seconds must be > 0")
        if self.compact_min_files < 2:
            raise ValueError("maintenance.compact_min_files must be at least 2")
        if self.target_file_size_bytes < 1024 * 1024:
            raise ValueError("maintenance.target_file_size_bytes must be at least 1 MiB (1048576)")
        if self.small_files_allowed < 0 or self.small_files_allowed == 1:
            raise ValueError("maintenance.small_files_allowed must be 0 (off) or at least 2")
        if self.vacuum_retention_hours < 0:
            raise ValueError("maintenance.vacuum_retention_hours must not be negative")


@dataclass
class MaintenanceClock:
    """When each kind of maintenance last ran for one table (kept by its coordinator, in memory:
    after a restart the first run of each kind waits one interval from the start)."""

    last: dict[MaintenanceKind, float] = field(default_factory=dict)

    def started(self, now: float) -> None:
        for kind in (MaintenanceKind.COMPACT, MaintenanceKind.VACUUM):
            self.last.setdefault(kind, now)

    def ran(self, kind: MaintenanceKind, now: float) -> None:
        self.last[kind] = now


def due(
    policy: MaintenancePolicy, clock: MaintenanceClock, now: float, files: Callable[[], int]
) -> list[MaintenanceKind]:
    """The maintenance to run now, compaction first (vacuum then removes what it replaced).

    Compaction is considered every ``compact_interval_seconds`` and runs when the table holds at
    least ``compact_min_files`` files (``files`` is asked only then: counting may read the log).
    """
    if not policy.enabled:
        return []
    out = []
    since = {k: now - clock.last.get(k, now) for k in (MaintenanceKind.COMPACT, MaintenanceKind.VACUUM)}
    if since[MaintenanceKind.COMPACT] >= policy.compact_interval_seconds:
        if files() >= policy.compact_min_files:
            out.append(MaintenanceKind.COMPACT)
        else:
            clock.ran(MaintenanceKind.COMPACT, now)  # looked: not worth it yet; look again an interval later
    if since[MaintenanceKind.VACUUM] >= policy.vacuum_interval_seconds:
        out.append(MaintenanceKind.VACUUM)
    return out
