"""``GET /v1/tables/{table}/audit``: builds one table's :class:`~commit_service.audit.auditor.Auditor`
from what the process holds (the table's committer's ledger, Connect's committed offsets through
the partitions' leases, the ``kafka`` section) and runs it on the asking thread.
"""

from __future__ import annotations

import logging

from commit_service.audit.auditor import Auditor, AuditRequest
from commit_service.audit.kafka import KafkaLog
from commit_service.errors import AuditFailedError, LakegateError
from commit_service.http.runtime import ServiceRuntime
from lakegate_core.audit import AuditReport
from lakegate_core.connect_group import GroupReadError

logger = logging.getLogger(__name__)

MAX_AUDIT_SAMPLE = 100_000  # records one audit may read back from Kafka


def audit_table(rt: ServiceRuntime, table: str, request: AuditRequest) -> AuditReport:
    """Audit ``table`` now; an :class:`AuditFailedError` when the table cannot be read."""
    tc = rt.coordinator.table(table)
    kafka = rt.config.kafka
    connect = None  # Connect's committed offsets, read from Kafka now (a sidecar's last word may be stale)
    fencing = rt.coordinator.fencing
    if fencing.groups is not None:
        try:
            connect = fencing.limits(tc.summary().offsets)
        except GroupReadError as exc:
            logger.info("table %s: the audit reads no Connect offsets: %s", table, exc)
    auditor = Auditor(
        table,
        tc.config.format.value,
        tc.committer.ledger(),
        upsert=tc.config.upsert is not None,
        connect_offsets=connect,
        kafka=(lambda: KafkaLog(kafka)) if kafka is not None else None,
    )
    try:
        report = auditor.audit(request)
    except LakegateError:
        raise
    except Exception as exc:  # storage or Spark: logged whole, answered short
        logger.exception("table %s: the audit failed", table)
        raise AuditFailedError(f"table {table}: the audit could not read the table ({type(exc).__name__})") from exc
    logger.info(
        "table %s audited at version %d: %s (%d findings, %d of %d sampled records equal)",
        table,
        report.version,
        "ok" if report.ok else "BREACH",
        len(report.findings),
        report.counts.matched,
        report.counts.sampled,
    )
    return report
