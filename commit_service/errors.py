"""The commit service's errors: one tree, each class carrying its HTTP answer and retryability.

The base (:class:`~lakegate_core.errors.LakegateError`: ``status``, ``code``, ``retryable`` as
class attributes, ``details`` for the JSON body) is shared with the sidecar. The HTTP layer answers
every one of them as ``{"error": {"code", "message", "details"}}`` with its ``status``; the
coordinator retries the ``retryable`` commit errors with backoff and reports the others.

    LakegateError (lakegate_core)               500 internal
    ├── ConfigError (lakegate_core)             bad configuration; fatal at start (exit code 2)
    ├── ProtocolError (lakegate_core)           400 bad_request: a body does not match the wire model
    ├── SparkSetupError                         the Spark/Delta runtime cannot start; fatal
    ├── RequestError                            a client's request cannot be served as asked
    │   ├── BadRequestError                     400 bad_request: a field fails validation
    │   ├── MalformedRequestError               400 malformed_request: not HTTP gunicorn can parse
    │   ├── UnauthorizedError                   401 unauthorized: no or unknown bearer token
    │   ├── ForbiddenError                      403 forbidden: the token's role may not do this
    │   ├── NotFoundError                       404 not_found: no such table / manifest
    │   ├── RequestTimeoutError                 408 request_timeout: the request did not arrive in time
    │   ├── ConflictError                       409 conflict: a reused manifest_id, a release not next
    │   ├── PayloadTooLargeError                413 payload_too_large: body above the limit
    │   ├── TooManyPendingError                 429 too_many_pending, retryable: the table's buffer is full
    │   ├── HeadersTooLargeError                431 headers_too_large: request line or header above the limit
    │   ├── UnsupportedTransferCodingError      501 unsupported_transfer_coding: a Transfer-Encoding not served
    │   ├── NotReadyError                       503 not_ready: Spark and the tables are loading
    │   ├── KafkaUnavailableError               503 kafka_unavailable: the Connect group cannot be read
    │   └── AuditFailedError                    503 audit_failed, retryable: the table could not be read for an audit
    └── CommitError                             503 commit_failed: nothing was committed, files kept
        ├── TableWriteError                     retryable: Delta failed (persisting: a file is quarantined)
        │   └── TableUnavailableError           retryable, transient: the table's storage is unreachable
        ├── UnexpectedCommitError               retryable: anything else the commit path raised
        ├── RoundShortfallError                 retryable: what would be written lacks rows or columns
        ├── ConnectCheckError                   retryable, transient: Connect's offsets cannot be read
        ├── OffsetsMovedError                   409 offsets_moved, retryable, transient: another writer
        └── DataFileError                       422 bad_data_file: a file is missing, resized, unreadable
            ├── DataFileUnavailableError        retryable: storage could not be asked this time
            ├── ContentRangeError               422 content_range: its content runs past its claimed range
            └── SchemaMismatchError             its columns cannot join the table's schema

Internal exceptions (:data:`INTERNAL`) are outside the tree on purpose: each is raised by a pure
or low-level module and caught by its one caller, which answers with a class of the tree (or
takes another route); none reaches a client, a log line as itself, or the coordinator.
``tests/unit/service/test_errors.py`` fails on an exception class that is in neither.
"""

from __future__ import annotations

from typing import ClassVar

from lakegate_core.errors import ConfigError, LakegateError, ProtocolError
from lakegate_core.protocol import OffsetSpan
from lakegate_core.types import PartitionOffsets

