"""Every commit posted on Spark's listener bus, for the Spark UI's "Lakegate" tab.

A :class:`~commit_service.ports.CommitListener` (the coordinator tells it of each commit, on the
commit's thread): it hands the commit record, as JSON, to ``io.lakegate.spark.ui.CommitEvents``
(delta-log-store/), which posts it as a ``CommitEvent``; the plugin's listener keeps it in the
application's status store and the tab shows it, zero-copy commits (which run no Spark job, so the
Jobs page never sees them) included. With ``spark.eventLog.enabled`` the event log keeps the events
and a History Server with the same jar shows the tab after the service stopped.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from commit_service.errors import CommitError
from commit_service.spark.jvm_classes import java_class
from lakegate_core.status import CommitRecord

from .session import SparkHandle

logger = logging.getLogger(__name__)

POSTER = "io.lakegate.spark.ui.CommitEvents"


def event_json(record: CommitRecord, table_format: str) -> str:
    """The commit as the JVM's ``CommitEvent`` reads it (its public fields); pure."""
    return json.dumps(
        {
            "table": record.table,
            "format": table_format,
            "version": record.version,
            "commitId": record.commit_id,
            "files": record.files,
            "records": record.records,
            "offsets": json.dumps(record.offsets.to_json(), sort_keys=True),
            "starts": json.dumps(record.starts.to_json() if record.starts else {}, sort_keys=True),
            "durationMs": -1 if record.duration_ms is None else record.duration_ms,
            "vtts": -1 if record.vtts is None else record.vtts,
            "committedAtMs": record.committed_at_ms or 0,
            "sparkJobs": list(record.spark_jobs),
            "released": list(record.released or ()),
            "inPlace": -1 if record.in_place is None else record.in_place,
            "rewritten": -1 if record.rewritten is None else record.rewritten,
            "split": record.split or 0,
        }
    )


class SparkUiCommits:
    """Posts each commit to the running SparkSession's listener bus (nothing before Spark started)."""

    def __init__(self, spark: SparkHandle, formats: Mapping[str, str]) -> None:
        self.spark = spark
        self.formats = dict(formats)  # table -> delta | iceberg
        self._broken = False

    def committed(self, record: CommitRecord) -> None:
        session: Any = self.spark.session
        if session is None or self._broken:
            return
        try:
            jvm = session.sparkContext._jvm
            java_class(jvm, "io.lakegate.spark.ui.CommitEvents").post(
                session.sparkContext._jsc.sc(), event_json(record, self.formats.get(record.table, ""))
            )
        except Exception as exc:  # the tab is a view: a failure never touches the commit, said once
            self._broken = True
            logger.warning("the Spark UI's Lakegate tab gets no more commits: %s: %s", type(exc).__name__, exc)

    def failed(self, table: str, error: CommitError) -> None:
        """Failed rounds are not shown in the tab (the status page and the metrics count them)."""

    def rejected(self, reason: str) -> None:
        """Rejected manifests are not shown in the tab."""
