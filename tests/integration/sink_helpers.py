"""Helpers of the Connect sink tests (``test_connect_sink_*.py``): the sink's configs, producing
records, running the connector to the log end, reading its objects back and checking them."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import defaultdict
from typing import Any

from kafka import TopicPartition

from lakegate_stack import s3 as s3mod
from lakegate_stack.connect import SINK_CLASS, ConnectWorker, s3_sink_config
from lakegate_stack.kafka import KafkaBroker
from lakegate_stack.s3 import S3Server
from tests.kafka_helpers import create_topic, produce_json, wait_committed

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
