"""Fencing (partition leases checked against Kafka, and the cap at Connect's committed offsets).

Owned by the :class:`~commit_service.coordination.coordinator.Coordinator`; on only when the service config
has a ``kafka`` section. Three duties, all against the Connect group ``connect-<connector>`` read
through the injected :class:`~lakegate_core.connect_group.GroupReader`:

- :meth:`Fencing.claim` grants a lease on a partition only if Kafka shows it on one of the
  claimant's tasks on the claimant's worker host (``POST /v1/leases``);
- :meth:`Fencing.check` lets a file in only from the current holder at the current epoch, so a
  zombie sidecar (its worker lost the partition) gets nothing committed;
- :meth:`Fencing.limits` reads Connect's committed offsets so a commit never goes past them.

Without a ``kafka`` section every claim is granted and files need no epoch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from commit_service.domain.leases import Lease, LeaseTable
from commit_service.errors import KafkaUnavailableError
from commit_service.ports import ConnectGroups
from lakegate_core.connect_group import Assignment, GroupReadError
from lakegate_core.protocol import DataFile, LeaseGrant, LeaseRequest
from lakegate_core.types import PartitionOffsets, TopicPartition


class Fencing:
    """The service's leases and its Kafka checks; thread-safe (one lock for the lease table)."""

    def __init__(
        self, groups: ConnectGroups | None, clock: Callable[[], float] = time.time, ttl_seconds: float = 60.0
    ) -> None:
        self.groups = groups
        self.leases = LeaseTable()
        self.clock = clock
        self.ttl_seconds = ttl_seconds
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.groups is not None

    def claim(self, request: LeaseRequest) -> tuple[list[LeaseGrant], set[TopicPartition]]:
        """A grant or a refusal per claimed partition, and every partition leased now."""
        held: dict[TopicPartition, Assignment] | None = None
        if self.groups is not None:
            try:
                held = self.groups.assignments(request.connector)
            except GroupReadError as exc:
                raise KafkaUnavailableError(f"cannot check the Connect group in Kafka: {exc}") from exc
        host = request.sidecar.worker.rsplit(":", 1)[0]
        grants: list[LeaseGrant] = []
        with self._lock:
            for tp in request.partitions:
                a = None if held is None else held.get(tp)
                if held is not None and (a is None or a.task not in request.tasks or a.host != host):
                    where = "unassigned" if a is None else f"task {a.task} on {a.host}"
                    reason = (
                        f"Kafka shows {tp} of connect-{request.connector} {where}, "
                        f"not on {host} tasks {sorted(request.tasks)}"
                    )
                    grants.append(LeaseGrant(tp.topic, tp.partition, False, reason=reason))
                    continue
                now = self.clock()
                lease = self.leases.grant(tp, request.sidecar.id, request.sidecar.worker, request.connector, now)
                grants.append(LeaseGrant(tp.topic, tp.partition, True, lease.epoch))
            return grants, self.leases.live(self.clock(), self.ttl_seconds)

    def live(self) -> set[TopicPartition]:
        """The partitions with a live lease (renewed within the TTL): what commit rounds wait for."""
        with self._lock:
            return self.leases.live(self.clock(), self.ttl_seconds)

    def leases_now(self) -> dict[TopicPartition, Lease]:
        """Every partition's lease (renewed or lapsed), for the status page."""
        with self._lock:
            return self.leases.all()

    def check(self, file: DataFile, sidecar_id: str) -> str | None:
        """None if ``sidecar_id`` may send ``file`` now; else why not (always None when off)."""
        if self.groups is None:
            return None
        with self._lock:
            return self.leases.check(file.tp, sidecar_id, file.lease_epoch)

    def limits(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        """Connect's committed offset for each partition, via the connector holding its lease.

        Raises :class:`~lakegate_core.connect_group.GroupReadError` when Kafka cannot be asked.
        """
        assert self.groups is not None, "limits() is only called with fencing on"
        by_connector: dict[str, PartitionOffsets] = {}
        limits: dict[TopicPartition, int] = {}
        for tp in partitions:
            with self._lock:
                lease = self.leases.get(tp)
            if lease is None:
                continue
            if lease.connector not in by_connector:
                by_connector[lease.connector] = self.groups.committed(lease.connector)
            if tp in by_connector[lease.connector]:
                limits[tp] = by_connector[lease.connector][tp]
        return PartitionOffsets(limits)
