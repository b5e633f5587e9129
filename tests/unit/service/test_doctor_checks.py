"""The doctor's pure parts: each check on a connector's config right and wrong, and the Doctor's
report from injected offsets and a fake Kafka (the real Connect and Kafka: tests/e2e/test_doctor.py)."""

from __future__ import annotations

from typing import Any

import pytest

from commit_service.config import AuthConfig, ServiceConfig, StorageConfig, TableConfig
from commit_service.doctor.doctor import CHECKS, Doctor
from commit_service.doctor.facts import ConnectorFacts, TopicFacts
from commit_service.doctor.kafka import DoctorKafkaError
from commit_service.domain.plan import CommitPolicy
from commit_service.domain.upsert import TableMode
from lakegate_core.connect_group import KafkaSettings
from lakegate_core.doctor import Check, ConnectorSpec, DoctorRequest, DoctorSeverity, Listing
from lakegate_core.types import PartitionOffsets, TopicPartition

GOOD = {
    "connector.class": "io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector",
    "topics": "orders",
    "format.output.type": "parquet",
    "format.output.fields": "key,value,offset,timestamp",
    "aws.s3.bucket.name": "lake",
    "aws.s3.prefix": "landing/orders/",
    "key.converter": "org.apache.kafka.connect.storage.StringConverter",
}
ORDERS = TableConfig(name="orders", path="s3a://lake/tables/orders", topics=("orders",), placement="copy_into_table")  # type: ignore[arg-type]
ROOTS = ("s3a://lake/landing/", "s3a://lake/tables/")
LISTING = Listing("aiven", "lake", "landing/orders/")


def facts(config: dict[str, str], **kw: Any) -> ConnectorFacts:
    table = kw.pop("table", ORDERS)
    topics = tuple(t for t in config.get("topics", "").split(",") if t)
    return ConnectorFacts(
        spec=ConnectorSpec("sink", config, kw.pop("state", "RUNNING")),
        source="request",
        listing=kw.pop("listing", LISTING),
        topics=topics,
        tables={t: table if t == "orders" else None for t in topics},
        allowed_roots=kw.pop("roots", ROOTS),
        kafka=kw.pop("kafka", {"orders": TopicFacts(True, -1, "delete", {0: 100}, False)}),
        table_offsets=kw.pop("offsets", PartitionOffsets()),
        connect_offsets=kw.pop("connect", PartitionOffsets()),
    )


def blocking(f: ConnectorFacts) -> dict[Check, list[str]]:
    out: dict[Check, list[str]] = {}
    for check, fn in CHECKS.items():
        for finding in fn(f):
            if finding.severity is DoctorSeverity.BLOCKING:
                out.setdefault(check, []).append(finding.message)
    return out


def severities(f: ConnectorFacts, check: Check) -> list[DoctorSeverity]:
    return [x.severity for x in CHECKS[check](f)]


def test_a_right_connector_has_no_blocking_or_warning_finding() -> None:
    found = [x for fn in CHECKS.values() for x in fn(facts(GOOD))]
    assert [(x.check, x.severity) for x in found if x.severity is not DoctorSeverity.INFO] == []


@pytest.mark.parametrize(
    ("change", "check"),
    [
        ({"file.name.template": "{{topic}}/{{partition}}/{{start_offset}}", "aws.s3.prefix": None}, Check.FILE_NAMING),
        ({"file.name.template": "{{topic}}-{{partition}}-{{timestamp}}", "aws.s3.prefix": None}, Check.FILE_NAMING),
        ({"file.name.template": "{{key}}", "aws.s3.prefix": None}, Check.FILE_NAMING),
        (
            {"format.output.type": None, "format.class": "io.confluent.connect.s3.format.bytearray.ByteArrayFormat"},
            Check.FORMAT,
        ),
        (
            {"format.output.type": "avro", "file.compression.type": "none", "value.converter.schemas.enable": "false"},
            Check.FORMAT,
        ),
        ({"format.output.fields": "key,value,timestamp"}, Check.OFFSET_FIELD),
        ({"format.output.fields": None, "format.output.type": "jsonl"}, Check.OFFSET_FIELD),  # Aiven's default
        ({"errors.tolerance": "all"}, Check.ERRORS_TOLERANCE),
        ({"topics": "orders,payments"}, Check.ROUTING),
        ({"aws.s3.bucket.name": "elsewhere"}, Check.PLACEMENT),  # the sidecar lists another bucket
        ({"aws.s3.prefix": "other/"}, Check.PLACEMENT),  # ... and another prefix, outside the roots too
    ],
)
def test_each_misconfiguration_is_blocking_under_its_check(change: dict[str, str | None], check: Check) -> None:
    config = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    at_root = check is Check.FILE_NAMING  # the sidecar lists the whole bucket: its naming reads every key
    found = blocking(
        facts(config, listing=Listing("aiven", "lake", ""), roots=("s3a://lake/",)) if at_root else facts(config)
    )
    assert check in found, found


