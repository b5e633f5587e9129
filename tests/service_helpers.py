"""Data files and manifests for the service tests (the processes live in lakegate_stack.services)."""

from __future__ import annotations

from typing import Any

from lakegate_stack.datafiles import write_parquet
from lakegate_stack.services import ADMIN_TOKEN, READ_TOKEN, SIDECAR_TOKEN, ServiceProcess

__all__ = ["ADMIN_TOKEN", "READ_TOKEN", "SIDECAR_TOKEN", "ServiceProcess", "manifest", "write_parquet"]


def manifest(mid: str, files: list[dict[str, Any]]) -> dict[str, Any]:
    return {"manifest_id": mid, "sidecar": {"id": "test-sidecar", "worker": "127.0.0.1:8083"}, "files": files}
