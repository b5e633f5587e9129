"""Leases expire when their holder stops claiming them: a deleted connector or a stopped sidecar
stops holding interval commits back (leases.ttl_seconds)."""

from __future__ import annotations

from commit_service.config import ServiceConfig
from commit_service.coordination.coordinator import Coordinator
from commit_service.domain.leases import LeaseTable
from commit_service.domain.plan import CommitPlan, CommitRecord
from lakegate_core.configfile import build
from lakegate_core.protocol import DataFile, FileFormat, LeaseRequest, Manifest, OffsetSpan, SidecarInfo, Watermark
from lakegate_core.types import TopicPartition
from tests.unit.fakes import Clock, PoisonCommitter

TP0, TP1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


def test_a_renewed_lease_keeps_its_epoch_and_an_expired_one_is_not_live() -> None:
    table = LeaseTable()
    first = table.grant(TP0, "sc-1", "w:1", "snk", now=0)
    assert table.grant(TP0, "sc-1", "w:1", "snk", now=50).epoch == first.epoch
    assert table.live(100, ttl=60) == {TP0}
    assert table.live(111, ttl=60) == set()
    assert table.grant(TP0, "sc-2", "w:2", "snk", now=120).epoch == first.epoch + 1  # epochs survive expiry


def test_an_unrenewed_lease_stops_holding_interval_commits() -> None:
    clock = Clock(1000.0)
    config = build(
        ServiceConfig,
        {
            "auth": {"enabled": False},
            "storage": {"allowed_roots": ["s3a://landing/"]},
            "leases": {"ttl_seconds": 60},
            "tables": [
                {
                    "name": "orders",
                    "path": "s3a://lake/orders",
                    "topics": ["orders"],
                    "placement": "copy_into_table",
                    "commit": {"interval_seconds": 1, "on_timeout": "wait"},
                }
            ],
        },
    )
    committer = PoisonCommitter()
    coordinator = Coordinator(config, lambda t: committer, clock=clock)
    coordinator.load()
    coordinator.claim(LeaseRequest(SidecarInfo("sc-1", "w:1"), "snk", (0,), (TP0, TP1)))
    f = DataFile("s3a://landing/orders-0-0", "orders", 0, 0, 9, 100, FileFormat.PARQUET)
    past_gap = DataFile("s3a://landing/orders-1-20", "orders", 1, 20, 29, 100, FileFormat.PARQUET)
    coordinator.submit(Manifest("m1", SidecarInfo("sc-1", "w:1"), (f, past_gap)))
    again = coordinator.claim(LeaseRequest(SidecarInfo("sc-1", "w:1"), "snk", (0,), (TP0, TP1)))
    assert [(g.tp, g.held_next, g.held_after) for g in again] == [
        (TP0, 10, None),
        (TP1, 0, (OffsetSpan(20, 29),)),
    ], "what the table holds, per partition: from its offset, and past a gap"
    for _ in range(5):  # both partitions leased, neither reported: the round waits (on_timeout: wait)
        clock.now += 10
        coordinator.tick()
    assert committer.version == -1
    clock.now += 20  # 70 s since the last claim: the leases expired, nothing holds the round back
    coordinator.tick()
    assert committer.version == 0 and committer.committed == {TP0: 10}


def test_each_table_waits_for_its_own_partitions_only() -> None:
    """A claim and the loop route leased partitions to their tables in one pass: each table's round
    waits for (and is completed by the watermarks of) the partitions of its own topics."""
    clock = Clock(1000.0)
    tables = [
        {
            "name": name,
            "path": f"s3a://lake/{name}",
            "topics": [name],
            "placement": "copy_into_table",
            "commit": {"interval_seconds": 1, "on_timeout": "wait"},
        }
        for name in ("orders", "payments")
    ]
    config = build(
        ServiceConfig, {"auth": {"enabled": False}, "storage": {"allowed_roots": ["s3a://landing/"]}, "tables": tables}
    )
    committers = {"orders": PoisonCommitter(), "payments": PoisonCommitter()}
    coordinator = Coordinator(config, lambda t: committers[t.name], clock=clock)
    coordinator.load()
    pay = TopicPartition("payments", 0)
    sidecar = SidecarInfo("sc-1", "w:1")
    coordinator.claim(LeaseRequest(sidecar, "snk", (0,), (TP0, pay)))
    for tp in (TP0, pay):
        f = DataFile(f"s3a://landing/{tp.topic}-0-0", tp.topic, 0, 0, 9, 100, FileFormat.PARQUET)
        coordinator.submit(Manifest(f"m-{tp.topic}", sidecar, (f,)))
    assert coordinator.tables["orders"]._state.expected == {TP0}
    assert coordinator.tables["payments"]._state.expected == {pay}
    clock.now += 2
    coordinator.tick()  # nobody reported since the round began: both wait (on_timeout: wait)
    assert committers["orders"].version == committers["payments"].version == -1
    marks = (Watermark("orders", 0, 10, int(clock.now * 1000)),)  # only orders reports
    coordinator.claim(LeaseRequest(sidecar, "snk", (0,), (TP0, pay), marks))
    clock.now += 2
    coordinator.tick()
    assert committers["orders"].version == 0 and committers["payments"].version == -1


