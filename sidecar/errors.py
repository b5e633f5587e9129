"""The sidecar's errors, grown from the shared base (:mod:`lakegate_core.errors`).

LakegateError (lakegate_core)
└── SidecarError
    ├── SidecarConfigError     bad configuration (also a ConfigError); fatal at start (exit 2)
    ├── ServiceError           retryable: the commit service could not be reached, or answered
    │   │                      a connection error, timeout, 409, 429 or 5xx
    │   └── ServiceRefusedError    the service refused the request itself (another 4xx): not retried
    └── SourceError            retryable: Connect REST, Kafka or storage failed for this round
"""

from __future__ import annotations

from lakegate_core.errors import ConfigError, LakegateError


class SidecarError(LakegateError):
    """Base of every error the sidecar raises on purpose."""


class SidecarConfigError(SidecarError, ConfigError):
    """The configuration is invalid; the message names the key."""


class ServiceError(SidecarError):
    """The commit service could not be reached, or answered an error that may pass."""

    retryable = True

    def __init__(self, message: str, *, remote_status: int | None = None) -> None:
        super().__init__(message)
        self.remote_status = remote_status  # the HTTP status the service answered, if any


class ServiceRefusedError(ServiceError):
    """The service refused the request itself (a 4xx other than 409/429): sending it again won't help."""

    retryable = False


class SourceError(SidecarError):
    """Connect, Kafka or storage could not be read this round; the loop tries again next round."""

    retryable = True
