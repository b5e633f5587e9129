"""The orphan guard (``commit_service.domain.coverage``), alone and as the sidecar and service play it.

A sink task that uploads files and dies before Connect commits its offset writes the range again
with other boundaries; the old object named inside the new one's range is an orphan. The property
test builds such landing areas at random (the final chain of files plus orphans from failed
attempts), lets the sidecar's tracker derive ranges from the names as it does in production, and
lets the service's state plan commits that check each file's content the way
``DeltaCommitter`` does. Whatever the layout, the committed rows are every offset exactly once.
No I/O, no JVM (the footer reader is covered with a real Parquet file on local disk).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commit_service.domain import coverage
from commit_service.domain.coverage import Coverage, OffsetCheck
from commit_service.domain.plan import PendingFile
from commit_service.domain.state import TableState
from commit_service.errors import ContentRangeError, DataFileError
from commit_service.storage.reader import StorageReader
from lakegate_core.protocol import DataFile, FileStatus, OffsetSpan
from lakegate_core.types import TopicPartition
from sidecar.storage import StoredFile
from sidecar.tracker import complete_files

TOPIC = "orders"
TP = TopicPartition(TOPIC, 0)


def data_file(start: int, end: int, path: str | None = None) -> DataFile:
    return DataFile(path or f"s3a://landing/{TOPIC}-0-{start}", TOPIC, 0, start, end, 100)


def covering(first: int, last: int, records: int | None = None) -> Coverage:
    return Coverage(OffsetSpan(first, last), records if records is not None else last - first + 1)


# -- the check ---------------------------------------------------------------------------


def test_a_file_whose_content_fits_its_range_passes() -> None:
    coverage.check(data_file(10, 19), covering(10, 19), OffsetCheck.AUTO)
    coverage.check(data_file(10, 19), covering(10, 17, 6), OffsetCheck.AUTO)  # gaps: markers, compaction


def test_content_past_the_claimed_end_is_refused_with_what_it_holds() -> None:
    with pytest.raises(ContentRangeError) as caught:
        coverage.check(data_file(10, 19), covering(10, 29), OffsetCheck.AUTO)
    assert caught.value.holds == OffsetSpan(10, 29)
    assert caught.value.code == "content_range" and caught.value.status == 422 and not caught.value.retryable
    assert caught.value.details["holds"] == {"first": 10, "last": 29}


@pytest.mark.parametrize(
    "content",
    [covering(11, 19), covering(10, 19, 11)],
    ids=["starts elsewhere than its name", "more records than offsets"],
)
def test_content_no_claim_can_fix_is_a_bad_file(content: Coverage) -> None:
    with pytest.raises(DataFileError) as caught:
        coverage.check(data_file(10, 19), content, OffsetCheck.AUTO)
    assert not isinstance(caught.value, ContentRangeError)


def test_without_an_offset_field_auto_trusts_the_name_and_required_refuses() -> None:
    coverage.check(data_file(10, 19), None, OffsetCheck.AUTO)
    coverage.check(data_file(10, 19), covering(10, 99), OffsetCheck.OFF)
    with pytest.raises(DataFileError, match="offset_check: required"):
        coverage.check(data_file(10, 19), None, OffsetCheck.REQUIRED)


def test_text_coverage_reads_the_envelope_of_the_first_and_last_line() -> None:
    lines = ['{"value": {"id": 1}, "offset": 7}', '{"value": {"id": 2}, "offset": 8}', '{"value": {}, "offset": 9}']
    assert coverage.from_lines(lines) == covering(7, 9)
    assert coverage.from_lines(['{"id": 1, "offset": 7}']) is None  # a record's own field, no envelope
    assert coverage.from_lines(['{"value": 1, "offset": "7"}']) is None
    assert coverage.from_lines(["not json"]) is None
    assert coverage.from_lines([]) is None


def test_parquet_coverage_comes_from_the_footer(tmp_path: Path) -> None:
    value = pa.array([{"id": i} for i in range(5)])
    envelope = pa.table({"key": pa.array([None] * 5, pa.string()), "value": value, "offset": pa.array(range(40, 45))})
    pq.write_table(envelope, tmp_path / "orders-0-40", row_group_size=2)  # three row groups
    facts = StorageReader(local_roots=[str(tmp_path)]).facts(f"file://{tmp_path}/orders-0-40", parquet=True)
    assert facts.coverage == covering(40, 44)
    plain = pa.table({"id": pa.array(range(3)), "offset": pa.array(range(3))})  # user data, no envelope
    pq.write_table(plain, tmp_path / "orders-0-0")
    assert StorageReader().facts(f"file://{tmp_path}/orders-0-0", parquet=True).coverage is None


# -- the state's side ----------------------------------------------------------------------


def pending(start: int, end: int, path: str | None = None) -> PendingFile:
    return PendingFile(data_file(start, end, path), "m", "sidecar-1")


def test_a_refused_file_takes_its_orphans_out_and_keeps_them_out() -> None:
    s = TableState("t")
    for start, end in ((0, 99), (100, 149), (150, 299)):  # 0 really holds 0..149; 100 is an orphan
        assert s.offer(pending(start, end), 0)[0] is FileStatus.ACCEPTED
    dropped = s.refuse_content("s3a://landing/orders-0-0", OffsetSpan(0, 149))
    assert [p.file.start_offset for p in dropped] == [0, 100]
    status, reason = s.offer(pending(0, 99), 1)
    assert status is FileStatus.REJECTED and "claim 0..149" in (reason or "")
    assert s.span_of(data_file(0, 99)) == OffsetSpan(0, 149)
    status, reason = s.offer(pending(100, 149), 1)
    assert status is FileStatus.REJECTED and "orphan" in (reason or "")
    assert s.offer(pending(0, 149), 1)[0] is FileStatus.ACCEPTED
    plan = s.plan(now=1000, force=True)
    assert plan is not None and [(p.file.start_offset, p.file.end_offset) for p in plan.files] == [(0, 149), (150, 299)]
    s.committed_plan(plan, version=0, now=1000)
    assert not s.spans  # forgotten once the table is past them


# -- the whole loop, as a property -----------------------------------------------------------


@dataclass(frozen=True)
class Landed:
    """An object in the landing area: its name's start, the offsets its content holds."""

    start: int
    last: int

    @property
    def key(self) -> str:
        return f"{TOPIC}-0-{self.start}"


