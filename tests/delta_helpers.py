"""Helpers of the committer integration tests: one commit round on a committer, rounds committed
as the coordinator retries them, a checkpoint written the way the service writes it, delta-rs S3
options."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from commit_service.delta.committer import DeltaCommitter
from commit_service.domain.plan import PendingFile
from commit_service.domain.state import TableState
from commit_service.errors import DataFileError, TableLayoutError
from commit_service.ports import Committer
from commit_service.spark.thread_priority import jvm_peer_thread_id
from lakegate_core.status import CommitRecord, MaintenanceRecord
from lakegate_stack import s3 as s3mod


def commit_all(committer: Committer, state: TableState, files: list[PendingFile]) -> CommitRecord:
    """Offer ``files`` to ``state`` and make one forced commit of the plan, as the coordinator does."""
    for f in files:
        state.offer(f, now=0)
    plan = state.plan(now=0, force=True)
    assert plan is not None
    record = committer.commit(plan)
    state.committed_plan(plan, record.version, now=0)
    return record


def commit_rounds(
    committer: Committer, state: TableState, rounds: list[list[PendingFile]], refused: list[DataFileError] | None = None
) -> int:
    """Commit each round in turn; how many of them landed, counted to the last that made a commit
    (0: none made the table). A round refused because no record yet typed a partition's source
    column (tombstones alone, or the column null in every record, in a format without schemas)
    leaves the table to wait for a record that types it: its files stay buffered in ``state`` and
    go with the next round, as the coordinator's retry takes them (docs/design.md, "What is not
    built yet"). With ``refused`` given, a file refused (:class:`DataFileError`) is put there and
    ends the rounds. Any other refusal, or one after the table was made, is raised."""
    landed = 0
    for n, files in enumerate(rounds):
        try:
            commit_all(committer, state, files)
            landed = n + 1
        except TableLayoutError as exc:
            if landed or "which the table's files do not have" not in str(exc):
                raise
        except DataFileError as exc:
            if refused is None:
                raise
            refused.append(exc)
            break
    return landed


def checkpoint_in_thread(spark: Any, committer: DeltaCommitter) -> tuple[MaintenanceRecord, int]:
    """A checkpoint written as the table's checkpoint thread writes it (on a thread of its own,
    whose JVM peer it lowers), and the nice value of that peer afterwards; the thread, and its
    peer, end here, so the test's own thread keeps its priority."""
    with ThreadPoolExecutor(1) as thread:
        run = thread.submit(committer.checkpoint).result(timeout=120)
        nice = thread.submit(peer_nice, spark._jvm).result(timeout=30)
    return run, nice


def peer_nice(jvm: Any) -> int:
    """The nice value of the JVM thread serving this thread (read while both live)."""
    tid = jvm_peer_thread_id(jvm)
    assert tid is not None
    return os.getpriority(os.PRIO_PROCESS, tid)


def delta_rs_options(endpoint: str) -> dict[str, str]:
    """delta-rs ``storage_options`` for the local S3 server."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": s3mod.REGION,
        "AWS_ACCESS_KEY_ID": s3mod.ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": s3mod.SECRET_KEY,
    }
