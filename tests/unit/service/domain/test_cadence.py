"""RoundCadence: when the next round is due, and which log ends it catches up with, around a
round that is being committed."""

from __future__ import annotations

from commit_service.domain.cadence import RoundCadence
from lakegate_core.types import TopicPartition

TP = TopicPartition("orders", 0)


def test_a_committing_round_names_the_next_due_time_and_keeps_the_log_ends_read_for_it() -> None:
    c = RoundCadence(10, now=0)
    assert c.due_at() == 10 and c.due_ms(now=11, wait=3) == 10_000
    c.note_log_end(TP, 50, read_at=10.5)
    c.began(10.5)  # the round due at 10, planned at 10.5, commits for most of its interval
    assert c.due_ms(now=16, wait=3) == 20_500, "the round after it, not the committing one (past)"
    c.note_log_end(TP, 70, read_at=18)  # before the next due time: no round's
    c.note_log_end(TP, 80, read_at=20.6)
    c.note_log_end(TP, 90, read_at=20.8)  # the first read at or after the due time counts
    assert c.catch_up == {TP: 50}, "while it commits, the round's own catch-up stays as it was"
    c.committed(10.5)
    assert c.catch_up == {TP: 80} and c.due_at() == 20.5
    assert c.caught_up([TP], lambda tp: 80) and not c.caught_up([TP], lambda tp: 79)


def test_a_round_that_fails_leaves_the_due_time_and_catch_up_it_had() -> None:
    c = RoundCadence(10, now=0)
    c.note_log_end(TP, 50, read_at=10.5)
    c.began(10.5)
    c.note_log_end(TP, 80, read_at=21)
    c.ended()
    assert c.due_at() == 10 and c.catch_up == {TP: 50}
    assert c.due_ms(now=13.5, wait=3) is None, "past its catch-up: no sidecar need follow it"
    assert c.due_ms(now=12, wait=0) is None, "a table that does not catch up names no due time"
    c.committed(14)
    assert c.catch_up == {}, "log ends read while no round committed were this one's"
