"""Kafka -> Connect (the S3 sink plugin) -> S3 server, against Aiven's S3 sink's observable behaviour:
what it writes. Every test produces records, runs the sink through the Connect REST API, waits
(with a deadline) for the ``connect-<connector>`` group to commit the log end, deletes the
connector and reads every object back. Covered: every record exactly once and named by its start
offset; Aiven's defaults (JSONL, gzip, ``{"value": ...}`` envelope, ``.gz`` names);
``aws.s3.prefix`` naming; custom templates; headerless CSV; the codecs and Parquet page codecs;
``format.output.envelope=false``; multipart upload (ETags and part sizes)."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
from collections import defaultdict

import cramjam
import pyarrow.parquet as pq
from kafka import TopicPartition

from commit_service.domain import csv_records
from commit_service.domain.content import decode_text
from lakegate_core.protocol import CsvLayout
from lakegate_stack import s3 as s3mod
from lakegate_stack.connect import SINK_CLASS, ConnectWorker, confluent_sink_config
from lakegate_stack.kafka import KafkaBroker
from lakegate_stack.s3 import S3Server
from tests.integration.sink_helpers import (
    DEFAULT_PART_SIZE,
    GZIP_MAGIC,
    PARQUET_MAGIC,
    PER_PARTITION,
    SMALL_PER_PARTITION,
    SNAPPY_JAVA_MAGIC,
    ZSTD_MAGIC,
    assert_multipart,
    assert_once_in_order,
    committed_end,
    jsonl,
    minimal_config,
    objects,
    produce_spread,
    record_value,
    run_sinks,
    sink_config,
)
from tests.kafka_helpers import create_topic, produce_json, wait_committed


def test_sink_writes_every_record_once_named_by_start_offset(
    kafka_broker: KafkaBroker, connect_worker: ConnectWorker, s3_server: S3Server
) -> None:
    topic, bucket, name = "smoke-orders", "landing-smoke", "smoke-sink"
    s3_server.create_bucket(bucket)
    create_topic(kafka_broker.bootstrap_servers, topic, 3)
    records = [(i % 3, f"k{i}", {"id": i, "amount": i * 1.5, "note": f"n{i}"}) for i in range(3 * PER_PARTITION)]
    assert produce_json(kafka_broker.bootstrap_servers, topic, records) == 3 * PER_PARTITION

    client = connect_worker.client()
    assert SINK_CLASS in client.plugins()
    client.put_connector(name, sink_config(topic, bucket, s3_server))
    client.wait_running(name, tasks=2)
    wait_committed(
        kafka_broker.bootstrap_servers,
        f"connect-{name}",
        {TopicPartition(topic, p): PER_PARTITION for p in range(3)},
        timeout=120,
    )
    client.delete_connector(name)

    s3 = s3_server.client()
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    offsets: dict[int, list[int]] = defaultdict(list)
    ids: list[int] = []
    # No prefix and no template: Aiven's default template plus the compression's extension,
    # whatever the format (Parquet included).
    pattern = re.compile(rf"^{re.escape(topic)}-(\d+)-(\d+)\.snappy$")
    for key in keys:
        match = pattern.match(key)
        assert match, f"object {key!r} is not named <topic>-<partition>-<startOffset>.snappy"
        partition, start = int(match[1]), int(match[2])
        table = pq.read_table(io.BytesIO(s3.get_object(Bucket=bucket, Key=key)["Body"].read()))
        assert {"key", "value", "offset", "timestamp"} <= set(table.column_names)
        file_offsets = table.column("offset").to_pylist()
        assert file_offsets == list(range(start, start + len(file_offsets))), key
        offsets[partition].extend(file_offsets)
        values = table.column("value").to_pylist()
        ids.extend(v["id"] for v in values)
        assert all(v["id"] % 3 == partition for v in values), f"{key} holds records of another partition"

    assert sorted(offsets) == [0, 1, 2]
    for partition, seen in offsets.items():
        assert sorted(seen) == list(range(PER_PARTITION)), f"partition {partition} offsets are not 0..999 once"
    assert sorted(ids) == list(range(3 * PER_PARTITION))


def test_aiven_defaults_write_enveloped_gzip_jsonl_named_dot_gz(
    kafka_broker: KafkaBroker, connect_worker: ConnectWorker, s3_server: S3Server
) -> None:
    """No compression, fields, envelope, prefix or template given: gzip, ``{"value": ...}`` lines,
    ``<topic>-<partition>-<offset>.gz``, one multipart upload per object."""
    topic, bucket, name = "defaults-orders", "landing-defaults", "defaults-sink"
    s3_server.create_bucket(bucket)
    produce_spread(kafka_broker, topic, 3, SMALL_PER_PARTITION)
    config = minimal_config(topic, bucket, s3_server, {"format.output.type": "jsonl"})
    run_sinks(kafka_broker, connect_worker, {name: (config, committed_end(topic, 3, SMALL_PER_PARTITION))})

    pattern = re.compile(rf"^{re.escape(topic)}-(\d+)-(\d+)\.gz$")
    files = []
    for key, (content, etag) in objects(s3_server, bucket).items():
        match = pattern.match(key)
        assert match, f"object {key!r} is not named <topic>-<partition>-<startOffset>.gz"
        assert content[:2] == GZIP_MAGIC, f"{key} is not gzip"
        lines = jsonl(gzip.decompress(content))
        for line in lines:
            assert set(line) == {"value"}, f"{key}: {line} is not enveloped as {{'value': ...}}"
            assert line["value"] == record_value(line["value"]["id"]), line
        files.append((int(match[1]), int(match[2]), [line["value"]["id"] for line in lines]))
        assert assert_multipart(key, content, etag) == 1
    assert_once_in_order(files, 3, SMALL_PER_PARTITION)


def test_prefix_names_objects_with_padded_offsets_and_the_extension(
    kafka_broker: KafkaBroker, connect_worker: ConnectWorker, s3_server: S3Server
) -> None:
    """``aws.s3.prefix`` set: ``<prefix><topic>-<partition>-<20-digit offset>.gz`` (Aiven appends the
    compression's extension in prefix mode too), and ``file.name.template`` is ignored."""
    topic, bucket, name, prefix = "prefixed-orders", "landing-prefixed", "prefixed-sink", "lake/orders/"
    s3_server.create_bucket(bucket)
    produce_spread(kafka_broker, topic, 3, SMALL_PER_PARTITION)
    config = minimal_config(
        topic,
        bucket,
        s3_server,
        {
            "format.output.type": "jsonl",
            "aws.s3.prefix": prefix,
            "file.name.template": "ignored/{{topic}}-{{partition}}-{{start_offset}}.json",
        },
    )
    run_sinks(kafka_broker, connect_worker, {name: (config, committed_end(topic, 3, SMALL_PER_PARTITION))})

    pattern = re.compile(rf"^{re.escape(prefix + topic)}-(\d+)-(\d{{20}})\.gz$")
    files = []
    for key, (content, etag) in objects(s3_server, bucket).items():
        match = pattern.match(key)
        assert match, f"object {key!r} is not named <prefix><topic>-<partition>-<20-digit startOffset>.gz"
        assert content[:2] == GZIP_MAGIC, f"{key} is not gzip (Aiven's default)"
        lines = jsonl(gzip.decompress(content))
        assert all(set(line) == {"value"} for line in lines), key
        files.append((int(match[1]), int(match[2]), [line["value"]["id"] for line in lines]))
        assert_multipart(key, content, etag)
    assert_once_in_order(files, 3, SMALL_PER_PARTITION)


def test_custom_template_is_used_as_is_without_extension(
    kafka_broker: KafkaBroker, connect_worker: ConnectWorker, s3_server: S3Server
) -> None:
    """A custom ``file.name.template`` is rendered as is: no ``.snappy`` appended; the content is
    snappy-java's stream (as Aiven's sink writes it), which the service's decoder reads."""
    topic, bucket, name = "templated-orders", "landing-templated", "templated-sink"
    s3_server.create_bucket(bucket)
    produce_spread(kafka_broker, topic, 3, SMALL_PER_PARTITION)
    config = minimal_config(
        topic,
        bucket,
        s3_server,
        {
            "format.output.type": "jsonl",
            "file.compression.type": "snappy",
            "file.name.template": "custom/{{topic}}/p{{partition:padding=true}}/{{start_offset:padding=true}}.jsonl",
        },
    )
    run_sinks(kafka_broker, connect_worker, {name: (config, committed_end(topic, 3, SMALL_PER_PARTITION))})

    pattern = re.compile(rf"^custom/{re.escape(topic)}/p(\d{{10}})/(\d{{20}})\.jsonl$")
    files = []
    for key, (content, etag) in objects(s3_server, bucket).items():
        match = pattern.match(key)
        assert match, f"object {key!r} does not follow the template exactly (no extension may be added)"
        assert content.startswith(SNAPPY_JAVA_MAGIC), f"{key} is not snappy-java's stream"
        lines = jsonl(decode_text(content))
        assert all(set(line) == {"value"} for line in lines), key
        files.append((int(match[1]), int(match[2]), [line["value"]["id"] for line in lines]))
        assert_multipart(key, content, etag)
    assert_once_in_order(files, 3, SMALL_PER_PARTITION)


def test_csv_is_aivens_default_headerless_with_base64_key_and_value(
    kafka_broker: KafkaBroker, connect_worker: ConnectWorker, s3_server: S3Server
) -> None:
    """``format.output.type`` unset is csv (Aiven's default): no header, the fields in order, key and
    value base64, the timestamp in epoch millis, no newline after the last record; the service's
    CSV reader (``csv_records``) reads back every record's key, value and offset."""
    topic, bucket, name = "csv-orders", "landing-csv", "csv-sink"
    s3_server.create_bucket(bucket)
    produce_spread(kafka_broker, topic, 2, SMALL_PER_PARTITION)
    fields = ("key", "value", "offset", "timestamp", "headers")
    config = minimal_config(
        topic,
        bucket,
        s3_server,
        {
            "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
            "format.output.fields": ",".join(fields),
            "file.compression.type": "none",
        },
    )
    del config["value.converter.schemas.enable"]
    run_sinks(kafka_broker, connect_worker, {name: (config, committed_end(topic, 2, SMALL_PER_PARTITION))})

    pattern = re.compile(rf"^{re.escape(topic)}-(\d+)-(\d+)$")
    files = []
    for key, (content, _) in objects(s3_server, bucket).items():
        match = pattern.match(key)
        assert match, f"object {key!r} is not named <topic>-<partition>-<startOffset> (compression none)"
        text = content.decode("ascii")
        assert not text.endswith("\n") and not text.startswith("key"), "no header, no trailing newline"
        records = csv_records.records(text.split("\n"), CsvLayout(fields))
        start = int(match[2])
        for n, r in enumerate(records):
            i = r["value"]["id"]
            assert r["value"] == record_value(i) and r["key"] == f"k{i}" and r["offset"] == start + n, r
            assert isinstance(r["timestamp"], int) and r["timestamp"] > 1_600_000_000_000 and r["headers"] is None
        files.append((int(match[1]), start, [r["value"]["id"] for r in records]))
    assert_once_in_order(files, 2, SMALL_PER_PARTITION)


def test_codecs_formats_and_unwrapped_values(
    kafka_broker: KafkaBroker, connect_worker: ConnectWorker, s3_server: S3Server
) -> None:
    """Five sinks on one topic at once: jsonl+zstd (``.zst``, one zstd frame); parquet+zstd
    (``.zst``, ZSTD pages, one nested ``value`` column); parquet with no compression set (Aiven
    quirk: ``.gz`` name, uncompressed pages); jsonl with ``format.output.envelope=false`` (bare
    values); json (one array of the enveloped records per file, gzip)."""
    topic, per_partition = "codecs-orders", SMALL_PER_PARTITION
    produce_spread(kafka_broker, topic, 1, per_partition)
    cases = {
        "codec-jsonl-zstd": {"format.output.type": "jsonl", "file.compression.type": "zstd"},
        "codec-parquet-zstd": {"format.output.type": "parquet", "file.compression.type": "zstd"},
        "codec-parquet-unset": {"format.output.type": "parquet"},
        "codec-jsonl-bare": {"format.output.type": "jsonl", "format.output.envelope": "false"},
        "codec-json-array": {"format.output.type": "json"},
    }
    sinks = {}
    for name, extra in cases.items():
        s3_server.create_bucket(name)
        sinks[name] = (minimal_config(topic, name, s3_server, extra, tasks=1), committed_end(topic, 1, per_partition))
    run_sinks(kafka_broker, connect_worker, sinks)

    extension = {"codec-jsonl-zstd": ".zst", "codec-parquet-zstd": ".zst", "codec-parquet-unset": ".gz"}
    for name in cases:
        pattern = re.compile(rf"^{re.escape(topic)}-0-(\d+){re.escape(extension.get(name, '.gz'))}$")
        files = []
        for key, (content, etag) in objects(s3_server, name).items():
            match = pattern.match(key)
            assert match, f"{name}: object {key!r} is not named <topic>-0-<startOffset>{extension.get(name, '.gz')}"
            assert_multipart(key, content, etag)
            if name == "codec-jsonl-zstd":
                assert content[:4] == ZSTD_MAGIC, f"{key} is not a zstd frame"
                ids = [line["value"]["id"] for line in jsonl(bytes(cramjam.zstd.decompress(content)))]
            elif name == "codec-json-array":  # Aiven's framing: "[\n" records joined by ",\n" "\n]"
                text = gzip.decompress(content).decode()
                assert text.startswith("[\n{") and text.endswith("}\n]") and "},\n{" in text, text[:80]
                ids = [e["value"]["id"] for e in json.loads(text)]
            elif name == "codec-jsonl-bare":
                assert content[:2] == GZIP_MAGIC, key
                lines = jsonl(gzip.decompress(content))
                assert all(line == record_value(line["id"]) for line in lines), f"{key}: values are not bare"
                ids = [line["id"] for line in lines]
            else:
                assert content[:4] == PARQUET_MAGIC and content[-4:] == PARQUET_MAGIC, f"{key} is not Parquet"
                parquet = pq.ParquetFile(io.BytesIO(content))
                assert parquet.schema_arrow.names == ["value"], f"{key}: {parquet.schema_arrow}"
                assert parquet.schema_arrow.field("value").nullable
                codecs = {
                    parquet.metadata.row_group(g).column(c).compression
                    for g in range(parquet.metadata.num_row_groups)
                    for c in range(parquet.metadata.num_columns)
                }
                assert codecs == {"ZSTD" if name == "codec-parquet-zstd" else "UNCOMPRESSED"}, (key, codecs)
                values = parquet.read().column("value").to_pylist()
                assert all(v == record_value(v["id"]) for v in values), key
                ids = [v["id"] for v in values]
            files.append((0, int(match[1]), ids))
        assert_once_in_order(files, 1, per_partition)


def test_confluents_json_and_parquet_formats_in_its_layouts(
    kafka_broker: KafkaBroker, connect_worker: ConnectWorker, s3_server: S3Server
) -> None:
    """With ``format.class`` the stand-in writes as Confluent's S3 sink: ``JsonFormat`` gzip (the
    value alone, every line ended by a newline, ``.json.gz``) cut every ``flush.size`` records with
    a 6-digit start offset, and ``ParquetFormat`` (the value's fields as columns, snappy pages,
    ``.snappy.parquet``) under ``HourlyPartitioner``'s wall-clock directories below its own
    ``topics.dir``."""
    topic, per_partition = "confluent-orders", SMALL_PER_PARTITION
    produce_spread(kafka_broker, topic, 1, per_partition)
    cases = {
        "confluent-json": {
            "format_class": "json.JsonFormat",
            "s3.compression.type": "gzip",
            "flush.size": "7",
            "filename.offset.zero.pad.width": "6",
        },
        "confluent-parquet": {
            "format_class": "parquet.ParquetFormat",
            "topics.dir": "raw/in",
            "partitioner.class": "io.confluent.connect.storage.partitioner.HourlyPartitioner",
        },
    }
    sinks = {}
    for name, extra in cases.items():
        s3_server.create_bucket(name)
        config = confluent_sink_config([topic], name, s3_server.endpoint, s3mod.ACCESS_KEY, s3mod.SECRET_KEY, **extra)
        sinks[name] = ({**config, "value.converter.schemas.enable": "false"}, committed_end(topic, 1, per_partition))
    run_sinks(kafka_broker, connect_worker, sinks)

    names = {
        "confluent-json": rf"topics/{topic}/partition=0/{topic}\+0\+(\d{{6}})\.json\.gz",
        "confluent-parquet": rf"raw/in/{topic}/year=\d{{4}}/month=\d\d/day=\d\d/hour=\d\d/{topic}\+0\+(\d{{10}})\.snappy\.parquet",
    }
    for name, pattern in names.items():
        files = []
        for key, (content, _) in objects(s3_server, name).items():
            match = re.fullmatch(pattern, key)
            assert match, f"{name}: {key!r} is not in Confluent's layout"
            if name == "confluent-json":
                text = gzip.decompress(content).decode()
                assert text.endswith("}\n"), "Confluent's JsonFormat ends every line, the last one too"
                values = [json.loads(line) for line in text[:-1].split("\n")]
                assert len(values) <= 7, f"{key}: flush.size=7"
            else:
                parquet = pq.ParquetFile(io.BytesIO(content))
                assert parquet.schema_arrow.names == ["amount", "id", "note"], "the value's fields as columns"
                assert parquet.metadata.row_group(0).column(0).compression == "SNAPPY"
                values = parquet.read().to_pylist()
            assert all(v == record_value(v["id"]) for v in values), f"{key}: the value alone"
            files.append((0, int(match[1]), [v["id"] for v in values]))
        assert_once_in_order(files, 1, per_partition)


def test_objects_are_multipart_uploads_cut_at_the_part_size(
    kafka_broker: KafkaBroker, connect_worker: ConnectWorker, s3_server: S3Server
) -> None:
    """~11 MiB in one object: 3 parts at the default 5 MiB part size, 2 at 6 MiB; the ETag proves
    where S3 saw the part boundaries, and the content round-trips in order."""
    topic, records, blob = "multipart-blobs", 22, 512 * 1024
    create_topic(kafka_broker.bootstrap_servers, topic, 1)
    # Random hex: incompressible enough that sizes are predictable; files are not compressed anyway.
    values = [(0, f"k{i}", {"id": i, "blob": os.urandom(blob // 2).hex()}) for i in range(records)]
    assert produce_json(kafka_broker.bootstrap_servers, topic, values) == records
    one_fetch = {  # all records in the first poll, so each sink writes a single object
        "consumer.override.max.partition.fetch.bytes": str(64 * 1024 * 1024),
        "consumer.override.fetch.max.bytes": str(64 * 1024 * 1024),
        "consumer.override.max.poll.records": "1000",
    }
    part_sizes = {"multipart-default": DEFAULT_PART_SIZE, "multipart-6mib": 6 * 1024 * 1024}
    sinks = {}
    for name, part_size in part_sizes.items():
        s3_server.create_bucket(name)
        extra = {"format.output.type": "jsonl", "file.compression.type": "none", **one_fetch}
        if part_size != DEFAULT_PART_SIZE:
            extra["aws.s3.part.size.bytes"] = str(part_size)
        sinks[name] = (minimal_config(topic, name, s3_server, extra, tasks=1), {TopicPartition(topic, 0): records})
    run_sinks(kafka_broker, connect_worker, sinks)

    for name, part_size in part_sizes.items():
        stored = objects(s3_server, name)
        assert list(stored) == [f"{topic}-0-0"], f"{name}: expected one object, got {list(stored)}"
        content, etag = stored[f"{topic}-0-0"]
        assert 10 * 1024 * 1024 < len(content) < 12 * 1024 * 1024, len(content)
        parts = assert_multipart(f"{name}/{topic}-0-0", content, etag, part_size)
        assert parts == (3 if part_size == DEFAULT_PART_SIZE else 2), (name, etag)
        lines = jsonl(content)
        assert [line["value"]["id"] for line in lines] == list(range(records))
        assert [line["value"]["blob"] for line in lines] == [v["blob"] for _, _, v in values]
