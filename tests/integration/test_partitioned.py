"""Partitioned tables (``tables[].partition_by``) on real Spark, Delta and Iceberg, read back by value.

Files as a sink writes them: a Parquet file whose rows all fall in one partition is added where it
lies with that partition's values; one that spans partitions (a flush across midnight) is rewritten
by Spark, one file per partition; JSON lines in Aiven's envelope are rewritten into partitions of
``_kafka_timestamp``. Every field of every record is compared with what the independent reader
(delta-rs; pyiceberg) returns, and both it and Spark are shown to prune by a filter on the source
column. The same test for both formats: only reading the table back differs.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from commit_service.domain.maintenance import MaintenancePolicy
from commit_service.domain.plan import PendingFile
from commit_service.domain.state import TableState
from commit_service.errors import DataFileError, SchemaMismatchError, TableLayoutError
from lakegate_core.protocol import DataFile, FileFormat
from lakegate_core.status import MaintenanceKind
from lakegate_stack.fidelity import same
from tests.fixtures import ICEBERG_CATALOG
from tests.partition_helpers import DAY, TOPIC, Landing, Table


@pytest.mark.parametrize("table_format", ["delta", "iceberg"])
def test_a_day_partitioned_table_adds_pinned_files_in_place_and_splits_one_across_midnight(
    spark: Any, tmp_path: Path, table_format: str
) -> None:
    table = Table(spark, tmp_path, table_format, "clicks", "day(ts)")
    landing = Landing(table.root)
    a, rows_a = landing.parquet(0, 0, [DAY + timedelta(hours=10, minutes=i) for i in range(50)])  # the 27th
    b, rows_b = landing.parquet(0, 50, [DAY + timedelta(hours=23, minutes=35 + i) for i in range(50)])  # 25 + 25
    c, rows_c = landing.parquet(1, 0, [None] * 10)  # no time at all: the null partition
    record = table.commit([a, b, c])
    assert (record.records, record.in_place, record.rewritten, record.split) == (110, 2, 1, 1)

    files = table.files()
    in_place = {path.rsplit("/", 2)[-2:][1]: part for path, part, _ in files if "/landing/" in f"/{path}"}
    assert in_place == {f"{TOPIC}-0-0": {"ts_day": "2026-11-27"}, f"{TOPIC}-1-0": {"ts_day": None}}
    split = sorted((part["ts_day"], n) for path, part, n in files if "/landing/" not in f"/{path}")
    assert split == [("2026-11-27", 25), ("2026-11-28", 25)]

    expected = {r["id"]: {**r, "ts_day": r["ts"].date() if r["ts"] else None} for r in rows_a + rows_b + rows_c}
    got = table.rows()
    assert sorted(r["id"] for r in got) == sorted(expected)
    for r in got:
        want = expected[r["id"]] if table_format == "delta" else {**expected[r["id"]], "ts_day": None}
        row = r if table_format == "delta" else {**r, "ts_day": None}  # Iceberg's partition is hidden: no column
        assert same(want, row), f"{want} != {row}"
    # a filter on the source column prunes by the partition: the independent reader and Spark
    late = [r["id"] for r in rows_b if r["ts"] >= DAY + timedelta(days=1)]
    planned = table.planned(DAY + timedelta(days=1))
    assert len(planned) == 1 and "2026-11-28" in planned[0]
    frame = table.spark_frame().where("ts >= '2026-11-28 00:00:00'")
    assert sorted(r["id"] for r in frame.collect()) == sorted(late)
    if table_format == "delta":  # Delta's partition filter from the generated column (Iceberg's scan is V2)
        assert [f.rsplit("/", 2)[-2] for f in frame.inputFiles()] == ["ts_day=2026-11-28"]

    # the next round goes into the same layout: a file of one hour of the 28th, in place
    d, rows_d = landing.parquet(0, 100, [DAY + timedelta(days=1, hours=3)] * 5)
    record = table.commit([d])
    assert (record.in_place, record.rewritten) == (1, 0)
    assert sorted(n for _, part, n in table.files() if part["ts_day"] == "2026-11-28") == [5, 25]

    # compaction bin-packs within each partition, and leaves the rows and the offsets as they were
    offsets = table.committer.snapshot().offsets
    policy = MaintenancePolicy(enabled=True, compact_min_files=2)
    compacted = table.committer.maintain(MaintenanceKind.COMPACT, policy)
    assert compacted.files_after < compacted.files_before, compacted
    by_day = sorted((part["ts_day"] or "", n) for _, part, n in table.files())
    assert by_day == [("", 10), ("2026-11-27", 75), ("2026-11-28", 30)]
    assert table.committer.snapshot().offsets == offsets
    assert sorted(r["id"] for r in table.rows()) == sorted([*expected, *(r["id"] for r in rows_d)])


@pytest.mark.parametrize("table_format", ["delta", "iceberg"])
def test_envelope_json_lines_are_rewritten_into_identity_and_hour_partitions(
    spark: Any, tmp_path: Path, table_format: str
) -> None:
    """Aiven's default output (JSON lines in the envelope) into ``[region, hour(_kafka_timestamp)]``:
    every record in the partition of its region and Kafka timestamp's hour, every field read back.
    One region is the empty string: Iceberg keeps it apart from null; Delta stores no empty string
    as a partition value and reads it back as null (its own rule, docs/configuration.md)."""
    table = Table(spark, tmp_path, table_format, "events", "region", "hour(_kafka_timestamp)")
    base = int((DAY + timedelta(hours=13, minutes=50)).timestamp() * 1000)
    envelopes = [
        {
            "key": f"k{i}",
            "value": {"id": i, "region": "" if i == 19 else "eu" if i % 3 else "us/east", "amount": i * 1.5},
            "offset": i,
            "timestamp": base + i * 60_000,  # 13:50 .. 14:09: two hours
        }
        for i in range(20)
    ]
    record = table.commit([Landing(table.root).envelope_jsonl(0, envelopes)])
    assert (record.in_place, record.rewritten, record.split) == (0, 1, None)

    hour_of = {
        "delta": lambda at: at.strftime("%Y-%m-%d-%H"),
        "iceberg": lambda at: str(int(at.timestamp()) // 3600),
    }[table_format]

    def region(value: dict[str, Any]) -> str | None:
        return None if table_format == "delta" and value["region"] == "" else value["region"]

    want_parts = {(region(e["value"]), hour_of(datetime.fromtimestamp(e["timestamp"] / 1000, UTC))) for e in envelopes}
    got_parts = {(p["region"], p["_kafka_timestamp_hour"]) for _, p, _ in table.files()}
    assert got_parts == want_parts and len(got_parts) == 5

    rows = {r["id"]: r for r in table.rows()}
    assert sorted(rows) == list(range(20))
    for e in envelopes:
        at = datetime.fromtimestamp(e["timestamp"] / 1000, UTC)
        want = {
            **e["value"],
            "region": region(e["value"]),
            "_kafka_key": e["key"],
            "_kafka_offset": e["offset"],
            "_kafka_timestamp": at,
        }
        if table_format == "delta":
            want["_kafka_timestamp_hour"] = hour_of(at)
        got = {k: v for k, v in rows[e["value"]["id"]].items() if k in want or k == "_kafka_timestamp_hour"}
        assert same(want, got), f"{want} != {got}"
    assert sorted(r["id"] for r in table.rows(region="us/east")) == [i for i in range(20) if i % 3 == 0]


@pytest.mark.parametrize("table_format", ["delta", "iceberg"])
def test_an_unpartitioned_tables_in_place_files_are_skipped_by_their_time_bounds(
    spark: Any, tmp_path: Path, table_format: str
) -> None:
    """A sink's files are ordered by time: each in-place file carries its footer's time bounds
    (Delta: the ``add``'s stats, in milliseconds, the max rounded up; Iceberg: the DataFile's
    metrics), so a time filter reads only the files it can match, partitioned or not. The last
    row of each file is 500 microseconds before the next hour: a filter from that very instant
    still finds it."""
    table = Table(spark, tmp_path, table_format, "ordered")
    landing = Landing(table.root)
    files, rows = [], []
    for hour in range(3):
        start = DAY + timedelta(hours=hour)
        times = [start + timedelta(minutes=10 * i) for i in range(5)] + [start + timedelta(hours=1, microseconds=-500)]
        f, r = landing.parquet(0, hour * 6, times)
        files.append(f)
        rows += r
    record = table.commit(files)
    assert (record.in_place, record.rewritten) == (3, 0)
    last_of_second = DAY + timedelta(hours=2, microseconds=-500)
    late = {r["id"] for r in rows if r["ts"] >= last_of_second}
    frame = table.spark_frame().where(f"ts >= '{last_of_second.strftime('%Y-%m-%d %H:%M:%S.%f')}'")
    assert {r["id"] for r in frame.collect()} == late and len(late) == 7
    if table_format == "delta":  # Spark skips by the stats
        assert sorted(f.rsplit("-", 1)[1] for f in frame.inputFiles()) == ["12", "6"]
    else:  # pyiceberg plans by the metrics
        assert sorted(t.rsplit("-", 1)[1] for t in table.planned(last_of_second)) == ["12", "6"]
    got = {r["id"]: r for r in table.rows()}
    assert sorted(got) == sorted(r["id"] for r in rows)
    for want in rows:
        assert same(want, got[want["id"]]), f"{want} != {got[want['id']]}"
    # an aggregate Spark may answer from the stats alone is still exact (the max is not rounded up)
    bounds = table.spark_frame().selectExpr("unix_micros(min(ts))", "unix_micros(max(ts))", "count(*)").collect()[0]
    micros = [(r["ts"] - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) for r in rows]
    assert tuple(bounds) == (min(micros), max(micros), 18)


def test_a_delta_table_clustered_outside_lakegate_takes_files_in_place_and_compaction_clusters_them(
    spark: Any, tmp_path: Path
) -> None:
    """Liquid clustering, as a team sets it up: the table made with ``CLUSTER BY (ts)`` before
    Lakegate's first round, ``partition_by: []``. Every file is added where it lies, midnight or
    not (clustering splits nothing); compaction (Delta's ``OPTIMIZE``) clusters them; the rows,
    the offsets and the clustering columns are as they were, and a time filter skips files."""
    table = Table(spark, tmp_path, "delta", "clustered")
    spark.sql(
        f"CREATE TABLE delta.`{table.root}` (id BIGINT, ts TIMESTAMP, page STRING, offset BIGINT) "
        "USING delta CLUSTER BY (ts)"
    )
    landing = Landing(table.root)
    files, rows = [], []
    for i in range(4):  # the last one spans midnight
        start = DAY + timedelta(hours=20 + i)
        f, r = landing.parquet(0, i * 10, [start + timedelta(minutes=6 * k) for k in range(10)])
        files.append(f)
        rows += r
    record = table.commit(files)
    assert (record.in_place, record.rewritten, record.split) == (4, 0, None)
    late = table.spark_frame().where("ts >= '2026-11-27 23:00:00'")
    assert sorted(f.rsplit("-", 1)[1] for f in late.inputFiles()) == ["30"]

    offsets = table.committer.snapshot().offsets
    compacted = table.committer.maintain(MaintenanceKind.COMPACT, MaintenancePolicy(enabled=True, compact_min_files=2))
    assert compacted.files_after < compacted.files_before == 4, compacted
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{table.root}`").collect()[0]
    assert list(detail["clusteringColumns"]) == ["ts"]
    assert table.committer.snapshot().offsets == offsets
    got = {r["id"]: r for r in table.rows()}
    assert sorted(got) == sorted(r["id"] for r in rows)
    for want in rows:
        assert same(want, got[want["id"]]), f"{want} != {got[want['id']]}"


NEW_YEAR = datetime(2026, 12, 31, 23, 59, tzinfo=UTC)
# a partition's value as each reader shows it, by transform: Delta's generated column (the source
# column itself for identity), Iceberg's partition tuple (years and months since 1970)
PARTITION_TEXT = {
    ("delta", "year(ts)"): lambda at: str(at.year),
    ("delta", "month(ts)"): lambda at: at.strftime("%Y-%m"),
    ("iceberg", "year(ts)"): lambda at: str(at.year - 1970),
    ("iceberg", "month(ts)"): lambda at: str((at.year - 1970) * 12 + at.month - 1),
}


@pytest.mark.parametrize("table_format", ["delta", "iceberg"])
@pytest.mark.parametrize("transform", ["year(ts)", "month(ts)", "ts"])
def test_year_month_and_identity_partitions_of_a_timestamp(
    spark: Any, tmp_path: Path, table_format: str, transform: str
) -> None:
    """A file of one instant goes in place by its year or month; a file from 23:59 on New Year's
    Eve to 00:02 spans two years, two months and four instants, and is split by each. By the
    identity of a timestamp (a partition per instant) every file is split: Lakegate takes no
    instant from a footer as a partition value, and Iceberg's builder parses none from text."""
    table = Table(spark, tmp_path, table_format, f"times_{transform[:-4] or 'ts'}", transform)
    landing = Landing(table.root)
    a, rows_a = landing.parquet(0, 0, [NEW_YEAR] * 4)
    b, rows_b = landing.parquet(0, 4, [NEW_YEAR + timedelta(minutes=i) for i in range(4)])
    record = table.commit([a, b])
    if transform == "ts":  # a timestamp's own value is not taken from a footer: both files are split
        assert (record.in_place, record.rewritten, record.split) == (0, 2, 2)
    else:
        assert (record.in_place, record.rewritten, record.split) == (1, 1, 1)

    rows = {r["id"]: r for r in table.rows()}
    assert sorted(rows) == sorted(r["id"] for r in rows_a + rows_b)
    column = f"ts_{transform[:-4]}" if transform != "ts" else None  # Delta's generated column, Iceberg's field
    for want in rows_a + rows_b:
        got = rows[want["id"]]
        derived = {column: got.get(column)} if column else {}
        assert same({**want, **derived}, got), f"{want} != {got}"
        if column and table_format == "delta":
            assert got[column] == (want["ts"].year if transform == "year(ts)" else want["ts"].strftime("%Y-%m"))

    value = PARTITION_TEXT.get((table_format, transform), lambda at: at.isoformat())  # identity: the instant
    got_parts: Counter[str | None] = Counter()
    for _, part, n in table.files():
        got_parts[part[column or "ts"]] += n
    assert got_parts == Counter(value(r["ts"]) for r in rows_a + rows_b)


def test_a_delta_table_of_another_layout_and_a_file_without_the_column_are_refused(spark: Any, tmp_path: Path) -> None:
    made = Table(spark, tmp_path, "delta", "clicks", "day(ts)")
    landing = Landing(made.root)
    made.commit([landing.parquet(0, 0, [DAY] * 3)[0]])
    for other in (("hour(ts)",), ()):  # partition_by changed, or dropped, after the table was made
        table = Table(spark, tmp_path, "delta", "clicks", *other)
        snap = table.committer.snapshot()
        table.state.recovered(snap.offsets, snap.version)
        with pytest.raises(TableLayoutError, match=r"ts_day"):
            table.commit([landing.parquet(0, 3, [DAY] * 3)[0]])
    assert DeltaTable(str(made.root)).version() == 0

    fresh = Table(spark, tmp_path, "delta", "fresh", "day(ts)")
    path = fresh.root / "landing" / f"{TOPIC}-0-0"
    path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{"id": 1, "offset": 0}]), path)
    f = DataFile(path.as_uri(), TOPIC, 0, 0, 0, path.stat().st_size, FileFormat.PARQUET, 1)
    with pytest.raises(SchemaMismatchError, match=r"no column 'ts'.*day\(ts\)"):
        fresh.commit([PendingFile(f, "m", "s")])

    # a round whose every column is an identity partition: Delta stores those in no file, and
    # refuses such a write (DELTA_NON_PARTITION_COLUMN_ABSENT); Lakegate says so first
    only = Table(spark, tmp_path, "delta", "only", "page")
    path = only.root / "landing" / f"{TOPIC}-0-0"
    path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{"page": "/a"}, {"page": "/b"}]), path)
    f = DataFile(path.as_uri(), TOPIC, 0, 0, 1, path.stat().st_size, FileFormat.PARQUET, 2)
    with pytest.raises(TableLayoutError, match=r"no column but its partition columns \(page\)"):
        only.commit([PendingFile(f, "m", "s")])


