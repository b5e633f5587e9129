"""What a table's rounds tell the service log: a commit (its ``key=value`` line) and what it began
or left, a refused claim, a failure and its backoff, a file quarantined, where a start or a new
ledger epoch falls."""

from __future__ import annotations

import json
import logging

from commit_service.domain.failures import Decision
from commit_service.domain.plan import CommitPlan, PendingFile
from commit_service.errors import CommitError, ContentRangeError
from lakegate_core.status import CommitRecord, DeadLetter
from lakegate_core.types import TopicPartition

logger = logging.getLogger(__name__)


def committed(record: CommitRecord, plan: CommitPlan) -> None:
    logger.info(
        "commit table=%s version=%d commit_id=%s files=%d records=%d offsets=%s vtts=%s duration_ms=%s "
        "phases_ms=%s spark_jobs=%s reason=%s",
        record.table,
        record.version,
        record.commit_id,
        record.files,
        record.records,
        record.offsets.to_json(),
        record.vtts,
        record.duration_ms,
        json.dumps(record.phases_ms, separators=(",", ":")) if record.phases_ms else "-",
        list(record.spark_jobs),
        plan.reason,
    )
    if plan.begins:
        logger.info(
            "table %s: the ledger of %s begins here (tables[].start)",
            record.table,
            ", ".join(f"{tp} at {at} ({why})" for tp, at, why in plan.begins),
        )
    if plan.left:
        pace = len(plan.files) / max(record.duration_ms or 1, 1) * 1000
        logger.info(
            "table %s: round bounded by commit.max_files/max_bytes: %d buffered file(s) left for the next rounds "
            "(~%.0f s at this round's %.0f files/s)",
            record.table,
            plan.left,
            plan.left / pace,
            pace,
        )


def refused(table: str, exc: ContentRangeError, dropped: list[PendingFile]) -> None:
    logger.warning(
        "table %s: %s; dropped it and %d orphan(s) starting inside that span: %s",
        table,
        exc.message,
        len(dropped) - 1 if dropped else 0,
        [p.file.path for p in dropped[1:]],
    )


def failed(table: str, exc: CommitError, decision: Decision, cause: BaseException | None) -> None:
    if cause is not None and decision.first:  # the trace once per streak, not every retry
        logger.error("commit of table %s failed unexpectedly", table, exc_info=cause)
    logger.warning(
        "commit of table %s failed (%s, retry in %.1fs): %s",
        table,
        "transient" if exc.transient else "retryable" if exc.retryable else "bad file",
        decision.delay,
        exc.message,
    )


def quarantined(table: str, letter: DeadLetter, exc: CommitError) -> None:
    f = letter.file
    logger.error(
        "table %s: QUARANTINED %s (%s-%d offsets %d..%d) after %d attempt(s): %s; its partition waits at this gap "
        "until a correct file is sent, or an admin retries (POST /v1/dead-letters/%s/retry) or releases it",
        table,
        f.path,
        f.topic,
        f.partition,
        f.start_offset,
        f.end_offset,
        letter.attempts,
        exc.message,
        letter.id,
    )


def start_found(table: str, timestamp: str | None, found: dict[TopicPartition, int]) -> None:
    logger.info(
        "table %s: start.timestamp %s falls at %s",
        table,
        timestamp,
        ", ".join(f"{tp}@{at}" for tp, at in sorted(found.items())),
    )


def epoch_opened(
    table: str, topic: str, epoch: int, version: int, starts: dict[TopicPartition, int], dropped: int
) -> None:
    logger.warning(
        "table %s: topic %s begins ledger epoch %d at version %d (%s); %d buffered file(s) of the old epoch dropped",
        table,
        topic,
        epoch,
        version,
        ", ".join(f"{tp.partition}@{at}" for tp, at in starts.items()),
        dropped,
    )