@st.composite
def landing_areas(draw: st.DrawFn) -> tuple[int, list[Landed]]:
    """A partition of ``n`` records as the sink leaves it: the final chain of files, plus
    orphans, each starting strictly inside a chain file, from attempts that died before Connect
    committed (their content may run on past the chain file they start in)."""
    n = draw(st.integers(1, 60))
    cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=8))) if n > 1 else []
    bounds = [0, *cuts, n]
    chain = [Landed(a, b - 1) for a, b in zip(bounds, bounds[1:], strict=False)]
    orphans: list[Landed] = []
    for f in chain:
        if f.last > f.start and draw(st.booleans()):
            start = draw(st.integers(f.start + 1, f.last))
            orphans.append(Landed(start, draw(st.integers(start, n - 1))))
    by_start = {f.start: f for f in orphans}  # one object per name: a later upload replaced it
    by_start.update({f.start: f for f in chain})  # the chain's objects are the last written
    return n, list(by_start.values())


@settings(max_examples=400, deadline=None)
@given(landing_areas())
def test_orphans_never_commit_a_record_twice_nor_lose_one(area: tuple[int, list[Landed]]) -> None:
    n, objects = area
    content = {o.key: o for o in objects}
    listed = sorted((StoredFile(o.key, 100 + o.last, TOPIC, 0, o.start) for o in objects), key=lambda f: f.start_offset)
    state = TableState("t")
    holds: dict[tuple[str, int], OffsetSpan] = {}
    rows: list[int] = []
    for _ in range(4 * len(objects) + 4):  # sidecar round, then a commit round
        table_next = state.next_offset(TP)
        for c in complete_files(listed, n, table_next, holds):
            f = DataFile(f"s3a://landing/{c.file.key}", TOPIC, 0, c.file.start_offset, c.end_offset, c.file.size)
            status, _ = state.offer(PendingFile(f, "m", "s"), 0)
            span = state.span_of(f) if status is FileStatus.REJECTED else None
            if span is not None:
                holds[(c.file.key, c.file.size)] = span
        plan = state.plan(now=0, force=True)
        if plan is None:
            continue
        try:
            for p in plan.files:
                o = content[p.file.path.rsplit("/", 1)[1]]
                coverage.check(p.file, covering(o.start, o.last), OffsetCheck.AUTO)
        except ContentRangeError as exc:
            state.refuse_content(exc.path, exc.holds)
            continue
        for p in plan.files:
            o = content[p.file.path.rsplit("/", 1)[1]]
            rows.extend(range(o.start, o.last + 1))
        state.committed_plan(plan, version=0, now=0)
    assert sorted(rows) == list(range(n)), f"committed {sorted(rows)}"
    assert state.next_offset(TP) == n