def test_aivens_avro_in_its_default_gzip_stream_is_read_at_a_cost() -> None:
    avro = {**GOOD, "format.output.type": "avro", "value.converter.schemas.enable": "true"}
    assert severities(facts(avro), Check.FORMAT) == [DoctorSeverity.WARNING]  # Aiven's default: gzip
    assert severities(facts({**avro, "file.compression.type": "none"}), Check.FORMAT) == []


def test_a_table_partitioned_by_a_kafka_field_needs_the_sink_to_write_it() -> None:
    daily = TableConfig(
        name="orders",
        path="s3a://lake/tables/orders",
        topics=("orders",),
        partition_by=("day(_kafka_timestamp)", "_kafka_partition", "bucket(4, id)"),
    )
    assert blocking(facts(GOOD, table=daily)) == {}
    no_time = {**GOOD, "format.output.fields": "key,value,offset"}
    [finding] = CHECKS[Check.PARTITION_FIELDS](facts(no_time, table=daily))
    assert finding.severity is DoctorSeverity.BLOCKING and "['timestamp']" in finding.message
    assert finding.fix == "format.output.fields=key,offset,timestamp,value"
    assert CHECKS[Check.PARTITION_FIELDS](facts(no_time)) == []  # unpartitioned: nothing to carry


def test_plain_parquet_the_zero_copy_path_is_a_warning_naming_the_risk() -> None:
    """Plain Parquet (value only) is what adding files in place needs: not blocking, but the
    finding says which crash it leaves unguarded and how to close it."""
    for fields in ("value", None):  # None: Aiven's default, value only
        config = {k: v for k, v in {**GOOD, "format.output.fields": fields}.items() if v is not None}
        [finding] = CHECKS[Check.OFFSET_FIELD](facts(config))
        assert finding.severity is DoctorSeverity.WARNING and "committed twice" in finding.why
    assert severities(facts({**GOOD, "format.output.fields": "key,value"}), Check.OFFSET_FIELD) == [
        DoctorSeverity.BLOCKING
    ]


def test_a_custom_template_the_sidecars_naming_reads_passes() -> None:
    config = {**GOOD, "file.name.template": "landing/orders/{{topic}}-{{partition:padding=true}}-{{start_offset}}.gz"}
    del config["aws.s3.prefix"]
    assert blocking(facts(config)) == {}
    confluent = Listing("confluent", "lake", "")  # Confluent's layout read by the confluent preset
    sink = {
        "connector.class": "io.confluent.connect.s3.S3SinkConnector",
        "topics": "orders",
        "format.class": "io.confluent.connect.s3.format.parquet.ParquetFormat",
        "s3.bucket.name": "lake",
        "rotate.schedule.interval.ms": "5000",
    }
    table = TableConfig(name="orders", path="s3a://lake/topics/orders", topics=("orders",))
    f = facts(sink, listing=confluent, table=table, roots=("s3a://lake/",))
    assert blocking(f) == {}
    assert severities(f, Check.OFFSET_FIELD) == [DoctorSeverity.WARNING]  # no offsets in Confluent's files


@pytest.mark.parametrize(
    ("layout", "named", "placed", "shared"),
    [
        ({}, True, True, False),
        ({"topics.dir": "lake/raw", "partitioner.class": "x.HourlyPartitioner"}, True, True, True),
        ({"partitioner.class": "x.FieldPartitioner", "partition.field.name": "region"}, True, True, True),
        ({"topics.dir": "elsewhere"}, True, False, False),  # written where the sidecar does not list
        ({"file.delim": "-"}, False, True, False),  # a name the confluent preset cannot read
    ],
)
def test_confluents_layouts_are_read_where_the_sidecar_lists(
    layout: dict[str, str], named: bool, placed: bool, shared: bool
) -> None:
    sink = {
        "connector.class": "io.confluent.connect.s3.S3SinkConnector",
        "topics": "orders",
        "format.class": "io.confluent.connect.s3.format.avro.AvroFormat",
        "s3.bucket.name": "lake",
        "topics.dir": "lake/topics",
        **layout,
    }
    table = TableConfig(name="orders", path="s3a://lake/tables/orders", topics=("orders",))
    f = facts(sink, listing=Listing("confluent", "lake", "lake/"), table=table, roots=("s3a://lake/",))
    found = CHECKS[Check.FILE_NAMING](f)
    assert (Check.FILE_NAMING in blocking(f)) != named
    assert any("shared directories" in x.message for x in found) == shared
    assert (Check.PLACEMENT in blocking(f)) != placed