# Internal exception -> where it is caught and what it becomes there.
INTERNAL = {
    "commit_service.domain.partitioning.PartitionSpecError": "config: ConfigError naming partition_by; a round: the file is split",
    "commit_service.iceberg.partitions.UnknownSpecError": "iceberg.append: TableLayoutError naming the spec's field",
    "commit_service.domain.paths.UnsafePathError": "config: ConfigError; intake: BadRequestError; storage: DataFileError",
    "commit_service.domain.content.ContentError": "delta.convert: DataFileError (the file is unreadable)",
    "commit_service.domain.json_infer.LineError": "delta.convert: DataFileError naming the line",
    "commit_service.storage.json_types._Unmapped": "storage.json_types: None, the records typed in Python",
    "commit_service.domain.avro_files.AvroFileError": "round.convert: DataFileError (the file is no Avro container)",
    "commit_service.domain.round_schema.Conflict": "round_schema.reconcile: the file refused (SchemaMismatchError)",
    "commit_service.domain.upsert.ChangeError": "round.upsert_round: DataFileError naming the file",
    "commit_service.delta.log.LogReadError": "delta.deferred / delta.committer: the offsets read through Delta instead",
    "commit_service.audit.kafka.KafkaReadError": "audit.auditor: the Kafka checks reported as not run",
    "commit_service.doctor.kafka.DoctorKafkaError": "doctor.doctor: the Kafka checks reported as not checked",
    "commit_service.storage.arrow_tables.ArrowReadError": "round.avro_reads / round.parquet_reads: Spark's file source reads the files instead",
    "commit_service.storage.prefetch.EarlyReadFailed": "a cache marker, never raised: the commit reads the file again",
}

__all__ = [
    "BadRequestError",
    "CommitError",
    "ConfigError",
    "ConflictError",
    "ConnectCheckError",
    "DataFileError",
    "DataFileUnavailableError",
    "TableUnavailableError",
    "TableWriteError",
    "ForbiddenError",
    "HeadersTooLargeError",
    "KafkaUnavailableError",
    "LakegateError",
    "MalformedRequestError",
    "NotFoundError",
    "NotReadyError",
    "OffsetsMovedError",
    "PayloadTooLargeError",
    "ProtocolError",
    "RequestError",
    "RequestTimeoutError",
    "RoundShortfallError",
    "SchemaMismatchError",
    "SparkSetupError",
    "TooManyPendingError",
    "UnauthorizedError",
    "UnexpectedCommitError",
    "UnsupportedTransferCodingError",
]


class SparkSetupError(LakegateError):
    """Spark with Delta could not be set up; the message says what to run or fix."""

    code = "spark_setup"


class RequestError(LakegateError):
    """A client's request cannot be served as asked."""

    status, code = 400, "bad_request"


class BadRequestError(RequestError):
    status, code = 400, "bad_request"


class UnauthorizedError(RequestError):
    status, code = 401, "unauthorized"


class ForbiddenError(RequestError):
    status, code = 403, "forbidden"


class NotFoundError(RequestError):
    status, code = 404, "not_found"


class MalformedRequestError(RequestError):
    """The bytes on the connection are not an HTTP request gunicorn can parse (raised by the worker)."""

    status, code = 400, "malformed_request"


class RequestTimeoutError(RequestError):
    """A request's header or body did not arrive within ``server.read_timeout_seconds``."""

    status, code = 408, "request_timeout"


class PayloadTooLargeError(RequestError):
    status, code = 413, "payload_too_large"


class HeadersTooLargeError(RequestError):
    """The request line or header is larger than the server reads (gunicorn's ``limit_request_*``)."""

    status, code = 431, "headers_too_large"


class UnsupportedTransferCodingError(RequestError):
    """A ``Transfer-Encoding`` other than ``chunked`` (gunicorn serves no other)."""

    status, code = 501, "unsupported_transfer_coding"


class NotReadyError(RequestError):
    """Before every table's offsets are loaded, any answer would mislead."""

    status, code, retryable = 503, "not_ready", True


class KafkaUnavailableError(RequestError):
    """A lease claim needs the Connect group, and Kafka could not be asked this time."""

    status, code, retryable = 503, "kafka_unavailable", True


class AuditFailedError(RequestError):
    """An audit could not read the table (storage or Spark failed); nothing was judged."""

    status, code, retryable = 503, "audit_failed", True


