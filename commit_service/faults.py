"""Test-only crash points in the commit path, for the chaos suite (``scripts/chaos``).

A crash *inside* a commit cannot be timed from outside without racing the service, so both table
formats' commit paths (``commit_service.delta``, ``commit_service.iceberg``) name the moments that
matter and the chaos harness arms one of them:

- ``commit.before``: footers read, files placed or written, the commit built; not made (Delta's
  transaction, Iceberg's snapshot);
- ``commit.after``: the commit landed; the service has not updated its state nor answered anyone;
- ``commit.mid_merge``: an upsert round wrote its new files (and Iceberg's position deletes) into
  the table's folder; the commit that would add them is not made.

Armed only through the environment variable ``LAKEGATE_TEST_FAULT_DIR`` (read once at import;
never set in production, where :func:`crash_point` is one ``None`` check). When the file
``<dir>/<point name>`` exists as the commit reaches that point, the first process to delete it
SIGKILLs its own process group (gunicorn, its worker and the Spark JVM): what an OOM kill or a
node loss does at that instant.
"""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

logger = logging.getLogger(__name__)

ENV = "LAKEGATE_TEST_FAULT_DIR"
BEFORE_COMMIT = "commit.before"
AFTER_COMMIT = "commit.after"
MID_MERGE = "commit.mid_merge"

_DIR = Path(os.environ[ENV]) if os.environ.get(ENV) else None


def crash_point(name: str) -> None:
    """Crash here if the chaos harness armed ``name`` (a no-op unless ``LAKEGATE_TEST_FAULT_DIR`` is set)."""
    if _DIR is None:
        return
    try:
        (_DIR / name).unlink()
    except FileNotFoundError:
        return
    logger.critical("test fault %s armed in %s: SIGKILL of the whole service now", name, _DIR)
    for handler in logging.getLogger().handlers:
        handler.flush()
    os.killpg(os.getpgid(0), signal.SIGKILL)
