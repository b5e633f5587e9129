"""Data files and manifests for the service tests (the processes live in lakegate_stack.services)."""

from __future__ import annotations

import threading
from typing import Any

from lakegate_stack.datafiles import write_parquet
from lakegate_stack.services import ADMIN_TOKEN, READ_TOKEN, SIDECAR_TOKEN, ServiceProcess

__all__ = ["ADMIN_TOKEN", "READ_TOKEN", "SIDECAR_TOKEN", "ServiceProcess", "manifest", "race_commits", "write_parquet"]


def manifest(mid: str, files: list[dict[str, Any]]) -> dict[str, Any]:
    return {"manifest_id": mid, "sidecar": {"id": "test-sidecar", "worker": "127.0.0.1:8083"}, "files": files}


def race_commits(services: dict[str, ServiceProcess], table: str) -> dict[str, list[int]]:
    """Every service forces commits of ``table`` at once, each until it has nothing left to
    commit (at most 5 tries: a loser sees 409 offsets_moved, then re-plans from the table); the
    status codes each saw."""
    results: dict[str, list[int]] = {}

    def commit(name: str, svc: ServiceProcess) -> None:
        for _ in range(5):
            r = svc.call("POST", f"/v1/tables/{table}/commit", ADMIN_TOKEN)
            results.setdefault(name, []).append(r.status_code)
            if r.status_code == 200 and not r.json().get("committed", True):
                return

    racers = [threading.Thread(target=commit, args=item) for item in services.items()]
    for t in racers:
        t.start()
    for t in racers:
        t.join()
    return results
