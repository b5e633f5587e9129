"""The S3 requests a system made in a measured window, counted from the local S3 server's request
log (the ``iceberg-peer`` part's S3 requests per million records, each system in its own bucket)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ANSI_COLOUR = re.compile(r"\x1b\[[0-9;]*m")  # moto's log colours some methods


@dataclass(frozen=True)
class S3RequestLog:
    """The S3 server's request log (moto's, one line per request: ``"<METHOD> /<bucket>/..."``),
    counted for one bucket. Who sent a request is not in the log: a bucket is one system's."""

    path: Path
    bucket: str

    def mark(self) -> int:
        """Where the log ends now."""
        return self.path.stat().st_size

    def count_since(self, mark: int) -> dict[str, int]:
        """Requests to the bucket logged after ``mark``, by HTTP method."""
        counts: dict[str, int] = {}
        with self.path.open("rb") as log:
            log.seek(mark)
            for line in log:
                _, sep, rest = ANSI_COLOUR.sub("", line.decode(errors="replace")).partition('"')
                method, _, target = rest.partition(" ")
                if sep and (target.startswith(f"/{self.bucket}/") or target.startswith(f"/{self.bucket}?")):
                    counts[method] = counts.get(method, 0) + 1
        return counts
