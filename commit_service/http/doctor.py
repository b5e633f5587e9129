"""``GET /v1/doctor`` and ``POST /v1/doctor``: builds the service's one
:class:`~commit_service.doctor.doctor.Doctor` from what the process holds (the config, the tables'
committed offsets, a reader of the Connect groups when there is a ``kafka`` section) and runs it
on the asking thread.
"""

from __future__ import annotations

import threading

from commit_service.coordination.coordinator import Coordinator
from commit_service.doctor.doctor import Doctor
from commit_service.errors import NotReadyError
from commit_service.http.runtime import ServiceRuntime
from lakegate_core.connect_group import GroupReader
from lakegate_core.doctor import DoctorReport, DoctorRequest
from lakegate_core.types import PartitionOffsets

_built = threading.Lock()


def committed_offsets(coordinator: Coordinator) -> PartitionOffsets:
    """Every table's committed next offsets, merged (a topic feeds one table)."""
    merged: dict[tuple[str, int], int] = {}
    for name in coordinator.tables:
        merged.update(coordinator.offsets(name).items())
    return PartitionOffsets(merged.items())


def doctor_of(rt: ServiceRuntime) -> Doctor:
    """The runtime's doctor, built on first use."""
    with _built:
        if rt.doctor is None:
            kafka = rt.config.kafka
            groups = GroupReader(kafka.admin_factory("lakegate-doctor")) if kafka is not None else None
            rt.doctor = Doctor(
                rt.config,
                lambda: committed_offsets(rt.coordinator),
                groups.committed if groups is not None else None,
            )
        return rt.doctor


def examine(
    rt: ServiceRuntime, request: DoctorRequest | None, remember: bool, only: frozenset[str] = frozenset()
) -> DoctorReport:
    """Check ``request``'s connectors (None: those the sidecars reported; ``only``: those of these
    names); ``remember`` keeps them for ``GET /v1/doctor`` (a sidecar's report)."""
    if not rt.ready:
        raise NotReadyError("the service is starting; ask the doctor when /readyz is ready")
    doctor = doctor_of(rt)
    if request is not None and remember:
        doctor.remember(request)
    return doctor.examine(request, only)