def test_a_regex_naming_that_misreads_the_names_is_blocking() -> None:
    f = facts(GOOD, listing=Listing(r"(?P<topic>[a-z]+)_(?P<partition>\d+)_(?P<start_offset>\d+)", "lake", ""))
    assert Check.FILE_NAMING in blocking(f)


def test_an_in_place_table_rewrites_parquet_files_outside_its_root() -> None:
    in_place = TableConfig(name="orders", path="s3a://lake/tables/orders", topics=("orders",))
    assert severities(facts(GOOD, table=in_place), Check.PLACEMENT) == [DoctorSeverity.WARNING]
    jsonl = {**GOOD, "format.output.type": "jsonl"}  # rewritten anyway: where it lies costs nothing
    assert severities(facts(jsonl, table=in_place), Check.PLACEMENT) == []
    under = {**GOOD, "aws.s3.prefix": "tables/orders/landing/"}
    listing = Listing("aiven", "lake", "tables/orders/landing/")
    assert severities(facts(under, table=in_place, listing=listing), Check.PLACEMENT) == []


def test_errors_tolerance_with_a_dead_letter_queue_is_a_warning() -> None:
    f = facts({**GOOD, "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq"})
    assert severities(f, Check.ERRORS_TOLERANCE) == [DoctorSeverity.WARNING]


def test_retention_against_the_commit_policy() -> None:
    table = TableConfig(
        name="orders",
        path="s3a://lake/tables/orders",
        topics=("orders",),
        placement="copy_into_table",  # type: ignore[arg-type]
        commit=CommitPolicy(interval_seconds=10, timeout_seconds=30, quarantine_after_seconds=600),
    )

    def at(ms: int) -> list[DoctorSeverity]:
        return severities(
            facts(GOOD, table=table, kafka={"orders": TopicFacts(True, ms, "delete", {0: 5})}), Check.RETENTION
        )

    assert at(60_000) == [DoctorSeverity.BLOCKING]  # 60 s < 640 s a round may take
    assert at(3_600_000) == [DoctorSeverity.WARNING]  # an hour: no day for an operator
    assert at(7 * 24 * 3_600_000) == [] and at(-1) == []


def test_transactions_need_read_committed() -> None:
    written = {"orders": TopicFacts(True, -1, "delete", {0: 10}, True)}
    assert severities(facts(GOOD, kafka=written), Check.ISOLATION_LEVEL) == [DoctorSeverity.BLOCKING]
    fixed = {**GOOD, "consumer.override.isolation.level": "read_committed"}
    assert severities(facts(fixed, kafka=written), Check.ISOLATION_LEVEL) == []


def test_offsets_behind_the_table_a_recreated_topic_blocks_a_reset_group_warns() -> None:
    tp = TopicPartition("orders", 0)
    table = PartitionOffsets({tp: 50})
    recreated = {"orders": TopicFacts(True, -1, "delete", {0: 3})}
    assert severities(facts(GOOD, kafka=recreated, offsets=table), Check.OFFSETS_BACKWARDS) == [DoctorSeverity.BLOCKING]
    gone = {"orders": TopicFacts(exists=False)}
    assert severities(facts(GOOD, kafka=gone, offsets=table), Check.OFFSETS_BACKWARDS) == [DoctorSeverity.BLOCKING]
    reset = {"orders": TopicFacts(True, -1, "delete", {0: 80})}
    f = facts(GOOD, kafka=reset, offsets=table, connect=PartitionOffsets({tp: 10}))
    assert severities(f, Check.OFFSETS_BACKWARDS) == [DoctorSeverity.WARNING]
    healthy = facts(GOOD, kafka=reset, offsets=table, connect=PartitionOffsets({tp: 60}))
    assert severities(healthy, Check.OFFSETS_BACKWARDS) == []


def test_an_upsert_table_needs_its_fields_and_a_readable_key() -> None:
    users = TableConfig(
        name="orders",
        path="s3a://lake/tables/orders",
        topics=("orders",),
        placement="copy_into_table",  # type: ignore[arg-type]
        mode=TableMode.UPSERT,
        key=("id",),
        delete_on_tombstone=True,
    )
    assert blocking(facts(GOOD, table=users)) == {}
    assert Check.UPSERT_FIELDS in blocking(facts({**GOOD, "format.output.fields": "value,offset"}, table=users))
    bytes_keys = {**GOOD, "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter"}
    assert Check.KEY_CONVERTER in blocking(facts(bytes_keys, table=users))
    inherited = {k: v for k, v in GOOD.items() if k != "key.converter"}
    assert severities(facts(inherited, table=users), Check.KEY_CONVERTER) == [DoctorSeverity.INFO]


