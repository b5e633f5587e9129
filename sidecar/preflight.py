"""The sidecar's preflight at start: its connectors, as Connect holds them, checked by the service's
doctor against what exactly once needs.

Run once by ``lakegate-sidecar`` before its first round (``preflight`` in sidecar.yaml). It reads
each followed connector's config and state from the worker's REST API, sends them with where the
sidecar lists files (``POST /v1/doctor``; the service keeps them for ``GET /v1/doctor``), and logs
every finding. With ``preflight: require`` a blocking finding (or a doctor that cannot be asked)
stops the sidecar before it sends anything: the analogue of Connect's
``exactly.once.support=required``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from lakegate_core.doctor import ConnectorSpec, DoctorReport, DoctorRequest, DoctorSeverity, Listing
from lakegate_core.errors import ProtocolError
from sidecar.config import PreflightMode, SidecarConfig
from sidecar.errors import SidecarError

logger = logging.getLogger(__name__)


class ConnectorConfigs(Protocol):
    """The worker's REST API as the preflight reads it (:class:`sidecar.connect.ConnectRest`)."""

    def followed(self, names: tuple[str, ...], regex: str | None) -> list[str]: ...

    def spec(self, name: str) -> ConnectorSpec: ...


class DoctorService(Protocol):
    """The service's doctor (:meth:`sidecar.client.ServiceClient.doctor`)."""

    def doctor(self, request: DoctorRequest) -> DoctorReport: ...


@dataclass(frozen=True)
class PreflightResult:
    """What the preflight decided: ``proceed`` unless ``require`` and exactly once cannot hold."""

    proceed: bool
    report: DoctorReport | None
    reason: str


def listing_of(config: SidecarConfig) -> Listing:
    """Where this sidecar lists the sink's files and how it reads their names."""
    st = config.storage
    naming = st.naming["regex"] if isinstance(st.naming, dict) else str(st.naming)
    return Listing(naming, st.bucket if st.kind == "s3" else None, st.prefix)


def preflight(config: SidecarConfig, connect: ConnectorConfigs, service: DoctorService) -> PreflightResult:
    """Ask the doctor about this sidecar's connectors and log what it says."""
    mode = config.preflight
    if mode is PreflightMode.OFF:
        return PreflightResult(True, None, "preflight off")
    settings = config.loop_settings()
    try:
        names = connect.followed(settings.connectors, settings.connectors_regex)
        if not names:
            return PreflightResult(True, None, "no connector to check yet")
        specs = tuple(connect.spec(n) for n in names)
        report = service.doctor(DoctorRequest(specs, listing_of(config), settings.sidecar_id))
    except (SidecarError, ProtocolError, KeyError, ValueError, TypeError) as exc:  # unreachable, or an odd answer
        reason = f"the doctor could not be asked: {type(exc).__name__}: {exc}"
        logger.warning("preflight: %s", reason)
        return PreflightResult(mode is not PreflightMode.REQUIRE, None, reason)
    for f in report.findings:
        level = {DoctorSeverity.BLOCKING: logging.ERROR, DoctorSeverity.WARNING: logging.WARNING}.get(
            f.severity, logging.INFO
        )
        logger.log(
            level, "preflight %s %s: %s: %s (%s; change %s)", f.severity.value, f.connector, f.check.value,
            f.message, f.why, f.key or "-",
        )  # fmt: skip
    blocking = report.blocking()
    reason = (
        f"{len(blocking)} blocking finding(s): exactly once cannot hold as configured"
        if blocking
        else f"{len(report.connectors)} connector(s) ready for exactly once"
    )
    logger.log(logging.ERROR if blocking else logging.INFO, "preflight: %s", reason)
    return PreflightResult(not blocking or mode is not PreflightMode.REQUIRE, report, reason)


def report_connectors(
    config: SidecarConfig, connect: ConnectorConfigs, service: DoctorService, names: list[str]
) -> None:
    """Send ``names`` (connectors whose state changed) to the service's doctor, which remembers
    them for its report, the status page and the metrics; its findings on them are logged. Errors
    propagate (the loop logs them and reports again next round)."""
    report = service.doctor(
        DoctorRequest(tuple(connect.spec(n) for n in names), listing_of(config), config.loop_settings().sidecar_id)
    )
    for f in report.findings:
        if f.check.value == "connector_state":
            logger.warning("doctor %s %s: %s (%s)", f.severity.value, f.connector, f.message, f.why)
