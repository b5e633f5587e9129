"""The sidecar's preflight at start, against fakes of Connect's REST API and the service's doctor:
what it sends, and when it lets the sidecar run (the real ones: tests/e2e/test_doctor.py)."""

from __future__ import annotations

from typing import Any

import pytest

from lakegate_core.connect_group import KafkaSettings
from lakegate_core.doctor import Check, ConnectorSpec, DoctorFinding, DoctorReport, DoctorRequest, DoctorSeverity
from sidecar.config import ConnectConfig, PreflightMode, ServiceConfig, SidecarConfig, StorageConfig
from sidecar.errors import ServiceError
from sidecar.preflight import preflight


class FakeConnect:
    def __init__(self, names: list[str]) -> None:
        self.names = names

    def followed(self, names: tuple[str, ...], regex: str | None) -> list[str]:
        return self.names

    def spec(self, name: str) -> ConnectorSpec:
        return ConnectorSpec(name, {"topics": "t"}, "RUNNING")


class FakeDoctor:
    def __init__(self, findings: list[DoctorFinding] | None = None, fail: bool = False) -> None:
        self.findings, self.fail = findings or [], fail
        self.asked: list[DoctorRequest] = []

    def doctor(self, request: DoctorRequest) -> DoctorReport:
        self.asked.append(request)
        if self.fail:
            raise ServiceError("POST /v1/doctor: connection refused")
        blocked = any(f.severity is DoctorSeverity.BLOCKING for f in self.findings)
        return DoctorReport(not blocked, 0, 1, (), tuple(self.findings))


def config(mode: PreflightMode, **storage: Any) -> SidecarConfig:
    return SidecarConfig(
        kafka=KafkaSettings("k:9092"),
        storage=StorageConfig(bucket="lake", prefix="landing/", **storage),
        service=ServiceConfig("http://svc"),
        connect=ConnectConfig(connectors=("sink",)),
        id="sc-1",
        preflight=mode,
    )


BLOCK = DoctorFinding(Check.OFFSET_FIELD, DoctorSeverity.BLOCKING, "sink", "no offset", "why", "format.output.fields")


def test_the_preflight_sends_the_connectors_and_where_the_sidecar_lists() -> None:
    doctor = FakeDoctor()
    result = preflight(config(PreflightMode.REQUIRE, naming={"regex": "(?P<topic>.+)"}), FakeConnect(["sink"]), doctor)
    assert result.proceed
    [asked] = doctor.asked
    assert asked.sidecar == "sc-1" and [c.name for c in asked.connectors] == ["sink"]
    assert asked.listing is not None and (asked.listing.naming, asked.listing.bucket, asked.listing.prefix) == (
        "(?P<topic>.+)",
        "lake",
        "landing/",
    )


@pytest.mark.parametrize(
    ("mode", "doctor", "proceed"),
    [
        (PreflightMode.REQUIRE, FakeDoctor([BLOCK]), False),
        (PreflightMode.REPORT, FakeDoctor([BLOCK]), True),
        (PreflightMode.REQUIRE, FakeDoctor(fail=True), False),
        (PreflightMode.REPORT, FakeDoctor(fail=True), True),
        (PreflightMode.OFF, FakeDoctor([BLOCK]), True),
    ],
)
def test_only_require_stops_the_sidecar(mode: PreflightMode, doctor: FakeDoctor, proceed: bool) -> None:
    result = preflight(config(mode), FakeConnect(["sink"]), doctor)
    assert result.proceed is proceed, result.reason
    assert bool(doctor.asked) is (mode is not PreflightMode.OFF)


def test_nothing_to_check_yet_lets_it_run() -> None:
    doctor = FakeDoctor([BLOCK])
    assert preflight(config(PreflightMode.REQUIRE), FakeConnect([]), doctor).proceed and not doctor.asked
