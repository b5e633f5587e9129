"""What a sink connector's config says of its files: the names it renders (Aiven's prefix naming,
its templates, Confluent's layout), read back by the sidecar's namings, and where it writes."""

from __future__ import annotations

import pytest

from lakegate_core.sink_config import object_key, output_fields, parse_name, sink_location

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


def test_confluents_layout_reads_back_with_its_preset() -> None:
    config = {"connector.class": "io.confluent.connect.s3.S3SinkConnector", "format.class": "x.ParquetFormat"}
    name = object_key(config, "my-topic", 3, 9)
    assert name.key == "topics/my-topic/partition=3/my-topic+3+9.parquet"
    assert parse_name("confluent", name.key) == ("my-topic", 3, 9)
    assert parse_name("aiven", "nope") is None
    assert output_fields(config) == ()


def test_where_a_sink_writes() -> None:
    assert sink_location({**AIVEN, "aws.s3.prefix": "landing/"}).uri == "s3a://b/landing/"
    assert sink_location({**AIVEN, "file.name.template": "x/y/{{topic}}"}).prefix == "x/y/"
    assert sink_location({"gcs.bucket.name": "g"}).uri == "gs://g/"
    assert sink_location({}).uri is None
    assert output_fields(AIVEN) == ("value",) and output_fields({**AIVEN, "format.output.fields": "key, offset"}) == (
        "key",
        "offset",
    )
