"""What a failed commit round calls for: wait, narrow the next plan, or quarantine one file.

Pure (no I/O, no clock of its own): one :class:`FailureTracker` per table, owned by its
:class:`~commit_service.coordination.table_coordinator.TableCoordinator`, which tells it each failure and
success and obeys the :class:`Decision`. The rules, so that no single file can wedge a table:

- every failure waits before the next attempt: ``0.5 s * 2**(n-1)`` for the n-th consecutive
  failure, at most 30 s (a concurrent writer, :class:`OffsetsMovedError`, retries at once);
- a *transient* error (the table's storage or Kafka unreachable, a concurrent writer) is only
  retried: an outage never condemns a file;
- a file-specific error that cannot pass (missing, resized, corrupt, a symlink, a schema that
  cannot join) quarantines that file at once;
- a file-specific error that may pass (storage could not be asked about it) quarantines the file
  once it has failed ``max_attempts`` times over at least ``quarantine_after_seconds``;
- any other error (Delta refused the plan, something unexpected) is blamed on the plan: after
  ``max_attempts`` failures the next plans are cut to half as many files (a prefix, so still
  contiguous per partition), and again, down to one file; a one-file plan that fails
  ``max_attempts`` times quarantines that file. Each success doubles the cut (the culprit, if
  any, is then met again at a smaller size); a quarantine or an uncut plan lifts it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from commit_service.domain.plan import CommitPlan, CommitPolicy
from commit_service.errors import CommitError, DataFileError, OffsetsMovedError

MAX_BACKOFF = 30.0
FIRST_BACKOFF = 0.5


@dataclass(frozen=True)
class Decision:
    """What the table does after a failure: wait ``delay`` seconds; quarantine ``quarantine``
    (a file path) if set; ``first`` is whether this failure starts a streak (log its trace)."""

    delay: float
    quarantine: str | None = None
    first: bool = False
    attempts: int = 0  # failed attempts that led to the quarantine


@dataclass
class FailureTracker:
    """The current failure streak of one table's commit rounds (not thread-safe: the table's
    commit lock guards it)."""

    policy: CommitPolicy = field(default_factory=CommitPolicy)
    streak: int = 0  # consecutive failures of any kind
    level_failures: int = 0  # failures blamed on the plan at the current plan size
    plan_cap: int | None = None  # most files per plan while narrowing, None: uncut
    not_before: float = 0.0
    _unavailable: dict[str, tuple[float, int]] = field(default_factory=dict)  # path -> (since, attempts)

    def cap(self, plan: CommitPlan) -> CommitPlan:
        """``plan`` cut to the current narrowing cap (a prefix of its files)."""
        return plan if self.plan_cap is None else plan.head(self.plan_cap)

    def succeeded(self, plan: CommitPlan) -> None:
        """``plan`` landed: the streak ends, and a narrowing cap doubles (it is lifted once a plan
        is no longer cut by it), so a refusal that passed costs throughput only briefly."""
        if self.plan_cap is not None:
            self.plan_cap = None if len(plan.files) < self.plan_cap else self.plan_cap * 2
        self.streak = 0
        self.level_failures = 0
        self.not_before = 0.0
        self._unavailable.clear()

    def failed(self, exc: CommitError, plan: CommitPlan | None, now: float) -> Decision:
        """Account for one failed attempt of ``plan`` (None: it failed before a plan was made)."""
        self.streak += 1
        first = self.streak == 1
        delay = 0.0 if isinstance(exc, OffsetsMovedError) else min(MAX_BACKOFF, FIRST_BACKOFF * 2 ** (self.streak - 1))
        attempts = self.streak
        condemned = self._condemned(exc, plan, now)
        if condemned is not None:
            self.plan_cap = None
            self.level_failures = 0
            self.streak = 0
            self._unavailable.pop(condemned, None)
            delay = 0.0  # the rest of the buffer may commit now
        self.not_before = now + delay
        return Decision(delay, condemned, first, attempts)

    def _condemned(self, exc: CommitError, plan: CommitPlan | None, now: float) -> str | None:
        if isinstance(exc, DataFileError):
            if not exc.retryable:
                return exc.path
            since, attempts = self._unavailable.get(exc.path, (now, 0))
            self._unavailable[exc.path] = (since, attempts + 1)
            lasting = now - since >= self.policy.quarantine_after_seconds
            return exc.path if lasting and attempts + 1 >= self.policy.max_attempts else None
        if exc.transient or plan is None or not plan.files:
            return None
        self.level_failures += 1
        if self.level_failures < self.policy.max_attempts:
            return None
        self.level_failures = 0
        if len(plan.files) == 1:
            return plan.files[0].file.path
        self.plan_cap = max(1, len(plan.files) // 2)
        self.streak = 0  # a new, smaller plan starts its own backoff
        return None
