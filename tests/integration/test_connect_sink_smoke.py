"""Kafka -> Connect (the S3 sink plugin) -> S3 server, against Aiven's S3 sink's observable behaviour.

Every test produces records, runs the sink through the Connect REST API, waits (with a deadline)
for the ``connect-<connector>`` group to commit the log end, deletes the connector and reads every
object back. Covered: every record exactly once and named by its start offset; Aiven's defaults
(JSONL, gzip, ``{"value": ...}`` envelope, ``.gz`` names); ``aws.s3.prefix`` naming (20-digit
offsets, no extension, template ignored); custom templates (no extension); the snappy / zstd /
none codecs and Parquet page codecs; ``format.output.envelope=false``; multipart upload (ETags
and part sizes); config validation; the test-only ``lakegate.test.fault.dir`` crash-after-upload
switch (an orphan object overlapping the rewrite).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import os
import re
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cramjam
import pyarrow.parquet as pq
import requests
from kafka import TopicPartition

from commit_service.domain import csv_records
from commit_service.domain.content import decode_text
from lakegate_core.protocol import CsvLayout
from lakegate_stack import s3 as s3mod
from lakegate_stack.connect import SINK_CLASS, ConnectWorker, s3_sink_config
from lakegate_stack.kafka import KafkaBroker
from lakegate_stack.s3 import S3Server
from tests.kafka_helpers import create_topic, end_offsets, produce_json, wait_committed

PER_PARTITION = 1000
SMALL_PER_PARTITION = 200  # for the naming / encoding tests: enough for several polls, quick to check
DEFAULT_PART_SIZE = 5 * 1024 * 1024  # aws.s3.part.size.bytes default (S3's minimum part size)

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
SNAPPY_JAVA_MAGIC = b"\x82SNAPPY\x00"  # snappy-java's SnappyOutputStream, as Aiven's sink writes it
PARQUET_MAGIC = b"PAR1"
MULTIPART_ETAG = re.compile(r'^"([0-9a-f]{32})-(\d+)"$')


# --- helpers (this file only) ----------------------------------------------------------------


def sink_config(topic: str, bucket: str, s3: S3Server, **extra: str) -> dict[str, str]:
    """The harness's Parquet/snappy config, without ``aws.s3.prefix``: Aiven's sink rejects an empty
    prefix, and any set prefix switches to the legacy padded naming."""
    config = s3_sink_config(
        [topic],
        bucket,
        s3.endpoint,
        s3mod.ACCESS_KEY,
        s3mod.SECRET_KEY,
        **{"format.output.fields": "key,value,offset,timestamp", "consumer.override.max.poll.records": "250", **extra},
    )
    return config


def minimal_config(
    topic: str, bucket: str, s3: S3Server, extra: dict[str, str] | None = None, *, tasks: int = 2
) -> dict[str, str]:
    """Only what a sink cannot default (where to write, how to read); everything else is the
    plugin's default unless given in ``extra`` (the callers set ``format.output.type``: Aiven's
    default, csv, needs a bytes value, see the CSV test)."""
    return {
        "connector.class": SINK_CLASS,
        "topics": topic,
        "tasks.max": str(tasks),
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "aws.access.key.id": s3mod.ACCESS_KEY,
        "aws.secret.access.key": s3mod.SECRET_KEY,
        "aws.s3.bucket.name": bucket,
        "aws.s3.endpoint": s3.endpoint,
        "aws.s3.region": s3mod.REGION,
        "consumer.override.max.poll.records": "100",
        **(extra or {}),
    }


def record_value(i: int) -> dict[str, object]:
    return {"id": i, "amount": i * 1.5, "note": f"n{i}"}


def produce_spread(kafka: KafkaBroker, topic: str, partitions: int, per_partition: int) -> None:
    """Record ``i`` goes to partition ``i % partitions`` at offset ``i // partitions``."""
    create_topic(kafka.bootstrap_servers, topic, partitions)
    records = [(i % partitions, f"k{i}", record_value(i)) for i in range(partitions * per_partition)]
    assert produce_json(kafka.bootstrap_servers, topic, records) == len(records)


