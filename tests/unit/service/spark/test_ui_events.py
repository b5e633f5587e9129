"""What the service posts for the Spark UI's "Lakegate" tab: the commit record as the JVM's
CommitEvent reads it (the real plugin, live and in the History Server:
tests/integration/test_spark_ui_tab.py); the plugin's place in spark.plugins: test_spark_conf.py."""

from __future__ import annotations

import json

from commit_service.spark import SparkHandle
from commit_service.spark.ui_events import SparkUiCommits, event_json
from lakegate_core.status import CommitRecord
from lakegate_core.types import PartitionOffsets, TopicPartition


def test_a_commit_as_the_event_the_plugin_reads() -> None:
    tp = TopicPartition("orders", 0)
    record = CommitRecord(
        "orders", 7, "c-1", 2, 30, PartitionOffsets({tp: 30}), vtts=None, duration_ms=12, committed_at_ms=5,
        spark_jobs=(3, 4), starts=PartitionOffsets({tp: 0}), in_place=1, rewritten=1, split=1,
    )  # fmt: skip
    event = json.loads(event_json(record, "delta"))
    assert event == {
        "table": "orders",
        "format": "delta",
        "version": 7,
        "commitId": "c-1",
        "files": 2,
        "records": 30,
        "offsets": '{"orders": {"0": 30}}',
        "starts": '{"orders": {"0": 0}}',
        "durationMs": 12,
        "vtts": -1,
        "committedAtMs": 5,
        "sparkJobs": [3, 4],
        "released": [],
        "inPlace": 1,
        "rewritten": 1,
        "split": 1,
    }


def test_nothing_is_posted_before_spark_runs() -> None:
    SparkUiCommits(SparkHandle(), {"orders": "delta"}).committed(CommitRecord("orders", 0, "c", 0, 0))
