"""The sidecar's errors, one tree.

    SidecarError
    ├── SidecarConfigError   bad configuration; fatal at start (exit code 2)
    ├── ServiceError         the commit service answered an error or could not be reached
    │                        (``retryable`` for connection errors, timeouts, 5xx, 409, 503)
    └── SourceError          Connect REST, Kafka or storage failed for this round (retryable)
"""

from __future__ import annotations


class SidecarError(Exception):
    """Base of every error the sidecar raises on purpose."""

    retryable: bool = False


class SidecarConfigError(SidecarError):
    """The configuration is invalid; the message names the key."""


class ServiceError(SidecarError):
    """The commit service refused a call or could not be reached."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable


class SourceError(SidecarError):
    """Connect, Kafka or storage could not be read this round; the loop tries again next round."""

    retryable = True
