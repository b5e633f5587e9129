"""The service's own sections: ``server:`` (HTTP), ``auth:`` (tokens and roles), ``leases:``."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from commit_service.errors import ConfigError


class Role(str, Enum):
    READ = "read"  # may read status: the status page and the GET endpoints
    SIDECAR = "sidecar"  # may also POST manifests and lease claims
    ADMIN = "admin"  # may also force commits, run maintenance, retry and release dead letters


@dataclass(frozen=True)
class ServerConfig:
    """``server:``: the HTTP side; :func:`commit_service.serving.options.gunicorn_options` turns it into gunicorn's."""

    host: str = "0.0.0.0"
    port: int = 8080
    threads: int = 8
    max_request_bytes: int = 1 << 20
    max_connections: int = 1000  # open connections, idle and arriving ones included
    read_timeout_seconds: float = 15.0  # a request's header and body must arrive within this
    keepalive_seconds: int = 5  # an idle kept-alive connection is closed after this
    log_format: str = "text"  # text | json

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise ConfigError(f"server.port: {self.port} is not a TCP port")
        if self.threads < 1:
            raise ConfigError("server.threads: must be at least 1")
        if self.max_request_bytes < 1024:
            raise ConfigError("server.max_request_bytes: must be at least 1024")
        if self.max_connections <= self.threads:
            raise ConfigError("server.max_connections: must be more than server.threads")
        if self.read_timeout_seconds <= 0:
            raise ConfigError("server.read_timeout_seconds: must be positive")
        if self.keepalive_seconds < 0:
            raise ConfigError("server.keepalive_seconds: must be 0 (no keep-alive) or more")
        if self.log_format not in ("text", "json"):
            raise ConfigError("server.log_format: must be text or json")


@dataclass(frozen=True)
class TokenConfig:
    token: str
    role: Role = Role.SIDECAR
    sidecar_id: str | None = None  # set: the token may only send manifests and lease claims as this sidecar

    def __post_init__(self) -> None:
        if len(self.token) < 16:
            raise ConfigError("auth.tokens[].token: must be at least 16 characters")


@dataclass(frozen=True)
class AuthConfig:
    enabled: bool = True
    tokens: tuple[TokenConfig, ...] = ()
    session_hours: float = 12.0  # how long a status-page login lasts (the cookie; a restart ends it too)
    secure_cookie: bool = False  # mark the login cookie Secure: set it when the page is served over HTTPS

    def __post_init__(self) -> None:
        if self.enabled and not self.tokens:
            raise ConfigError("auth.tokens: at least one token is required while auth.enabled is true")
        if not 0 < self.session_hours <= 24 * 30:
            raise ConfigError("auth.session_hours: must be more than 0 and at most 720 (30 days)")


@dataclass(frozen=True)
class LeaseConfig:
    """``leases:``: how long a partition lease lives without its holder claiming it again."""

    ttl_seconds: float = 60.0

    def __post_init__(self) -> None:
        if self.ttl_seconds <= 0:
            raise ConfigError("leases.ttl_seconds: must be positive")
