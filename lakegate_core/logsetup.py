"""Logging set-up shared by ``lakegate-service`` and ``lakegate-sidecar``: text or JSON lines."""

from __future__ import annotations

import json
import logging
import sys


def setup_logging(fmt: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":

        class Json(logging.Formatter):
            def format(self, record: logging.LogRecord) -> str:
                out = {
                    "ts": self.formatTime(record),
                    "level": record.levelname,
                    "logger": record.name,
                    "message": record.getMessage(),
                }
                if record.exc_info:
                    out["exc"] = self.formatException(record.exc_info)
                return json.dumps(out)

        handler.setFormatter(Json())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    for noisy in ("py4j", "kafka"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