@pytest.mark.parametrize("table_format", ["delta", "iceberg"])
def test_a_partition_value_holding_nul_refuses_its_file_from_delta_and_iceberg_keeps_it(
    spark: Any, tmp_path: Path, table_format: str
) -> None:
    """Spark writes a Delta partition's value raw into the path of each file it puts there, and
    leaves NUL (U+0000) unescaped: no file system or S3 listing holds such a path. So a Delta
    table refuses the file whose record would put NUL there, naming it, whether the file would be
    added where it lies (pinned to one partition) or rewritten (its rows split); the round's other
    files then commit without it. Iceberg escapes the value in its paths and keeps it."""
    table = Table(spark, tmp_path, table_format, "pages", "truncate(2, page)")
    landing = Landing(table.root)

    def pages(partition: int, values: list[str]) -> tuple[PendingFile, list[dict[str, Any]]]:
        rows = [{"id": partition * 100 + i, "ts": DAY, "page": v, "offset": i} for i, v in enumerate(values)]
        path = landing.dir / f"{TOPIC}-{partition}-0"
        pq.write_table(pa.Table.from_pylist(rows, schema=landing.schema), path)
        f = DataFile(path.as_uri(), TOPIC, partition, 0, len(rows) - 1, path.stat().st_size, FileFormat.PARQUET)
        return PendingFile(f, f"m-{partition}", "sc-1"), rows

    pinned, pinned_rows = pages(0, ["\x00ab", "\x00ac"])  # one partition, "\x00a": added in place
    split, split_rows = pages(1, ["ok", "\x00z"])  # two partitions: rewritten by Spark
    plain, plain_rows = pages(2, ["fine", "fi"])  # one partition, "fi": added in place
    if table_format == "iceberg":
        record = table.commit([pinned, split, plain])
        assert (record.records, record.in_place, record.rewritten) == (6, 2, 1)
        assert sorted(part["page_trunc"] for _, part, _ in table.files()) == ["\x00a", "\x00z", "fi", "ok"]
        expected = pinned_rows + split_rows + plain_rows
    else:
        for files, culprit in (([pinned, split, plain], pinned), ([split, plain], split)):
            with pytest.raises(DataFileError, match=r"partition page_trunc has a NUL character") as refused:
                table.commit(files)
            assert refused.value.path == culprit.file.path
            table.state = TableState("pages")  # the coordinator takes the refused file out of the plan
        assert not (table.root / "_delta_log").exists()
        record = table.commit([plain])
        assert (record.records, record.in_place) == (2, 1)
        expected = plain_rows
    got = sorted(table.rows(), key=lambda r: r["id"])
    assert len(got) == len(expected)
    for want, row in zip(expected, got, strict=True):
        assert same(want, {k: v for k, v in row.items() if k != "page_trunc"}), f"{want} != {row}"


