"""``tables[].start.timestamp`` through a TableCoordinator: Kafka is asked where the time falls
once per waiting partition (again after a failure), and the ledger begins at the first file at
or after that offset."""

from __future__ import annotations

from collections.abc import Iterable

from commit_service.config import TableConfig
from commit_service.coordination.table_coordinator import TableCoordinator
from commit_service.domain.plan import CommitPolicy, PendingFile
from commit_service.domain.start import TableStart
from lakegate_core.connect_group import GroupReadError
from lakegate_core.protocol import DataFile, FileFormat, Watermark
from lakegate_core.types import PartitionOffsets
from lakegate_core.types import TopicPartition as TP
from tests.unit.fakes import Clock, FakeCommitter


def pf(partition: int, start: int, end: int) -> PendingFile:
    path = f"s3a://landing/orders-{partition}-{start:020d}.parquet"
    return PendingFile(DataFile(path, "orders", partition, start, end, 100, FileFormat.PARQUET), "m", "sc")


class Times:
    """Kafka's ListOffsets by time: fails while ``down``; records what it was asked."""

    def __init__(self, answers: dict[TP, int]) -> None:
        self.answers, self.asked, self.down = answers, [], True

    def __call__(self, partitions: Iterable[TP], at_ms: int) -> PartitionOffsets:
        wanted = sorted(partitions)
        self.asked.append((wanted, at_ms))
        if self.down:
            raise GroupReadError("Kafka offsets by time: broker unreachable")
        return PartitionOffsets({tp: self.answers[tp] for tp in wanted})


def test_the_ledger_begins_where_kafka_says_the_time_falls() -> None:
    start = TableStart(timestamp="2026-11-01T00:00:00Z")
    config = TableConfig(
        "orders", "s3a://lake/orders", ("orders",), commit=CommitPolicy(interval_seconds=1), start=start
    )
    clock, committer, times = Clock(), FakeCommitter(), Times({TP("orders", 0): 250, TP("orders", 1): 0})
    tc = TableCoordinator(config, committer, clock, time_offsets=times)
    tc.load()
    tc.offer([pf(0, 0, 99), pf(0, 100, 199), pf(0, 200, 299), pf(0, 300, 399), pf(1, 0, 49)], "m")
    marks = [Watermark("orders", 0, 400, 1000, first_file=0), Watermark("orders", 1, 50, 1000, first_file=0)]
    tc.claim({TP("orders", 0), TP("orders", 1)}, marks)
    assert times.asked == [([TP("orders", 0), TP("orders", 1)], start.at_ms)]
    assert tc.maybe_commit(force=True) is None, "nothing begins before Kafka said where the time falls"
    times.down = False
    tc.claim({TP("orders", 0), TP("orders", 1)}, marks)
    record = tc.maybe_commit(force=True)
    assert record is not None and dict(record.offsets) == {TP("orders", 0): 400, TP("orders", 1): 50}
    assert dict(record.begins or {}) == {TP("orders", 0): 300, TP("orders", 1): 0}
    assert record.begin_reasons == {"orders-0": "timestamp", "orders-1": "first_file"}  # at 0: all of it
    tc.claim({TP("orders", 0), TP("orders", 1)}, marks)
    assert len(times.asked) == 2, "each partition is asked for until answered, then never again"
