"""The S3 sink plugin under faults and in a group: the test-only ``lakegate.test.fault.dir``
crash-after-upload switch (an orphan object overlapping the rewrite), config validation as Aiven
validates, and two workers in one group sharing the tasks."""

from __future__ import annotations

import gzip
import re
import time
from collections.abc import Callable
from pathlib import Path

import requests
from kafka import TopicPartition

from lakegate_stack.connect import SINK_CLASS, ConnectWorker
from lakegate_stack.kafka import KafkaBroker
from lakegate_stack.s3 import S3Server
from tests.integration.sink_helpers import jsonl, minimal_config, objects, record_value, sink_config
from tests.kafka_helpers import create_topic, end_offsets, produce_json, wait_committed


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