def test_an_iceberg_table_partitioned_outside_lakegate_is_adopted_and_its_spec_evolution_followed(
    spark: Any, tmp_path: Path
) -> None:
    """``partition_by: []``, a table made by Spark SQL partitioned by ``region``: its rounds go into
    its own spec. Another writer adds ``bucket(4, id)`` to the spec: the round that meets the change
    lands whole in the spec it was planned in (Lakegate holds the table between rounds; Iceberg
    reads two specs as one table), and the round after it follows the new spec."""
    name = "lakegate_parts.adopted"
    location = (tmp_path / "iceberg" / "adopted").as_uri()
    spark.sql(
        f"CREATE TABLE {ICEBERG_CATALOG}.{name} (id BIGINT, region STRING, n BIGINT) USING iceberg "
        f"PARTITIONED BY (region) LOCATION '{location}'"
    )
    table = Table(spark, tmp_path, "iceberg", "adopted")
    assert table.name == name
    landing = Landing(tmp_path / "adopted")

    def regional(partition: int, start: int, regions: list[str]) -> tuple[PendingFile, list[dict[str, Any]]]:
        rows = [{"id": partition * 100 + start + i, "region": r, "n": (start + i) * 7} for i, r in enumerate(regions)]
        path = landing.dir / f"{TOPIC}-{partition}-{start}"
        pq.write_table(pa.Table.from_pylist(rows), path)
        f = DataFile(
            path.as_uri(),
            TOPIC,
            partition,
            start,
            start + len(rows) - 1,
            path.stat().st_size,
            FileFormat.PARQUET,
            len(rows),
        )
        return PendingFile(f, f"m-{partition}-{start}", "sc-1"), rows

    eu, rows_eu = regional(0, 0, ["eu"] * 4)
    mixed, rows_mixed = regional(1, 0, ["eu", "us", "us"])
    record = table.commit([eu, mixed])
    assert (record.in_place, record.split) == (1, 1)
    assert sorted((p["region"], n) for _, p, n in table.files()) == [("eu", 1), ("eu", 4), ("us", 2)]

    spark.sql(f"ALTER TABLE {ICEBERG_CATALOG}.{name} ADD PARTITION FIELD bucket(4, id)")
    meets, rows_meets = regional(1, 3, ["us"] * 2)  # the round that meets the change: region alone
    record = table.commit([meets])
    assert (record.in_place, record.split) == (1, None)  # one partition: nothing split
    assert [p for _, p, _ in table.files() if p.get("id_bucket_4") is not None] == []
    later, rows_later = regional(0, 4, ["us"] * 6)  # ids 4..9: several buckets, so it is split
    record = table.commit([later])
    assert (record.in_place, record.rewritten, record.split) == (0, 1, 1)
    newest = [p for _, p, _ in table.files() if p.get("id_bucket_4") is not None]  # Spark's name for the field
    assert {p["region"] for p in newest} == {"us"} and len(newest) > 1
    rows = {r["id"]: r for r in table.rows()}
    for want in rows_eu + rows_mixed + rows_meets + rows_later:
        assert same(want, rows[want["id"]]), f"{want} != {rows[want['id']]}"
    assert len(rows) == 15
