"""The base of Lakegate's error tree, shared by the service and the sidecar.

Every error Lakegate raises on purpose is a :class:`LakegateError`. Each class says, as class
attributes fixed at definition, what the HTTP layer answers (``status``, ``code``) and whether the
same attempt may succeed later (``retryable``); nothing changes them after construction (a
subclass per case instead). The service's tree (``commit_service.errors``) and the sidecar's
(``sidecar.errors``) grow from here:

    LakegateError                 500 internal, not retryable
    ├── ConfigError               bad or missing configuration; fatal at start (exit code 2)
    └── ProtocolError             400 bad_request: a message does not match the wire model
"""

from __future__ import annotations

from typing import Any, ClassVar


class LakegateError(Exception):
    """Base of every error Lakegate raises on purpose; ``details`` go to the JSON error body."""

    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal"
    retryable: ClassVar[bool] = False

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = dict(details or {})

    def headers(self) -> dict[str, str]:
        """HTTP headers the answer to this error carries besides its JSON body (e.g. ``Retry-After``)."""
        return {}


class ConfigError(LakegateError):
    """The configuration is invalid; the message names the key and what is wrong with it."""

    code = "config_error"


class ProtocolError(LakegateError, ValueError):
    """A message does not match the protocol; ``field`` is the dotted path of the culprit.

    Raised by the ``from_dict`` of every wire type; the service answers it with a 400 naming the
    field.
    """

    status, code = 400, "bad_request"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}", {"field": field})
        self.field = field
        self.reason = message