def test_file_cadence_slower_than_the_interval_and_small_files_warn() -> None:
    assert severities(facts(GOOD), Check.FILE_CADENCE) == [DoctorSeverity.INFO]  # Aiven: the worker's flush
    slow = {**GOOD, "file.max.records": "10"}
    assert severities(facts(slow), Check.FILE_CADENCE) == [DoctorSeverity.WARNING]
    confluent = {
        "connector.class": "io.confluent.connect.s3.S3SinkConnector",
        "topics": "orders",
        "format.class": "ParquetFormat",
        "s3.bucket.name": "lake",
        "flush.size": "1000",
    }
    assert severities(facts(confluent), Check.FILE_CADENCE) == [DoctorSeverity.WARNING]  # closes only when full
    rotated = {**confluent, "rotate.schedule.interval.ms": "600000"}
    assert severities(facts(rotated), Check.FILE_CADENCE) == [DoctorSeverity.WARNING]  # 600 s > 10 s


def test_a_failed_or_missing_connector() -> None:
    assert severities(facts(GOOD, state="FAILED"), Check.CONNECTOR_STATE) == [DoctorSeverity.WARNING]
    assert severities(facts(GOOD, state="MISSING"), Check.CONNECTOR_STATE) == [DoctorSeverity.BLOCKING]


class FakeInspector:
    """Kafka as the doctor reads it, from a dict (the real one: tests/e2e/test_doctor.py)."""

    def __init__(self, topics: dict[str, TopicFacts], fail: bool = False) -> None:
        self.topics, self.fail = topics, fail

    def __call__(self, _settings: KafkaSettings) -> FakeInspector:
        if self.fail:
            raise DoctorKafkaError("cannot reach Kafka")
        return self

    def __enter__(self) -> FakeInspector:
        return self

    def __exit__(self, *_: object) -> None:
        pass

    def topic_names(self) -> list[str]:
        return sorted(self.topics)

    def describe(self, topics: Any) -> dict[str, TopicFacts]:
        return {t: self.topics.get(t, TopicFacts(exists=False)) for t in topics}


def doctor(inspector: FakeInspector, **kw: Any) -> Doctor:
    config = ServiceConfig(
        auth=AuthConfig(enabled=False),
        tables=(ORDERS,),
        storage=StorageConfig(allowed_roots=ROOTS),
        kafka=KafkaSettings("kafka:9092"),
    )
    return Doctor(
        config,
        lambda: PartitionOffsets({TopicPartition("orders", 0): 5}),
        kw.get("connect", lambda _name: PartitionOffsets({TopicPartition("orders", 0): 5})),
        inspector=inspector,  # type: ignore[arg-type]
    )


def test_the_doctor_remembers_sidecars_reports_and_resolves_topics_regex() -> None:
    kafka = FakeInspector({"orders": TopicFacts(True, -1, "delete", {0: 9}, False), "other": TopicFacts()})
    d = doctor(kafka)
    assert d.examine().connectors == ()  # nothing reported yet
    regex = {k: v for k, v in GOOD.items() if k != "topics"} | {"topics.regex": "ord.*"}
    d.remember(DoctorRequest((ConnectorSpec("a", regex, "RUNNING"),), LISTING, "sidecar-1"))
    d.remember(DoctorRequest((ConnectorSpec("b", {**GOOD, "errors.tolerance": "all"}),), LISTING, "sidecar-2"))
    report = d.examine()
    assert [(c.name, c.topics, c.tables, c.source) for c in report.connectors] == [
        ("a", ("orders",), ("orders",), "sidecar sidecar-1"),
        ("b", ("orders",), ("orders",), "sidecar sidecar-2"),
    ]
    assert not report.ok and [(f.connector, f.check) for f in report.blocking()] == [("b", Check.ERRORS_TOLERANCE)]
    assert Check.ERRORS_TOLERANCE in report.connectors[0].passed
    assert Check.ERRORS_TOLERANCE not in report.connectors[1].passed
    assert [(c.verdict.name, c.ok, c.blocking) for c in d.last()] == [
        ("a", True, ()),
        ("b", False, ("errors_tolerance",)),
    ]
    again = d.examine(DoctorRequest((ConnectorSpec("b", GOOD),)))  # a one-off check is not remembered
    assert again.ok and [c.name for c in d.examine().connectors] == ["a", "b"]


def test_kafka_and_connect_unreadable_are_reported_as_not_checked() -> None:
    def broken(_name: str) -> PartitionOffsets:
        raise RuntimeError("no coordinator")

    report = doctor(FakeInspector({}, fail=True), connect=broken).examine(DoctorRequest((ConnectorSpec("a", GOOD),)))
    notes = [f.message for f in report.findings if f.check is Check.NOT_CHECKED]
    assert report.ok and len(notes) == 2, report.findings
    assert "cannot reach Kafka" in notes[0] and "no coordinator" in notes[1]
