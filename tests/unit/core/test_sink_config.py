"""What a sink connector's config says of its files: the names it renders (Aiven's prefix naming,
its templates, Confluent's layout), read back by the sidecar's namings, and where it writes."""

from __future__ import annotations

import pytest

from lakegate_core.sink_config import (
    ConfluentLayout,
    object_key,
    offset_width,
    output_fields,
    parse_name,
    sink_location,
)

AIVEN = {"connector.class": "io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector", "aws.s3.bucket.name": "b"}


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"aws.s3.prefix": "in/", "file.compression.type": "none"}, "t-1-00000000000000000042"),
        ({"aws.s3.prefix": "in/"}, "t-1-00000000000000000042.gz"),  # gzip's extension when unset
        ({}, "t-1-42.gz"),
        ({"file.compression.type": "zstd"}, "t-1-42.zst"),
        ({"file.name.template": "{{topic}}-{{partition:padding=true}}-{{start_offset}}"}, "t-0000000001-42"),
        (
            {"file.name.template": "x/{{ topic }}-{{partition}}-{{start_offset:padding=true}}.json"},
            "t-1-00000000000000000042.json",
        ),
    ],
)
def test_aivens_names_render_and_read_back(config: dict[str, str], key: str) -> None:
    name = object_key({**AIVEN, **config}, "t", 1, 42)
    assert name.key == key and not name.missing
    assert parse_name("aiven", key) == ("t", 1, 42)


def test_a_template_without_the_start_offset_or_varying_by_key_has_no_key() -> None:
    assert object_key({**AIVEN, "file.name.template": "{{topic}}-{{partition}}"}, "t", 1, 42).missing == (
        "start_offset",
    )
    keyed = object_key({**AIVEN, "file.name.template": "{{key}}-{{topic}}-{{partition}}-{{start_offset}}"}, "t", 1, 2)
    assert keyed.unknown == ("key",)


CONFLUENT = {"connector.class": "io.confluent.connect.s3.S3SinkConnector", "format.class": "x.ParquetFormat"}
PARTITIONER = "io.confluent.connect.storage.partitioner."


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({}, "topics/my-topic/partition=3/my-topic+3+0000000009.snappy.parquet"),
        (
            {"topics.dir": "lake/raw/", "filename.offset.zero.pad.width": "4", "parquet.codec": "none"},
            "lake/raw/my-topic/partition=3/my-topic+3+0009.parquet",
        ),
        (
            {"format.class": "x.AvroFormat", "partitioner.class": PARTITIONER + "HourlyPartitioner"},
            "topics/my-topic/year=2026/month=01/day=02/hour=03/my-topic+3+0000000009.avro",
        ),
        (
            {
                "format.class": "x.JsonFormat",
                "s3.compression.type": "gzip",
                "partitioner.class": PARTITIONER + "TimeBasedPartitioner",
                "path.format": "'dt'=YYYY-MM-dd/'t'=HHmm",
            },
            "topics/my-topic/dt=2026-01-02/t=0304/my-topic+3+0000000009.json.gz",
        ),
        (
            {"partitioner.class": PARTITIONER + "FieldPartitioner", "partition.field.name": "region, kind"},
            "topics/my-topic/region=x/kind=x/my-topic+3+0000000009.snappy.parquet",
        ),
    ],
)
def test_confluents_layouts_render_and_read_back_with_its_preset(config: dict[str, str], key: str) -> None:
    name = object_key({**CONFLUENT, **config}, "my-topic", 3, 9)
    assert name.key == key
    assert parse_name("confluent", key) == ("my-topic", 3, 9)
    assert parse_name("confluent", key.replace("/my-topic/", "/other/")) is None, "the topic's directory and name agree"
    assert output_fields(CONFLUENT) == ()


@pytest.mark.parametrize(
    ("config", "width"),
    [
        ({**AIVEN, "aws.s3.prefix": "in/"}, 20),
        ({**AIVEN, "file.name.template": "{{topic}}-{{partition}}-{{start_offset:padding=true}}"}, 20),
        ({**AIVEN, "file.name.template": "{{topic}}-{{partition:padding=true}}-{{start_offset}}"}, None),
        ({**AIVEN, "file.name.template": "{{topic}}-{{partition}}-{{start_offset}}"}, None),
        (AIVEN, None),
        ({**AIVEN, "file.name.template": "{{topic}}-{{partition}}"}, None),  # no offset in the name
        (CONFLUENT, 10),
        ({**CONFLUENT, "filename.offset.zero.pad.width": "14"}, 14),
        ({**CONFLUENT, "filename.offset.zero.pad.width": "1"}, None),
        ({**CONFLUENT, "partitioner.class": PARTITIONER + "HourlyPartitioner"}, 10),
    ],
)
def test_the_width_a_connectors_names_pad_offsets_to(config: dict[str, str], width: int | None) -> None:
    assert offset_width(config) == width


def test_only_the_default_partitioner_keeps_a_partition_in_a_directory_of_its_own() -> None:
    assert ConfluentLayout.of(CONFLUENT).partition_prefix("t", 2) == "topics/t/partition=2/t+2+"
    daily = ConfluentLayout.of({**CONFLUENT, "partitioner.class": PARTITIONER + "DailyPartitioner", "topics.dir": ""})
    assert daily.partition_prefix("t", 2) is None and daily.topic_prefix("t") == "t/"
    assert ConfluentLayout.of({**AIVEN, "format.output.type": "avro"}) is None


def test_where_a_sink_writes() -> None:
    assert sink_location({**AIVEN, "aws.s3.prefix": "landing/"}).uri == "s3a://b/landing/"
    assert sink_location({**AIVEN, "file.name.template": "x/y/{{topic}}"}).prefix == "x/y/"
    assert sink_location({"gcs.bucket.name": "g"}).uri == "gs://g/"
    assert sink_location({}).uri is None
    assert output_fields(AIVEN) == ("value",) and output_fields({**AIVEN, "format.output.fields": "key, offset"}) == (
        "key",
        "offset",
    )
