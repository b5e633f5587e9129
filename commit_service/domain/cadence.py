"""When a table's next round is due on its interval, and what that round catches up with: pure
state, owned by :class:`~commit_service.domain.state.TableState`.

A round's base is when it was planned (at most its due time: the cadence counts from the due
time, not from a catch-up's end); the next round is due ``interval_seconds`` after the last
committed round's base. While a round commits, the next round is due an interval after *its*
base: a sidecar asking then (the lease answer's ``due_ms``) learns when to read its log ends
next, instead of learning it at its first poll after the commit (a round of 6 s in a 10 s
interval left a sidecar polling every 5 s no time to catch up). The Kafka log ends a sidecar read
at or after the due time are what the round waits for (``commit.catch_up_seconds``); those read
while a round commits belong to the round after it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from lakegate_core.types import TopicPartition


class RoundCadence:
    def __init__(self, interval_seconds: float, now: float) -> None:
        self.interval_seconds = interval_seconds
        self.last_commit = now  # the last committed round's base
        self.in_flight: float | None = None  # the base of the round being committed, if any
        # per partition, the Kafka log end its sidecar first read at or after the round was due
        self.catch_up: dict[TopicPartition, int] = {}
        self._next_catch_up: dict[TopicPartition, int] = {}  # the same, read while a round commits

    def due_at(self) -> float:
        """When the next round is due: an interval after the last committed round's base, or,
        while a round commits, after that round's base."""
        return (self.last_commit if self.in_flight is None else self.in_flight) + self.interval_seconds

    def due_ms(self, now: float, wait: float) -> int | None:
        """:meth:`due_at` in epoch ms (rounded up: a read at or after it is at or after the due
        time), for a table that catches up for ``wait`` seconds; None without catching up, and
        once the round can no longer wait (a round long due, an idle table's: sidecars then need
        not follow it closely)."""
        due = self.due_at()
        if not wait or now >= due + wait:
            return None
        return math.ceil(due * 1000)

    def note_log_end(self, tp: TopicPartition, log_end: int, read_at: float) -> None:
        """A sidecar read ``tp``'s log end ``log_end`` at ``read_at``: the next round's catch-up
        if read at or after its due time (the first such read counts)."""
        if read_at >= self.due_at():
            (self.catch_up if self.in_flight is None else self._next_catch_up).setdefault(tp, log_end)

    def caught_up(self, expected: Iterable[TopicPartition], held_through: Callable[[TopicPartition], int]) -> bool:
        """Whether every ``expected`` partition's log end read for this round is held
        (``held_through``: the table's next offset after what it holds or buffers)."""
        return all(tp in self.catch_up and held_through(tp) >= self.catch_up[tp] for tp in expected)

    def began(self, base: float) -> None:
        """A round planned at ``base`` is being committed."""
        self.in_flight = base
        self._next_catch_up.clear()

    def ended(self) -> None:
        """The round :meth:`began` did not commit: the next round is the one it was."""
        self.in_flight = None
        self._next_catch_up.clear()

    def committed(self, base: float) -> None:
        """A round planned at ``base`` committed: the next is due an interval after it, and
        catches up with the log ends read for it while this one committed."""
        self.last_commit = base
        self.in_flight = None
        self.catch_up, self._next_catch_up = self._next_catch_up, {}

    def forget(self, tp: TopicPartition) -> None:
        """``tp``'s log ends, read for a ledger that is over (a new epoch)."""
        self.catch_up.pop(tp, None)
        self._next_catch_up.pop(tp, None)
