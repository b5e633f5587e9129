"""A recreated topic's new ledger epoch through a TableCoordinator over a fake committer: the
table takes the new topic's offsets from 0 again, keyed apart from the old ones, and a restart
reads the epoch back from the offsets alone."""

from __future__ import annotations

from commit_service.config import TableConfig
from commit_service.coordination.table_coordinator import TableCoordinator
from commit_service.domain.plan import CommitPolicy, PendingFile
from lakegate_core.protocol import DataFile, FileFormat, FileStatus, Watermark
from lakegate_core.types import TopicPartition as TP
from tests.unit.fakes import Clock, FakeCommitter

CONFIG = TableConfig("orders", "s3a://lake/orders", ("orders",), commit=CommitPolicy(interval_seconds=1))


def pf(partition: int, start: int, end: int, manifest: str = "m") -> PendingFile:
    path = f"s3a://landing/orders-{partition}-{start:020d}.parquet"
    return PendingFile(DataFile(path, "orders", partition, start, end, 100, FileFormat.PARQUET), manifest, "sc")


def loaded(committer: FakeCommitter, clock: Clock) -> TableCoordinator:
    tc = TableCoordinator(CONFIG, committer, clock)
    tc.load()
    return tc


def test_a_new_epoch_takes_the_recreated_topics_offsets_again_and_keeps_the_old_ledger() -> None:
    clock, committer = Clock(), FakeCommitter()
    tc = loaded(committer, clock)
    tc.offer([pf(0, 0, 99), pf(0, 100, 199), pf(1, 0, 49)], "old")
    assert tc.maybe_commit(force=True) is not None
    # the topic is made again; before the epoch, its first file is taken for a committed one
    assert tc.offer([pf(0, 0, 9, "new")], "new") == [(FileStatus.ALREADY_COMMITTED, None)]
    tc.offer([pf(0, 200, 299, "stale")], "stale")  # buffered under the old epoch: dropped by it
    record = tc.open_epoch("orders", {0: 0, 1: 0})
    assert dict(record.offsets) == {TP("orders~2", 0): 0, TP("orders~2", 1): 0}
    assert record.begin_reasons == {"orders~2-0": "epoch", "orders~2-1": "epoch"}
    assert tc.manifest("stale")[0].value == "rejected"
    summary = tc.summary()
    assert dict(summary.offsets) == {TP("orders", 0): 0, TP("orders", 1): 0}
    assert summary.epochs == {"orders": 2} and summary.pending_files == 0
    assert tc.held(TP("orders", 0)) == (0, ())

    assert tc.offer([pf(0, 0, 9, "new")], "new") == [(FileStatus.ACCEPTED, None)]
    tc.claim({TP("orders", 0)}, [Watermark("orders", 0, 10, 1000)])
    committed = tc.maybe_commit(force=True)
    assert committed is not None and dict(committed.offsets) == {TP("orders~2", 0): 10}
    assert committer.commits[-1].files[0].file.topic == "orders~2"  # rewritten files land apart too
    assert dict(committer.offsets) == {
        TP("orders", 0): 200,
        TP("orders", 1): 50,
        TP("orders~2", 0): 10,
        TP("orders~2", 1): 0,
    }
    assert dict(tc.offsets()) == {TP("orders", 0): 10, TP("orders", 1): 0}

    again = loaded(committer, clock)  # a restart reads the epoch back from the offsets
    assert again.summary().epochs == {"orders": 2}
    assert dict(again.offsets()) == {TP("orders", 0): 10, TP("orders", 1): 0}
    assert again.offer([pf(0, 0, 9, "new")], "r") == [(FileStatus.ALREADY_COMMITTED, None)]
    assert again.offer([pf(0, 10, 19, "next")], "next") == [(FileStatus.ACCEPTED, None)]


def test_a_third_epoch_follows_the_second() -> None:
    clock, committer = Clock(), FakeCommitter()
    tc = loaded(committer, clock)
    tc.offer([pf(0, 0, 9)], "a")
    tc.maybe_commit(force=True)
    tc.open_epoch("orders", {0: 0})
    record = tc.open_epoch("orders", {0: 3})
    assert dict(record.offsets) == {TP("orders~3", 0): 3}
    assert tc.summary().epochs == {"orders": 3} and dict(tc.offsets()) == {TP("orders", 0): 3}
