"""Helpers of the Delta integration tests: one commit round on a committer, delta-rs S3 options."""

from __future__ import annotations

from commit_service.delta_commit import DeltaCommitter
from commit_service.state import PendingFile, TableState
from lakegate_core.status import CommitRecord
from lakegate_stack import s3 as s3mod


def commit_all(committer: DeltaCommitter, state: TableState, files: list[PendingFile]) -> CommitRecord:
    """Offer ``files`` to ``state`` and make one forced commit of the plan, as the coordinator does."""
    for f in files:
        state.offer(f, now=0)
    plan = state.plan(now=0, force=True)
    assert plan is not None
    record = committer.commit(plan)
    state.committed_plan(plan, record.version, now=0)
    return record


def delta_rs_options(endpoint: str) -> dict[str, str]:
    """delta-rs ``storage_options`` for the local S3 server."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": s3mod.REGION,
        "AWS_ACCESS_KEY_ID": s3mod.ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": s3mod.SECRET_KEY,
    }
