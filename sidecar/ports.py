"""The ports: the seams the sidecar's round reads and writes through, typed as ``Protocol``.

:class:`~sidecar.loop.SidecarLoop` depends only on these types (and the storage
:class:`~sidecar.storage.Lister`), so unit tests drive it with fakes (``tests/unit/sidecar``). Who
implements each:

- :class:`ConnectSource`, the Connect worker's REST API: ``sidecar.connect.ConnectRest``;
- :class:`GroupSource`, the connectors' consumer groups in Kafka: ``lakegate_core.connect_group.GroupReader``;
- :class:`CommitService`, the commit service's HTTP API: ``sidecar.client.ServiceClient``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from lakegate_core.protocol import LeaseRequest, LeaseResponse, Manifest, ManifestReceipt
from lakegate_core.types import PartitionOffsets, TopicPartition
from sidecar.connect import ConnectorView


class ConnectSource(Protocol):
    """The Connect worker's REST API (``sidecar.connect.ConnectRest``)."""

    def views(self, names: tuple[str, ...], regex: str | None, worker_id: str) -> list[ConnectorView]: ...


class GroupSource(Protocol):
    """The connectors' consumer groups in Kafka (``lakegate_core.connect_group.GroupReader``)."""

    def committed(self, connector: str) -> PartitionOffsets: ...

    def owned(self, connector: str, tasks: Iterable[int]) -> set[TopicPartition]: ...

    def log_ends(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets: ...

    def close(self) -> None: ...


class CommitService(Protocol):
    """The commit service's HTTP API (``sidecar.client.ServiceClient``)."""

    def table_offsets(self) -> PartitionOffsets: ...

    def claim(self, request: LeaseRequest) -> LeaseResponse: ...

    def send(self, manifest: Manifest) -> ManifestReceipt: ...
