"""What the sidecar reads from Kafka Connect: the followed connectors and their tasks on this worker.

Used by the loop each round. ``ConnectRest`` wraps the worker's REST API (a ``requests.Session``
is injected). The ``connect-<connector>`` group (partitions per task, committed offsets) is read
with :class:`lakegate_core.connect_group.GroupReader`, shared with the service.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

import requests

from lakegate_core.errors import ProtocolError
from lakegate_core.protocol import CsvLayout, FileFormat
from sidecar.errors import SourceError

logger = logging.getLogger(__name__)


# Aiven's format.output.type -> what the service is told (csv is headerless; its layout, from
# format.output.fields and the value's encoding, goes with each file: csv_layout)
AIVEN_FORMATS = {"jsonl": FileFormat.JSONL, "parquet": FileFormat.PARQUET, "csv": FileFormat.CSV}
# Confluent's format.class (its simple name) -> the same
CONFLUENT_FORMATS = {"ParquetFormat": FileFormat.PARQUET, "JsonFormat": FileFormat.JSONL}


def output_format(config: dict[str, Any]) -> tuple[FileFormat | None, str]:
    """The data file format a sink connector writes, from its own config, and where that came from.

    ``(None, why)`` when it writes a format the service cannot commit (Avro, a JSON array, ...).
    The compression (``file.compression.type``) is not needed: the service reads it from the bytes.
    """
    if "format.output.type" in config:
        value = str(config["format.output.type"]).strip().lower()
        found = AIVEN_FORMATS.get(value)
        return found, f"format.output.type={value}" + ("" if found else " is not jsonl, parquet or csv")
    if "format.class" in config:
        simple = str(config["format.class"]).rsplit(".", 1)[-1]
        found = CONFLUENT_FORMATS.get(simple)
        return found, f"format.class={simple}" + ("" if found else " is not ParquetFormat or JsonFormat")
    if "aiven" in str(config.get("connector.class", "")).lower():
        return FileFormat.CSV, "format.output.type unset: Aiven's default, csv"
    return None, (
        "neither format.output.type nor format.class is set; set format.output.type (jsonl, parquet "
        "or csv) on the connector, or connect.formats in sidecar.yaml"
    )


def csv_layout(config: dict[str, Any]) -> CsvLayout:
    """How an Aiven sink lays out its CSV lines, from its config: ``format.output.fields`` in order
    (default ``value``) and ``format.output.fields.value.encoding`` (default ``base64``)."""
    fields = tuple(f.strip() for f in str(config.get("format.output.fields", "value")).split(",") if f.strip())
    encoding = str(config.get("format.output.fields.value.encoding", "base64")).strip().lower()
    return CsvLayout(fields or ("value",), encoding)


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
        mine = frozenset(
            int(t["id"])
            for t in status.get("tasks", [])
            if t.get("worker_id") == worker_id and t.get("state") == "RUNNING"
        )
        config = self._get(f"/connectors/{name}/config") or {}
        topics = tuple(t.strip() for t in str(config.get("topics", "")).split(",") if t.strip())
        fmt, source = output_format(config)
        state = str(status.get("connector", {}).get("state", "UNKNOWN"))
        try:
            layout = csv_layout(config)
        except ProtocolError as exc:
            if fmt is FileFormat.CSV:
                fmt, source = None, f"format.output.fields: {exc.reason}"
            layout = None
        return ConnectorView(name, state, mine, topics, fmt, source, layout)

    def followed(self, names: tuple[str, ...], regex: str | None) -> list[str]:
        if regex is None:
            return list(names)
        pattern = re.compile(regex)
        return sorted(n for n in self.connectors() if pattern.fullmatch(n))