def run_sinks(
    kafka: KafkaBroker, worker: ConnectWorker, sinks: dict[str, tuple[dict[str, str], dict[TopicPartition, int]]]
) -> None:
    """Create every connector, wait until each group committed its expected offsets, delete them."""
    client = worker.client()
    try:
        for name, (config, _) in sinks.items():
            client.put_connector(name, config)
        for name, (config, _) in sinks.items():
            client.wait_running(name, tasks=int(config["tasks.max"]))
        for name, (_, expected) in sinks.items():
            wait_committed(kafka.bootstrap_servers, f"connect-{name}", expected, timeout=90)
    finally:
        for name in sinks:
            try:
                client.delete_connector(name)
            except Exception:  # noqa: BLE001 - best effort clean-up; the assertion above matters
                pass


def objects(s3: S3Server, bucket: str) -> dict[str, tuple[bytes, str]]:
    """Every object of ``bucket``: key -> (content, ETag as S3 returns it, quotes included)."""
    client = s3.client()
    out: dict[str, tuple[bytes, str]] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for entry in page.get("Contents", []):
            obj = client.get_object(Bucket=bucket, Key=entry["Key"])
            out[entry["Key"]] = (obj["Body"].read(), obj["ETag"])
    assert out, f"no objects in {bucket}"
    return out


def multipart_etag(content: bytes, part_size: int) -> str:
    """The ETag S3 gives an object completed from parts of ``part_size`` bytes (the last holds the
    rest): the MD5 of the concatenated part MD5s, then ``-<number of parts>``."""
    parts = [content[i : i + part_size] for i in range(0, max(len(content), 1), part_size)]
    digest = hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest()
    return f'"{digest}-{len(parts)}"'


def assert_multipart(key: str, content: bytes, etag: str, part_size: int = DEFAULT_PART_SIZE) -> int:
    """The object was written by a multipart upload cut at ``part_size``; returns its part count."""
    match = MULTIPART_ETAG.match(etag)
    assert match, f"{key}: ETag {etag} is not a multipart upload's (a PutObject ETag has no '-<parts>')"
    assert int(match[2]) == max(1, math.ceil(len(content) / part_size)), (key, etag, len(content))
    assert etag == multipart_etag(content, part_size), f"{key}: parts are not cut every {part_size} bytes"
    return int(match[2])


def jsonl(text: bytes) -> list[Any]:
    lines = text.decode().split("\n")
    assert lines[-1] != "", "no newline after the last record (Aiven's writer)"
    return [json.loads(line) for line in lines]


