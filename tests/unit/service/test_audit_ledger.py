"""The audit's pure parts: the ledger read from a history, the rows' runs, the files' spans, a
record compared with its row, and the seeded sample."""

from __future__ import annotations

from commit_service.audit import ledger, sample, values
from commit_service.domain.history import FileSpan, LedgerCommit, OffsetRun, TableHistory
from lakegate_core.audit import FindingKind, Severity
from lakegate_core.status import CommitRecord
from lakegate_core.types import PartitionOffsets, TopicPartition

A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)


def ours(version: int, starts: dict[TopicPartition, int], ends: dict[TopicPartition, int], rows: int) -> LedgerCommit:
    record = CommitRecord("t", version, f"c{version}", 1, rows, PartitionOffsets(ends), starts=PartitionOffsets(starts))
    return LedgerCommit(version, PartitionOffsets(ends), record, rows, (f"f{version}.parquet",))


def kinds(findings: list) -> list[FindingKind]:  # type: ignore[type-arg]
    return [f.kind for f in findings]


def test_contiguous_commits_claim_each_partitions_ranges_without_findings() -> None:
    history = TableHistory(2, (ours(1, {A0: 0, A1: 0}, {A0: 5, A1: 3}, 8), ours(2, {A0: 5}, {A0: 9}, 4)))
    book = ledger.read_history(history)
    assert not book.findings
    assert book.committed == {A0: [(0, 9)], A1: [(0, 3)]}
    assert book.offsets() == 12 and book.commits == 2


def test_a_skipped_start_a_repeated_start_and_a_step_back_are_breaches() -> None:
    history = TableHistory(
        4,
        (
            ours(1, {A0: 0}, {A0: 5}, 5),
            ours(2, {A0: 7}, {A0: 9}, 2),  # 5..6 never committed
            ours(3, {A0: 8}, {A0: 12}, 4),  # 8 committed twice
            ours(4, {A0: 12}, {A0: 10}, 0),  # back from 12 to 10
        ),
    )
    found = ledger.read_history(history).findings
    assert kinds(list(found)) == [FindingKind.RANGE_SKIPPED, FindingKind.RANGE_TWICE, FindingKind.OFFSETS_BACKWARDS]
    assert [f.offsets for f in found] == [(5, 7), (8, 9), (10, 12)]
    assert {f.severity for f in found} == {Severity.BREACH}


def test_foreign_rows_and_more_rows_than_offsets_are_breaches_a_compaction_is_not() -> None:
    history = TableHistory(
        3,
        (
            ours(1, {A0: 0}, {A0: 5}, 6),  # six rows for five offsets
            LedgerCommit(2, None, None, 3, ("copy.parquet",), operation="WRITE"),
            LedgerCommit(3, None, None, 6, ("compacted.parquet",), rewrite=True, operation="OPTIMIZE"),
        ),
    )
    assert kinds(list(ledger.read_history(history).findings)) == [FindingKind.ROW_COUNT, FindingKind.FOREIGN_ROWS]


def test_runs_above_the_ledger_are_breaches_below_are_gaps_or_released() -> None:
    book = ledger.read_history(TableHistory(1, (ours(1, {A0: 0}, {A0: 10}, 10),)))
    runs = [OffsetRun(2, 4, 1, 2), OffsetRun(6, 7, 1, 0)]
    found = ledger.check_runs(book, runs)
    assert [(f.kind, f.severity) for f in found] == [
        (FindingKind.OFFSETS_HELD_TWICE, Severity.BREACH),
        (FindingKind.GAP, Severity.GAP),
    ]
    assert kinds(ledger.check_runs(book, runs, upsert=True)) == [FindingKind.OFFSETS_HELD_TWICE]


def test_a_file_outside_its_commits_range_is_a_breach_its_sink_name_narrows_the_range() -> None:
    history = TableHistory(
        1, (LedgerCommit(1, PartitionOffsets({A0: 10, A1: 10}), None, 20, ("a-0-0.parquet", "x.parquet")),)
    )
    book = ledger.read_history(history)
    spans = [FileSpan("s3://b/t/a-0-0.parquet", 10, 0, 9), FileSpan("x.parquet", 12, 0, 11)]
    found = ledger.check_files(book, history, spans)
    assert [(f.kind, f.offsets) for f in found] == [(FindingKind.FILE_OUTSIDE_RANGE, (0, 12))]
    assert ledger.sink_partition("s3://b/p/orders-3-120.jsonl.gz") == ("orders", 3, 120)


def test_a_record_equals_its_row_whatever_nulls_and_number_kinds_the_table_adds() -> None:
    record = values.KafkaRecord(4, b"k4", b'{"id": 4, "amount": 2, "geo": {"lat": 1.5}, "note": null}', 1700000000000)
    columns = ["id", "amount", "geo", "note", "other", "_kafka_key", "_kafka_offset", "_kafka_timestamp"]
    row = {
        "id": 4,
        "amount": 2.0,
        "geo": {"lat": 1.5, "lon": None},
        "note": None,
        "other": None,
        "_kafka_key": "k4",
        "_kafka_offset": 4,
        "_kafka_timestamp": 1700000000000,
    }
    want = values.expected_row(record, columns)
    assert values.differences(want, row) == {}
    changed = {**row, "geo": {"lat": 2.5}, "_kafka_key": "k5"}
    assert sorted(values.differences(want, changed)) == ["_kafka_key", "geo"]
    assert values.best_match(want, [changed, row]) == (1, {})
    assert values.decoded_value(b'{"schema": {}, "payload": {"x": 1}}') == {"x": 1}


def test_the_sample_is_seeded_uniform_inside_what_kafka_keeps_and_whole_when_small() -> None:
    committed = {A0: [(0, 1000)], A1: [(0, 10)]}
    reach = sample.reachable(committed, {A0: 900, A1: 20})
    assert reach == {A0: [(900, 1000)]}
    one, two = sample.choose(reach, 10, 3), sample.choose(reach, 10, 3)
    assert one == two and len(one[A0]) == 10 and all(900 <= o < 1000 for o in one[A0])
    assert sample.choose(reach, 10, 4) != one
    assert sample.choose({A1: [(0, 4)]}, 10, 0) == {A1: [0, 1, 2, 3]}
