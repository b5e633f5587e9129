"""What the sidecar reads from Kafka Connect: the followed connectors and their tasks on this worker.

Used by the loop each round. ``ConnectRest`` wraps the worker's REST API (a ``requests.Session``
is injected). The ``connect-<connector>`` group (partitions per task, committed offsets) is read
with :class:`lakegate_core.connect_group.GroupReader`, shared with the service.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import requests

from lakegate_core.doctor import ConnectorSpec
from lakegate_core.errors import ProtocolError
from lakegate_core.protocol import CsvLayout, FileFormat
from lakegate_core.sink_config import ConfluentLayout, csv_layout, offset_width, output_format
from sidecar.errors import SourceError
from sidecar.sessions import session_for

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConnectorView:
    """One followed connector as seen this round."""

    name: str
    state: str  # RUNNING, PAUSED, FAILED, ... (or MISSING when deleted)
    my_tasks: frozenset[int]  # task ids running on this worker
    topics: tuple[str, ...]
    output_format: FileFormat | None = FileFormat.PARQUET  # None: a format the service cannot commit
    format_source: str = ""  # which config key said so (for logs)
    csv: CsvLayout | None = None  # how its CSV lines are laid out (sent with each CSV file)
    failed_tasks: tuple[int, ...] = ()  # its tasks in state FAILED, on any worker
    confluent: ConfluentLayout | None = None  # where Confluent's sink puts its files (None: not Confluent's)
    offset_width: int | None = None  # digits its names give a start offset, zero-padded (None: not padded)

    @property
    def health(self) -> tuple[str, tuple[int, ...]]:
        """What says whether it runs: its state and its failed tasks (a change is reported)."""
        return self.state, self.failed_tasks


class ConnectRest:
    """The Connect REST calls the sidecar makes (read-only)."""

    def __init__(self, url: str, session: requests.Session | None = None, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.http = session or session_for(self.url)
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

    def views(self, names: tuple[str, ...], regex: str | None, worker_id: str) -> list[ConnectorView]:
        """The followed connectors (``names``, or those whose name ``regex`` matches), each with its
        status and config, from one request (``GET /connectors?expand=status&expand=info``): a
        round asks every few seconds, and two requests a connector were a sixth of the sidecar's
        CPU. A named connector the answer leaves out (deleted, or removed while Connect answered)
        is ``MISSING``."""
        expanded = self._get("/connectors?expand=status&expand=info") or {}
        views = []
        for name in following(names, regex, expanded):
            entry = expanded.get(name) or {}
            status, info = entry.get("status"), entry.get("info")
            if status is None or info is None:
                views.append(ConnectorView(name, "MISSING", frozenset(), ()))
            else:
                views.append(connector_view(name, status, info.get("config") or {}, worker_id))
        return views

    def spec(self, name: str) -> ConnectorSpec:
        """The connector as the doctor reads it: the keys of its config it checks, its state."""
        status = self._get(f"/connectors/{name}/status")
        config = self._get(f"/connectors/{name}/config") if status is not None else None
        return ConnectorSpec.from_connect(name, config or {}, status)

    def followed(self, names: tuple[str, ...], regex: str | None) -> list[str]:
        return following(names, regex, self.connectors() if regex is not None else ())


def following(names: tuple[str, ...], regex: str | None, existing: Iterable[str]) -> list[str]:
    """The connectors followed: ``names``, or with ``regex`` those of ``existing`` it matches, sorted."""
    if regex is None:
        return list(names)
    pattern = re.compile(regex)
    return sorted(n for n in existing if pattern.fullmatch(n))


def connector_view(name: str, status: dict[str, Any], config: dict[str, Any], worker_id: str) -> ConnectorView:
    """One connector as its status and config (Connect's REST answers) show it to ``worker_id``."""
    tasks = status.get("tasks", [])
    mine = frozenset(int(t["id"]) for t in tasks if t.get("worker_id") == worker_id and t.get("state") == "RUNNING")
    topics = tuple(t.strip() for t in str(config.get("topics", "")).split(",") if t.strip())
    fmt, source = output_format(config)
    state = str(status.get("connector", {}).get("state", "UNKNOWN"))
    try:
        layout = csv_layout(config)
    except ProtocolError as exc:
        if fmt is FileFormat.CSV:
            fmt, source = None, f"format.output.fields: {exc.reason}"
        layout = None
    failed = tuple(sorted(int(t["id"]) for t in tasks if t.get("state") == "FAILED"))
    confluent = ConfluentLayout.of(config)
    return ConnectorView(name, state, mine, topics, fmt, source, layout, failed, confluent, offset_width(config))
