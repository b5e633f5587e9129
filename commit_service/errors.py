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
    │   ├── UnauthorizedError                   401 unauthorized: no or unknown bearer token
    │   ├── ForbiddenError                      403 forbidden: the token's role may not do this
    │   ├── NotFoundError                       404 not_found: no such table / manifest
    │   ├── PayloadTooLargeError                413 payload_too_large: body above the limit
    │   ├── NotReadyError                       503 not_ready: Spark and the tables are loading
    │   └── KafkaUnavailableError               503 kafka_unavailable: the Connect group cannot be read
    └── CommitError                             503 commit_failed: nothing was committed, files kept
        ├── DeltaWriteError                     retryable: Delta failed for a reason that may pass
        ├── ConnectCheckError                   retryable: Connect's committed offsets cannot be read
        ├── OffsetsMovedError                   409 offsets_moved, retryable: another writer moved them
        └── DataFileError                       422 bad_data_file: a file is missing, resized, unreadable
            ├── DataFileUnavailableError        retryable: storage could not be asked this time
            └── SchemaMismatchError             its columns cannot join the table's schema
"""

from __future__ import annotations

from lakegate_core.errors import ConfigError, LakegateError, ProtocolError
from lakegate_core.types import PartitionOffsets

__all__ = [
    "BadRequestError",
    "CommitError",
    "ConfigError",
    "ConnectCheckError",
    "DataFileError",
    "DataFileUnavailableError",
    "DeltaWriteError",
    "ForbiddenError",
    "KafkaUnavailableError",
    "LakegateError",
    "NotFoundError",
    "NotReadyError",
    "OffsetsMovedError",
    "PayloadTooLargeError",
    "ProtocolError",
    "RequestError",
    "SchemaMismatchError",
    "SparkSetupError",
    "UnauthorizedError",
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


class PayloadTooLargeError(RequestError):
    status, code = 413, "payload_too_large"


class NotReadyError(RequestError):
    """Before every table's offsets are loaded, any answer would mislead."""

    status, code, retryable = 503, "not_ready", True


class KafkaUnavailableError(RequestError):
    """A lease claim needs the Connect group, and Kafka could not be asked this time."""

    status, code, retryable = 503, "kafka_unavailable", True


class CommitError(LakegateError):
    """A commit round failed; nothing was committed and the buffered files are kept."""

    status, code = 503, "commit_failed"

    def __init__(self, message: str) -> None:
        super().__init__(message, {"retryable": self.retryable})


class DeltaWriteError(CommitError):
    """Delta refused or failed the commit for a reason that may pass (I/O, a JVM hiccup)."""

    retryable = True


class ConnectCheckError(CommitError):
    """With fencing on, Connect's committed offsets could not be read before the commit."""

    retryable = True


class OffsetsMovedError(CommitError):
    """The table's committed offsets are not where the service thought (a concurrent writer)."""

    status, code, retryable = 409, "offsets_moved", True

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
    """Storage could not be asked about a data file this time (the same read may succeed)."""

    retryable = True


class SchemaMismatchError(DataFileError):
    """A file's schema is incompatible with the table's (a type change, a case-only rename)."""
