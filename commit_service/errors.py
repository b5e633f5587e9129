"""The commit service's errors, one tree; the HTTP layer maps :class:`RequestError` to JSON 4xx.

    LakegateError
    ├── ConfigError            bad or missing configuration; fatal at start (exit code 2)
    ├── SparkSetupError        the Spark/Delta runtime cannot start (jars missing, JVM failed); fatal
    ├── RequestError           a client's request is wrong; answered with ``status`` and ``code``
    │   ├── BadRequestError        400: malformed body, a field fails validation
    │   ├── UnauthorizedError      401: no or unknown bearer token
    │   ├── ForbiddenError         403: the token's role may not do this
    │   ├── NotFoundError          404: no such table / manifest
    │   └── PayloadTooLargeError   413: body above server.max_request_bytes
    └── CommitError            a Delta commit did not happen; the buffered files stay for a retry
        ├── OffsetsMovedError      retryable: the table's offsets moved (another writer); re-read them
        ├── DataFileError          a data file is missing, of another size, or unreadable
        └── SchemaMismatchError    a file's columns cannot join the table's schema; fatal for that file

``retryable`` says whether the same attempt may succeed later; the coordinator retries those with
backoff and reports the others.
"""

from __future__ import annotations

from typing import Any


class LakegateError(Exception):
    """Base of every error the commit service raises on purpose."""

    retryable: bool = False


class ConfigError(LakegateError):
    """The configuration is invalid; the message names the key and what is wrong with it."""


class SparkSetupError(LakegateError):
    """Spark with Delta could not be set up; the message says what to run or fix."""


class RequestError(LakegateError):
    """A client error, answered as ``{"error": {"code", "message", "details"}}`` with ``status``."""

    status = 400
    code = "bad_request"

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


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


class CommitError(LakegateError):
    """A commit round failed; nothing was committed and the buffered files are kept."""


class OffsetsMovedError(CommitError):
    """The table's committed offsets are not where the service thought (a concurrent writer)."""

    retryable = True

    def __init__(self, message: str, version: int, offsets: dict[tuple[str, int], int]) -> None:
        super().__init__(message)
        self.version = version
        self.offsets = offsets


class DataFileError(CommitError):
    """A data file cannot be committed as described; ``path`` names it."""

    def __init__(self, path: str, message: str, *, retryable: bool = False) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.retryable = retryable


class SchemaMismatchError(CommitError):
    """A file's schema is incompatible with the table's (a type change, a non-nullable addition)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