def test_a_table_that_catches_up_says_when_its_round_is_due_and_waits_for_the_log_end() -> None:
    """The lease answer carries the table's due time; a log end read after it holds the due round
    back until the table holds every record below it (or catch_up_seconds pass)."""
    clock = Clock(1000.0)
    tables = [
        {
            "name": name,
            "path": f"s3a://lake/{name}",
            "topics": [name],
            "placement": "copy_into_table",
            "commit": {"interval_seconds": 10, "catch_up_seconds": catch_up},
        }
        for name, catch_up in (("orders", 3), ("payments", 0))
    ]
    config = build(
        ServiceConfig, {"auth": {"enabled": False}, "storage": {"allowed_roots": ["s3a://landing/"]}, "tables": tables}
    )
    committer = PoisonCommitter()
    coordinator = Coordinator(config, lambda t: committer if t.name == "orders" else PoisonCommitter(), clock=clock)
    coordinator.load()
    sidecar = SidecarInfo("sc-1", "w:1")
    pay = TopicPartition("payments", 0)
    grants = coordinator.claim(LeaseRequest(sidecar, "snk", (0,), (TP0, pay)))
    assert [(g.tp, g.due_ms) for g in grants] == [(TP0, 1_010_000), (pay, None)], "only a table that catches up"

    def send(start: int, end: int) -> None:
        f = DataFile(f"s3a://landing/orders-0-{start}", "orders", 0, start, end, 100, FileFormat.PARQUET)
        coordinator.submit(Manifest(f"m{start}", sidecar, (f,)))

    send(0, 9)
    clock.now = 1010.2  # due; the sidecar read the log end (20) in a round answered at 1010.1
    coordinator.claim(LeaseRequest(sidecar, "snk", (0,), (TP0,), (Watermark("orders", 0, 10, 1_010_100, 20),)))
    coordinator.tick()
    assert committer.version == -1, "10..19 was in Kafka when the round came due"
    send(10, 19)  # Connect's next flush
    clock.now = 1011.0
    coordinator.tick()
    assert committer.version == 0 and committer.committed == {TP0: 20}
    [record] = coordinator.commits("orders", 10)
    assert (record.due_ms, record.caught_up) == (1_010_000, {TP0: 20})
    [again] = coordinator.claim(LeaseRequest(sidecar, "snk", (0,), (TP0,)))
    assert again.due_ms == 1_020_000, "the next round is due an interval after this one was"
    clock.now = 1023.0  # nothing came: the round, due at 1020, can no longer wait to catch up
    [idle] = coordinator.claim(LeaseRequest(sidecar, "snk", (0,), (TP0,)))
    assert idle.due_ms is None, "no sidecar follows a round that no longer waits"


def test_while_a_round_commits_the_lease_answer_names_the_next_rounds_due_time() -> None:
    """A round that commits for most of its interval: a sidecar claiming meanwhile learns when the
    next round is due (not the committing round's due time, long past), so it reads its log ends
    then; what it read at or after that time is what the next round catches up with, and a round
    that fails leaves the due time it was planned at."""
    clock = Clock(1000.0)
    table = {
        "name": "orders",
        "path": "s3a://lake/orders",
        "topics": ["orders"],
        "placement": "copy_into_table",
        "commit": {"interval_seconds": 10, "catch_up_seconds": 3},
    }
    config = build(
        ServiceConfig, {"auth": {"enabled": False}, "storage": {"allowed_roots": ["s3a://landing/"]}, "tables": [table]}
    )
    sidecar = SidecarInfo("sc-1", "w:1")
    seen: list[int | None] = []

    class Slow(PoisonCommitter):
        def commit(self, plan: CommitPlan) -> CommitRecord:  # eight seconds of a ten-second interval
            clock.now += 8
            [grant] = coordinator.claim(LeaseRequest(sidecar, "snk", (0,), (TP0,)))
            seen.append(grant.due_ms)
            if len(seen) == 1:  # the sidecar's round at the next due time, before this commit ends
                clock.now = 1020.1
                mark = Watermark("orders", 0, 20, 1_020_100, 30)
                coordinator.claim(LeaseRequest(sidecar, "snk", (0,), (TP0,), (mark,)))
            return super().commit(plan)

    committer = Slow()
    coordinator = Coordinator(config, lambda t: committer, clock=clock)
    coordinator.load()
    coordinator.claim(LeaseRequest(sidecar, "snk", (0,), (TP0,)))

    def send(start: int, end: int) -> None:
        f = DataFile(f"s3a://landing/orders-0-{start}", "orders", 0, start, end, 100, FileFormat.PARQUET)
        coordinator.submit(Manifest(f"m{start}", sidecar, (f,)))

    send(0, 9)
    clock.now = 1010.0
    mark = Watermark("orders", 0, 10, 1_010_000, 10)
    coordinator.claim(LeaseRequest(sidecar, "snk", (0,), (TP0,), (mark,)))
    coordinator.tick()  # the round due at 1010, caught up: it commits until 1020.1
    assert committer.version == 0 and seen == [1_020_000], "the next round's due time, while this one commits"
    send(10, 19)
    clock.now = 1020.2
    coordinator.claim(LeaseRequest(sidecar, "snk", (0,), (TP0,), (Watermark("orders", 0, 20, 1_020_200),)))
    coordinator.tick()
    assert committer.version == 0, "20..29 was in Kafka when the next round came due: it waits for them"
    send(20, 29)
    committer.poison = {"s3a://landing/orders-0-20"}
    coordinator.tick()
    assert committer.version == 0 and seen[1:] == [1_030_000], "the failed round named its next due time"
    [grant] = coordinator.claim(LeaseRequest(sidecar, "snk", (0,), (TP0,)))
    assert grant.due_ms is None, "the failed round is still the one due (1020, past its catch-up), not the next (1030)"
