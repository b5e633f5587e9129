"""The sidecar's configuration, read by ``lakegate-sidecar`` at start.

YAML with ``${NAME}`` expansion and ``LAKEGATE_SIDECAR_<KEY>__<KEY>`` environment overrides (the
same rules as the service: :mod:`lakegate_core.configfile`). Every key is documented in
docs/sidecar.md.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lakegate_core import configfile
from lakegate_core.connect_group import KafkaSettings
from lakegate_core.errors import ConfigError
from lakegate_core.protocol import FileFormat
from sidecar.errors import SidecarConfigError

ENV_PREFIX = "LAKEGATE_SIDECAR_"


class PreflightMode(str, Enum):
    """``preflight``: what the sidecar does at start with the doctor's findings on its connectors
    (:mod:`sidecar.preflight`)."""

    REPORT = "report"  # log them, then run
    REQUIRE = "require"  # exit (code 3) on a blocking finding, or when the doctor cannot be asked
    OFF = "off"  # do not ask


@dataclass(frozen=True)
class ConnectConfig:
    url: str = "http://127.0.0.1:8083"
    connectors: tuple[str, ...] = ()
    connectors_regex: str | None = None
    # connector -> the file format it writes, where its config does not tell (it usually does:
    # format.output.type for Aiven's sink, format.class for Confluent's)
    formats: dict[str, FileFormat] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if bool(self.connectors) == bool(self.connectors_regex):
            raise SidecarConfigError("connect: set exactly one of connectors or connectors_regex")


@dataclass(frozen=True)
class StorageConfig:
    kind: str = "s3"  # s3 | local
    bucket: str | None = None
    prefix: str = ""
    endpoint: str | None = None
    region: str = "us-east-1"
    path_style: bool = True
    directory: str | None = None  # kind: local
    naming: Any = "aiven"  # aiven | confluent | {regex: "..."}

    def __post_init__(self) -> None:
        if self.kind not in ("s3", "local"):
            raise SidecarConfigError(f"storage.kind: {self.kind!r} must be s3 or local")
        if self.kind == "s3" and not self.bucket:
            raise SidecarConfigError("storage.bucket: required when storage.kind is s3")
        if self.kind == "local" and not self.directory:
            raise SidecarConfigError("storage.directory: required when storage.kind is local")


@dataclass(frozen=True)
class ServiceConfig:
    url: str
    token: str | None = None


@dataclass(frozen=True)
class HttpConfig:
    host: str = "0.0.0.0"
    port: int = 9464


@dataclass(frozen=True)
class SidecarConfig:
    """The whole ``sidecar.yaml``."""

    kafka: KafkaSettings
    storage: StorageConfig
    service: ServiceConfig
    connect: ConnectConfig = field(default_factory=lambda: ConnectConfig(connectors_regex=".*"))
    worker_id: str | None = None  # default: $POD_IP (or the Connect URL's host) + Connect's port
    id: str | None = None  # this sidecar's name in manifests; default: worker_id
    poll_interval_seconds: float = 5.0
    catch_up_poll_seconds: float = 0.25
    resend_after_seconds: float = 30.0
    max_files_per_manifest: int = 500
    http: HttpConfig = field(default_factory=HttpConfig)
    log_format: str = "text"
    preflight: PreflightMode = PreflightMode.REPORT

    def __post_init__(self) -> None:
        if self.poll_interval_seconds <= 0 or self.resend_after_seconds <= 0:
            raise SidecarConfigError("poll_interval_seconds and resend_after_seconds must be > 0")
        if not 0 < self.catch_up_poll_seconds <= self.poll_interval_seconds:
            raise SidecarConfigError("catch_up_poll_seconds must be > 0 and at most poll_interval_seconds")
        if not 1 <= self.max_files_per_manifest <= 10_000:
            raise SidecarConfigError("max_files_per_manifest: 1..10000")

    def effective_worker_id(self) -> str:
        if self.worker_id:
            return self.worker_id
        parts = urlsplit(self.connect.url)
        host = os.environ.get("POD_IP") or parts.hostname or "127.0.0.1"
        return f"{host}:{parts.port or 8083}"

    def loop_settings(self) -> LoopSettings:
        worker_id = self.effective_worker_id()
        return LoopSettings(
            worker_id=worker_id,
            sidecar_id=self.id or worker_id,
            connectors=self.connect.connectors,
            connectors_regex=self.connect.connectors_regex,
            formats=self.connect.formats,
            resend_after=self.resend_after_seconds,
            max_files=self.max_files_per_manifest,
            poll_interval=self.poll_interval_seconds,
            catch_up_poll=self.catch_up_poll_seconds,
        )


@dataclass(frozen=True)
class LoopSettings:
    """What one sidecar round needs to know of the config (read by :class:`sidecar.loop.SidecarLoop`)."""

    worker_id: str  # this Connect worker's host:port, as Connect's REST API names it
    sidecar_id: str  # this sidecar's name in manifests and lease claims
    connectors: tuple[str, ...] = ()
    connectors_regex: str | None = None
    formats: dict[str, FileFormat] = field(default_factory=dict)  # overrides of what a connector's config says
    resend_after: float = 30.0  # seconds before a file not yet in the table is sent again
    max_files: int = 500  # files per manifest
    poll_interval: float = 5.0  # seconds from one round's start to the next's
    catch_up_poll: float = 0.25  # ... while a due round waits for this sidecar's partitions to catch up


def load_config(path: Path | None, environ: dict[str, str] | None = None) -> SidecarConfig:
    if path is None:
        raise SidecarConfigError("--config is required (see docs/sidecar.md)")
    try:
        return configfile.load(SidecarConfig, path, env_prefix=ENV_PREFIX, environ=environ)
    except ConfigError as exc:
        raise SidecarConfigError(str(exc)) from None
