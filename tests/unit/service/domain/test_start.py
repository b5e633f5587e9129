"""Where a partition's ledger begins (``tables[].start``) and rounds bounded by max_files / max_bytes:
the decisions TableState makes, exhaustively and as properties (no I/O, no JVM)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commit_service.domain.plan import CommitPolicy, PendingFile, bound_run
from commit_service.domain.start import StartReason, TableStart
from commit_service.domain.state import TableState
from lakegate_core.errors import ConfigError
from lakegate_core.protocol import FileStatus
from lakegate_core.types import TopicPartition
from tests.unit.fakes import pf

TP0, TP1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


def files(state: TableState, starts: list[int], size: int = 100, partition: int = 0) -> None:
    for start in starts:
        status, _ = state.offer(pf(start, start + size - 1, partition=partition), 0)
        assert status is FileStatus.ACCEPTED


def test_a_partition_whose_first_file_starts_above_zero_commits_from_that_file() -> None:
    s = TableState("t", policy=CommitPolicy(interval_seconds=10, timeout_seconds=0))
    files(s, [500, 600, 700])
    assert s.plan(now=100) is None, "before a watermark vouches for the files, the start is not known"
    assert s.note_watermark(TP0, 800, 50) is False, "a watermark without the first file decides nothing"
    assert s.note_watermark(TP0, 800, 50, first_file=500) is True  # the listing's first file: 500
    assert s.starts[TP0].offset == 500 and s.starts[TP0].reason is StartReason.FIRST_FILE
    plan = s.plan(now=100)
    assert plan is not None and [p.file.start_offset for p in plan.files] == [500, 600, 700]
    assert plan.begins == ((TP0, 500, "first_file"),)
    assert plan.starts() == {TP0: 500}
    record = plan.record("t", 0, "c", 0)
    assert record.begins == {TP0: 500} and record.begin_reasons == {"orders-0": "first_file"}
    s.committed_plan(plan, 0, 100)
    assert s.committed == {TP0: 800}
    files(s, [800])
    later = s.plan(now=200)
    assert later is not None and later.begins == ()  # only the first commit of a partition begins it


def test_the_start_is_the_listings_not_the_buffers() -> None:
    """After a restart the buffer may lack files a sidecar sent recently (it resends them later),
    and a quarantined first file leaves the buffer: the start is where the bucket's first file
    begins, so the partition waits at that gap instead of starting past it."""
    s = TableState("t", policy=CommitPolicy(interval_seconds=10, timeout_seconds=0))
    files(s, [600, 700])  # 500..599 not (yet) buffered
    s.note_watermark(TP0, 800, 50, first_file=500)
    assert s.starts[TP0].offset == 500 and s.plan(now=100) is None
    files(s, [500])
    plan = s.plan(now=200)
    assert plan is not None and plan.offsets == {TP0: 800}


def test_a_gap_inside_the_files_still_waits() -> None:
    s = TableState("t", policy=CommitPolicy(interval_seconds=10, timeout_seconds=0))
    files(s, [500, 700])  # 600..699 lost after the start
    s.note_watermark(TP0, 800, 50, first_file=500)
    plan = s.plan(now=100)
    assert plan is not None and [p.file.start_offset for p in plan.files] == [500]
    s.committed_plan(plan, 0, 100)
    assert s.plan(now=1000) is None, "700.. waits for the missing 600..699"
    assert s.buffered_through(TP0) == 600


def test_no_file_below_connects_offset_starts_there() -> None:
    s = TableState("t", policy=CommitPolicy(interval_seconds=10, timeout_seconds=0))
    assert s.note_watermark(TP0, 1000, 50, first_file=1000), "a connector started at latest: nothing to wait for"
    assert s.starts[TP0].offset == 1000 and s.starts[TP0].reason is StartReason.CONNECT
    assert s.offer(pf(0, 99), 60)[0] is FileStatus.ALREADY_COMMITTED  # before the table
    files(s, [1000])
    plan = s.plan(now=100)
    assert plan is not None and plan.begins == ((TP0, 1000, "connect_offset"),)


def test_a_topic_from_offset_zero_is_undecided_until_a_file_says_so() -> None:
    s = TableState("t")
    assert s.note_watermark(TP0, 0, 50) is True
    assert TP0 not in s.starts and s.next_offset(TP0) == 0
    files(s, [0])  # earliest: a file at 0 commits without a watermark (nothing can be earlier)
    plan = s.plan(now=100)
    assert plan is not None and plan.begins == ((TP0, 0, "first_file"),)


def test_a_configured_start_begins_at_the_first_file_at_or_after_it() -> None:
    start = TableStart(offsets={"orders-0": "550"})  # type: ignore[dict-item]  # as the config loader gives it
    s = TableState("t", policy=CommitPolicy(interval_seconds=10, timeout_seconds=0), start=start)
    status, reason = s.offer(pf(400, 499), 0)
    assert status is FileStatus.ALREADY_COMMITTED and "start offset 550" in (reason or "")
    files(s, [500, 600])  # 500..599 straddles 550
    assert s.plan(now=100) is None, "undecided with a configured start: wait for the watermark"
    s.note_watermark(TP0, 700, 50, first_file=400)
    assert s.starts[TP0].offset == 600 and s.starts[TP0].reason is StartReason.CONFIGURED
    assert s.find("s3a://landing/orders-0-500") is None, "the straddling file is before the table"
    other = TableState("t", start=start)
    files(other, [600])
    other.note_watermark(TP0, 700, 50, first_file=400)
    assert other.undecided(TP0), "the file holding offset 550 is not buffered: no boundary known yet"
    exact = TableState("t", start=start)
    files(exact, [550])
    exact.note_watermark(TP0, 700, 50, first_file=400)
    assert exact.starts[TP0].offset == 550
    plan = s.plan(now=100)
    assert plan is not None and [p.file.start_offset for p in plan.files] == [600]
    assert plan.begins == ((TP0, 600, "configured"),)
    assert s.start.floor(TP1) == 0  # partitions it does not name start at earliest


@pytest.mark.parametrize(
    ("offsets", "message"),
    [({"orders": 5}, "not <topic>-<partition>"), ({"orders-0": "x"}, "not an offset"), ({"orders-0": -1}, ">= 0")],
)
def test_a_bad_configured_start_is_refused(offsets: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TableStart(offsets=offsets)  # type: ignore[arg-type]


def test_start_in_the_config_file() -> None:
    from commit_service.config import TableConfig
    from lakegate_core import configfile

    table = {"name": "t", "path": "/tmp/t", "topics": ["orders"]}
    assert configfile.build(TableConfig, {**table, "start": "earliest"}).start == TableStart()
    built = configfile.build(TableConfig, {**table, "start": {"offsets": {"orders-1": 7}}})
    assert built.start.floor(TP1) == 7
    with pytest.raises(ConfigError, match="tables.start: must be earliest"):
        configfile.build(TableConfig, {**table, "start": "latest"}, "tables")


def test_a_start_by_timestamp_waits_for_kafkas_offset_then_begins_as_a_configured_one() -> None:
    start = TableStart(offsets={"orders-1": 0}, timestamp="2026-11-01T00:00:00+01:00")  # type: ignore[dict-item]
    assert start.at_ms == 1_793_487_600_000 and start.by_time(TP0) and not start.by_time(TP1)
    s = TableState("t", policy=CommitPolicy(interval_seconds=10, timeout_seconds=0), start=start)
    files(s, [400, 500, 600])
    s.note_watermark(TP0, 700, 50, first_file=400)
    assert s.undecided(TP0) and s.needs_time_floor(TP0), "Kafka has not said where the time falls"
    assert s.plan(now=100) is None
    s.set_time_floor(TP0, 550)  # the first record at or after the time is at 550
    assert s.find("s3a://landing/orders-0-400") is None, "a file ending before it is before the table"
    assert not s.needs_time_floor(TP0) and s.undecided(TP0)
    status, reason = s.offer(pf(300, 399), 0)
    assert status is FileStatus.ALREADY_COMMITTED and "start offset 550" in (reason or "")
    s.note_watermark(TP0, 700, 60, first_file=400)
    assert s.starts[TP0].offset == 600 and s.starts[TP0].reason is StartReason.TIMESTAMP
    assert "first record at or after the configured start timestamp" in s.starts[TP0].describe()
    plan = s.plan(now=100)
    assert plan is not None and [p.file.start_offset for p in plan.files] == [600]
    assert plan.begins == ((TP0, 600, "timestamp"),)
    s.set_time_floor(TP0, 0)  # asked once: a later answer changes nothing
    assert s.floor(TP0) == 550


def test_a_start_timestamp_needs_a_zone_and_a_kafka_section() -> None:
    from commit_service.config import ServiceConfig
    from lakegate_core import configfile

    with pytest.raises(ValueError, match="needs a zone"):
        TableStart(timestamp="2026-11-01T00:00:00")
    with pytest.raises(ValueError, match="not an ISO 8601 time"):
        TableStart(timestamp="yesterday")
    assert TableStart.from_text("2026-11-01T00:00:00Z").at_ms == 1_793_491_200_000
    table = {"name": "t", "path": "/tmp/t", "topics": ["orders"], "start": "2026-11-01T00:00:00Z"}
    raw = {"tables": [table], "storage": {"allowed_roots": ["file:///tmp/"]}, "auth": {"enabled": False}}
    with pytest.raises(ConfigError, match="start.timestamp: finding where a time falls in each partition asks Kafka"):
        configfile.build(ServiceConfig, raw)
    built = configfile.build(ServiceConfig, {**raw, "kafka": {"bootstrap_servers": "k:9092"}})
    assert built.tables[0].start.timestamp == "2026-11-01T00:00:00Z"
    with pytest.raises(ConfigError, match="unknown key"):
        configfile.build(ServiceConfig, {**raw, "tables": [{**table, "start": {"at_ms": 5}}]})


def test_an_archive_commits_in_bounded_rounds_without_starving_a_live_partition() -> None:
    policy = CommitPolicy(interval_seconds=10, max_files=1000, timeout_seconds=0)
    s = TableState("t", policy=policy)
    files(s, [i * 10 for i in range(2500)], size=10)  # the archive of partition 0
    files(s, [0, 100, 200], partition=1)  # a live partition
    for tp, end in ((TP0, 25_000), (TP1, 300)):
        s.note_watermark(tp, end, 1, first_file=0)
    rounds = []
    while (plan := s.plan(now=100.0 * (len(rounds) + 1))) is not None and len(rounds) < 10:
        rounds.append(plan)
        s.committed_plan(plan, len(rounds) - 1, 100.0 * len(rounds))
    assert [len(p.files) for p in rounds] == [1000, 1000, 503]
    assert [p.reason for p in rounds] == ["max_files", "max_files", "interval"]
    assert rounds[0].offsets[TP1] == 300, "the live partition goes in the first round"
    assert [p.left for p in rounds] == [1503, 503, 0]
    assert rounds[0].vtts is None, "a bounded round is not all that reported"
    assert s.committed == {TP0: 25_000, TP1: 300}


def test_max_bytes_bounds_a_round_but_a_big_file_still_commits_alone() -> None:
    s = TableState("t", policy=CommitPolicy(max_bytes=250, max_files=100))
    s.offer(pf(0, 0, size=1000), 0)
    s.offer(pf(1, 1, size=100), 0)
    plan = s.plan(now=1)
    assert plan is not None and [p.file.start_offset for p in plan.files] == [0] and plan.left == 1


@settings(max_examples=300, deadline=None)
@given(
    runs=st.lists(st.lists(st.integers(1, 50), min_size=1, max_size=30), min_size=1, max_size=6),
    max_files=st.integers(1, 40),
    max_bytes=st.integers(1, 400),
)
def test_bounded_runs_are_prefixes_within_bounds(runs: list[list[int]], max_files: int, max_bytes: int) -> None:
    run = []
    for partition, sizes in enumerate(runs):
        offset = 0
        for size in sizes:
            run.append(pf(offset, offset + 9, partition=partition, size=size))
            offset += 10
    taken = bound_run(run, max_files, max_bytes)
    assert 1 <= len(taken) <= max_files
    assert len(taken) == 1 or sum(p.file.size_bytes for p in taken) <= max_bytes
    for partition in range(len(runs)):
        mine = [p for p in run if p.file.partition == partition]
        kept = [p for p in taken if p.file.partition == partition]
        assert kept == mine[: len(kept)], "per partition, a prefix of its run (contiguous from the committed offset)"
    counts = [len([p for p in taken if p.file.partition == i]) for i in range(len(runs))]
    for i, n in enumerate(counts):  # one file of each partition at a time: no partition waits behind another
        for j, m in enumerate(counts):
            assert n >= m - 1 or n == len(runs[i]), f"partition {i} took {n}, partition {j} took {m}"
    assert [p.file.partition for p in taken] == sorted(p.file.partition for p in taken)


def test_a_round_reads_no_more_of_a_backfills_buffer_than_it_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    """100 partitions of 500 buffered files each (a backfill's buffer): a round of at most 1,000
    files rebuilds those 1,000 and walks little more. Rebuilding every buffered file each round
    took seconds of every round at 100,000 files (the adopt benchmark)."""
    s = TableState("t", policy=CommitPolicy(interval_seconds=10, max_files=1_000))
    for p in range(100):
        files(s, [i * 10 for i in range(500)], size=10, partition=p)
        s.note_watermark(TopicPartition("orders", p), 5_000, 1, first_file=0)
    built = []
    real = PendingFile.from_row.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(PendingFile, "from_row", classmethod(lambda cls, row: built.append(row) or real(cls, row)))
    plan = s.plan(now=1.0)
    assert plan is not None and plan.reason == "max_files" and len(plan.files) == 1_000
    assert len(built) == 1_000, "only the files the round takes are rebuilt"
    assert plan.left == 49_000 and plan.vtts is None
    assert all(plan.offsets[TopicPartition("orders", p)] == 100 for p in range(100)), "ten files of each partition"