def assert_once_in_order(files: list[tuple[int, int, list[int]]], partitions: int, per_partition: int) -> None:
    """``files`` = (partition, start offset from the name, record ids in file order): each file holds
    consecutive records of its partition from its start offset, and together every record once."""
    offsets: dict[int, list[int]] = defaultdict(list)
    for partition, start, ids in files:
        assert ids, f"empty file for partition {partition} at {start}"
        assert all(i % partitions == partition for i in ids), f"file {partition}/{start} holds another partition"
        file_offsets = [i // partitions for i in ids]
        assert file_offsets == list(range(start, start + len(ids))), f"file {partition}/{start}: {file_offsets[:5]}"
        offsets[partition].extend(file_offsets)
    assert sorted(offsets) == list(range(partitions))
    for partition, seen in offsets.items():
        assert sorted(seen) == list(range(per_partition)), f"partition {partition} offsets are not each once"


def committed_end(topic: str, partitions: int, per_partition: int) -> dict[TopicPartition, int]:
    return {TopicPartition(topic, p): per_partition for p in range(partitions)}


# --- tests -----------------------------------------------------------------------------------


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
    """Four sinks on one topic at once: jsonl+zstd (``.zst``, one zstd frame); parquet+zstd
    (``.zst``, ZSTD pages, one nested ``value`` column); parquet with no compression set (Aiven
    quirk: ``.gz`` name, uncompressed pages); jsonl with ``format.output.envelope=false`` (bare
    values)."""
    topic, per_partition = "codecs-orders", SMALL_PER_PARTITION
    produce_spread(kafka_broker, topic, 1, per_partition)
    cases = {
        "codec-jsonl-zstd": {"format.output.type": "jsonl", "file.compression.type": "zstd"},
        "codec-parquet-zstd": {"format.output.type": "parquet", "file.compression.type": "zstd"},
        "codec-parquet-unset": {"format.output.type": "parquet"},
        "codec-jsonl-bare": {"format.output.type": "jsonl", "format.output.envelope": "false"},
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


def test_fault_dir_crash_after_upload_leaves_an_orphan_overlapping_the_rewrite(
    kafka_broker: KafkaBroker, connect_worker: ConnectWorker, s3_server: S3Server, tmp_path: Path
) -> None:
    """Test-only ``lakegate.test.fault.dir``: the task that claims ``crash-after-upload`` uploads its
    buffer as two objects split at the middle record, then fails the flush; Connect rewinds to the
    committed offset, the task stays RUNNING, and the re-delivered records are written as one object
    from the committed offset (overwriting the first half). The second half stays behind: an orphan
    whose offsets overlap the rewritten object, while the other objects hold every offset once."""
    topic, bucket, name = "fault-orders", "landing-fault", "fault-sink"
    total, batch = 600, 100
    s3_server.create_bucket(bucket)
    create_topic(kafka_broker.bootstrap_servers, topic, 1)
    fault_dir = tmp_path / "fault"
    fault_dir.mkdir()
    fault_file, claimed_log = fault_dir / "crash-after-upload", fault_dir / "claimed.log"
    tp = TopicPartition(topic, 0)
    extra = {
        "format.output.type": "jsonl",
        "format.output.fields": "value,offset",
        "lakegate.test.fault.dir": str(fault_dir),
    }
    client = connect_worker.client()
    produced = 0

    def produce_batch() -> None:  # record i at offset i (one partition)
        nonlocal produced
        records = [(0, f"k{i}", record_value(i)) for i in range(produced, produced + batch)]
        assert produce_json(kafka_broker.bootstrap_servers, topic, records) == batch
        produced += batch

    try:
        client.put_connector(name, minimal_config(topic, bucket, s3_server, extra, tasks=1))
        client.wait_running(name, tasks=1)
        # Two normal rounds (key set, no fault file): several puts and commits before the crash.
        for _ in range(2):
            produce_batch()
            wait_committed(kafka_broker.bootstrap_servers, f"connect-{name}", {tp: produced}, timeout=60)
        committed_before_crash = produced
        fault_file.touch()
        produce_batch()
        deadline = time.monotonic() + 60
        while not (claimed_log.is_file() and claimed_log.read_text().endswith("\n")):
            assert time.monotonic() < deadline, f"no task claimed {fault_file} within 60s"
            time.sleep(0.2)
        assert not fault_file.exists(), "the claim deletes the fault file"
        while produced < total:  # the rewind's rewrite, then more normal rounds
            wait_committed(kafka_broker.bootstrap_servers, f"connect-{name}", {tp: produced}, timeout=60)
            produce_batch()
        wait_committed(kafka_broker.bootstrap_servers, f"connect-{name}", {tp: total}, timeout=60)
        assert end_offsets(kafka_broker.bootstrap_servers, [tp]) == {tp: total}
        status = client.status(name)
        assert [t["state"] for t in status["tasks"]] == ["RUNNING"], f"the simulated crash fails a flush only: {status}"
    finally:
        client.delete_connector(name)

    # (a) claimed.log names the split: taken from the committed offset, before the next batch existed.
    lines = claimed_log.read_text().splitlines()
    assert len(lines) == 1, lines
    match = re.fullmatch(rf"{re.escape(topic)}-0 (\d+) (\d+) (\d+)", lines[0])
    assert match, lines[0]
    first, split, last = (int(g) for g in match.groups())
    assert committed_before_crash == first < split <= last < committed_before_crash + batch, lines[0]

    # Every object holds consecutive offsets from the one in its name (record i at offset i).
    pattern = re.compile(rf"^{re.escape(topic)}-0-(\d+)\.gz$")
    ranges: dict[int, list[int]] = {}
    for key, (content, _) in objects(s3_server, bucket).items():
        key_match = pattern.match(key)
        assert key_match, f"object {key!r} is not named <topic>-0-<startOffset>.gz"
        start, rows = int(key_match[1]), jsonl(gzip.decompress(content))
        offsets = [line["offset"] for line in rows]
        assert offsets == list(range(start, start + len(offsets))), f"{key}: {offsets[:5]}..."
        assert [line["value"] for line in rows] == [record_value(o) for o in offsets], key
        ranges[start] = offsets

    # (b) the orphan: an object whose start lies strictly inside another object's offset range.
    orphans = {
        start
        for start in ranges
        if any(other < start <= offsets[-1] for other, offsets in ranges.items() if other != start)
    }
    assert orphans == {split}, f"orphans {sorted(orphans)} of {sorted(ranges)}; claimed {lines[0]}"
    assert ranges[split] == list(range(split, last + 1)), "the orphan is the second half as uploaded"
    assert ranges[first][0] == first and ranges[first][-1] >= last, "the rewrite covers the whole first upload"

    # (c) the non-orphan objects hold every offset 0..total-1, once.
    kept = sorted(o for start, offsets in ranges.items() if start not in orphans for o in offsets)
    assert kept == list(range(total))

    log = (connect_worker.workdir / f"{connect_worker.name}.log").read_text(errors="replace")
    assert "lakegate.test.fault.dir: simulated crash after upload" in log
    assert "Offset commit failed, rewinding to last committed offsets" in log


def test_config_validation_matches_aiven(connect_worker: ConnectWorker, s3_server: S3Server) -> None:
    """Connect's validate endpoint reports Aiven's config errors per key."""

    def errors(**extra: str) -> dict[str, list[str]]:
        config = {"name": "validate-sink", **minimal_config("validate-topic", "validate-bucket", s3_server, extra)}
        resp = requests.put(
            f"{connect_worker.url}/connector-plugins/{SINK_CLASS}/config/validate", json=config, timeout=30
        )
        resp.raise_for_status()
        return {c["value"]["name"]: c["value"]["errors"] for c in resp.json()["configs"] if c["value"]["errors"]}

    assert errors() == {}
    assert errors(**{"format.output.envelope": "false", "format.output.fields": "value"}) == {}
    unwrapped_pair = errors(**{"format.output.envelope": "false", "format.output.fields": "key,value"})
    assert any("must contain only one field" in e for e in unwrapped_pair.get("format.output.envelope", [])), (
        unwrapped_pair
    )
    assert "aws.s3.prefix" in errors(**{"aws.s3.prefix": ""}), "Aiven rejects an empty prefix"
    assert "aws.s3.part.size.bytes" in errors(**{"aws.s3.part.size.bytes": "1048576"})
    assert "file.compression.type" in errors(**{"file.compression.type": "lz4"})
    for codec in ("none", "gzip", "snappy", "zstd"):
        assert errors(**{"file.compression.type": codec, "format.output.type": "jsonl"}) == {}, codec
        assert errors(**{"file.compression.type": codec, "format.output.type": "parquet"}) == {}, codec


def test_two_workers_in_one_group_share_the_tasks(
    kafka_broker: KafkaBroker,
    connect_worker: ConnectWorker,
    s3_server: S3Server,
    extra_connect_worker: Callable[[str], ConnectWorker],
) -> None:
    topic, bucket, name = "smoke-spread", "landing-spread", "spread-sink"
    s3_server.create_bucket(bucket)
    create_topic(kafka_broker.bootstrap_servers, topic, 4)
    second = extra_connect_worker("connect-2")
    client = connect_worker.client()
    client.put_connector(name, sink_config(topic, bucket, s3_server))
    client.wait_running(name, tasks=2)
    expected = {connect_worker.worker_id, second.worker_id}
    deadline = time.monotonic() + 60  # incremental rebalancing may settle in a second round
    while time.monotonic() < deadline:
        status = client.status(name)
        if {t["worker_id"] for t in status["tasks"] if t["state"] == "RUNNING"} == expected:
            break
        time.sleep(1)
    assert {t["worker_id"] for t in status["tasks"]} == expected, status
    client.delete_connector(name)