class CommitError(LakegateError):
    """A commit round failed; nothing was committed and the buffered files are kept.

    ``transient`` errors (an outage, a concurrent writer) are only retried; the others count
    towards quarantining a file (see :mod:`commit_service.domain.failures`)."""

    status, code = 503, "commit_failed"
    transient: ClassVar[bool] = False

    def __init__(self, message: str) -> None:
        super().__init__(message, {"retryable": self.retryable})


class TableWriteError(CommitError):
    """Delta refused or failed the commit (mapped from the JVM exception's class); retried with
    backoff, and if it persists the plan is narrowed until one file is found to blame and
    quarantined (:mod:`commit_service.domain.failures`)."""

    retryable = True


class TableUnavailableError(TableWriteError):
    """Delta could not reach the table's storage (an ``IOException`` or SDK client error): an
    outage, never blamed on a file; retried with backoff until it passes."""

    transient = True


class TableLayoutError(CommitError):
    """The table is laid out as Lakegate's config does not say (partitioned otherwise than its
    ``partition_by``, or at all where that is empty), or the round's columns cannot be partitioned
    so (a transform of a column of the wrong type): nothing is committed, since a file added
    without its partition's values would be hidden from every query that filters on them. Never
    blamed on a file: retried with backoff until the config or the table changes."""

    status, code, retryable, transient = 409, "table_layout", True, True


class RoundShortfallError(CommitError):
    """The round guard (:mod:`commit_service.domain.round_guard`) found that what would be written holds
    fewer rows or columns than the round's files: nothing is committed. Treated like a persistent
    :class:`TableWriteError` (the plan is narrowed until one file is to blame, then quarantined)."""

    code = "round_shortfall"
    retryable = True


class UnexpectedCommitError(CommitError):
    """The commit path raised something no class above describes (a bug, a py4j surprise):
    treated like a persistent :class:`TableWriteError`; its trace is logged once per streak."""

    retryable = True


class ConflictError(RequestError):
    """The request contradicts what the service already holds (a ``manifest_id`` reused with
    other files, a release of a range that is not next)."""

    status, code = 409, "conflict"


class TooManyPendingError(RequestError):
    """A table's buffer is at ``commit.max_pending_files`` / ``max_pending_bytes``: the sidecar
    backs off and sends again (the answer carries ``Retry-After``)."""

    status, code, retryable = 429, "too_many_pending", True

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message, {"retry_after_seconds": retry_after})
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


class ConnectCheckError(CommitError):
    """With fencing on, Connect's committed offsets could not be read before the commit."""

    retryable, transient = True, True


class OffsetsMovedError(CommitError):
    """The table's committed offsets are not where the service thought (a concurrent writer)."""

    status, code, retryable, transient = 409, "offsets_moved", True, True

    def __init__(self, message: str, version: int, offsets: PartitionOffsets) -> None:
        super().__init__(message)
        self.version = version
        self.offsets = offsets


class DataFileError(CommitError):
    """A data file cannot be committed as described; ``path`` names it."""

    status, code = 422, "bad_data_file"

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.details["path"] = path


class DataFileUnavailableError(DataFileError):
    """Storage could not be asked about a data file this time (the same read may succeed); the
    file is quarantined only if this lasts ``commit.quarantine_after_seconds``."""

    retryable = True


class SchemaMismatchError(DataFileError):
    """A file's schema is incompatible with the table's (a type change, a case-only rename)."""


class ContentRangeError(DataFileError):
    """A file's content holds offsets past the end of the range it was sent with (the sink's
    ``offset`` field says so): the range was derived from the next file's name, and that file is
    an orphan of a re-written range. Not quarantined: the file leaves the buffer, the files
    starting inside ``holds`` are refused as orphans, and the sender claims ``holds`` instead
    (:mod:`commit_service.domain.coverage`)."""

    code = "content_range"

    def __init__(self, path: str, holds: OffsetSpan, start: int, end: int) -> None:
        super().__init__(path, f"its content holds offsets {holds}, past the claimed range {start}..{end}")
        self.holds = holds
        self.details["holds"] = {"first": holds.first, "last": holds.last}
