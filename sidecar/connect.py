"""What the sidecar reads from Kafka Connect and Kafka: tasks on this worker, their partitions,
and the ``connect-<connector>`` group's committed offsets.

Used by the loop each round. ``ConnectRest`` wraps the worker's REST API (a ``requests.Session``
is injected); ``GroupReader`` wraps a kafka-python ``KafkaAdminClient`` made by an injected
factory, so unit tests pass fakes and integration tests the real broker.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests

from sidecar.errors import SourceError
from sidecar.tracker import TopicPartition, owned_partitions

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConnectorView:
    """One followed connector as seen this round."""

    name: str
    state: str  # RUNNING, PAUSED, FAILED, ... (or MISSING when deleted)
    my_tasks: frozenset[int]  # task ids running on this worker
    topics: tuple[str, ...]


class ConnectRest:
    """The Connect REST calls the sidecar makes (read-only)."""

    def __init__(self, url: str, session: requests.Session | None = None, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.http = session or requests.Session()
        self.timeout = timeout

    def _get(self, path: str) -> Any:
        try:
            resp = self.http.get(f"{self.url}{path}", timeout=self.timeout)
        except requests.RequestException as exc:
            raise SourceError(f"Connect REST {path}: {exc}") from exc
        if resp.status_code == 404:
            return None
        if resp.status_code >= 400:
            raise SourceError(f"Connect REST {path}: HTTP {resp.status_code}: {resp.text[:200]}")
        return resp.json()

    def connectors(self) -> list[str]:
        return list(self._get("/connectors") or [])

    def view(self, name: str, worker_id: str) -> ConnectorView:
        status = self._get(f"/connectors/{name}/status")
        if status is None:
            return ConnectorView(name, "MISSING", frozenset(), ())
        mine = frozenset(int(t["id"]) for t in status.get("tasks", [])
                         if t.get("worker_id") == worker_id and t.get("state") == "RUNNING")  # fmt: skip
        config = self._get(f"/connectors/{name}/config") or {}
        topics = tuple(t.strip() for t in str(config.get("topics", "")).split(",") if t.strip())
        return ConnectorView(name, str(status.get("connector", {}).get("state", "UNKNOWN")), mine, topics)

    def followed(self, names: tuple[str, ...], regex: str | None) -> list[str]:
        if regex is None:
            return list(names)
        pattern = re.compile(regex)
        return sorted(n for n in self.connectors() if pattern.fullmatch(n))


class GroupReader:
    """Reads a Connect sink's consumer group through a kafka-python admin client."""

    def __init__(self, admin_factory: Callable[[], Any]) -> None:
        self._factory = admin_factory
        self._admin: Any = None

    def _client(self) -> Any:
        if self._admin is None:
            self._admin = self._factory()
        return self._admin

    def _call(self, what: str, fn: Callable[[Any], Any]) -> Any:
        try:
            return fn(self._client())
        except Exception as exc:  # kafka-python raises many types; reconnect next round
            self.close()
            raise SourceError(f"Kafka {what}: {exc}") from exc

    def owned(self, connector: str, my_tasks: frozenset[int]) -> set[TopicPartition]:
        group = f"connect-{connector}"
        described = self._call("describe group", lambda a: a.describe_groups([group]))
        members = described.get(group, {}).get("members", []) if isinstance(described, dict) else []
        return owned_partitions(members, connector, set(my_tasks))

    def committed(self, connector: str) -> dict[TopicPartition, int]:
        group = f"connect-{connector}"
        offsets = self._call("committed offsets", lambda a: a.list_group_offsets({group: None}))
        return {(tp.topic, tp.partition): int(meta.offset) for tp, meta in offsets.get(group, {}).items()
                if meta.offset is not None and meta.offset >= 0}  # fmt: skip

    def close(self) -> None:
        if self._admin is not None:
            try:
                self._admin.close()
            except Exception:  # closing a broken client may fail too; it is dropped either way
                pass
            self._admin = None
