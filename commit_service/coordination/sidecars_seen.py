"""The sidecars heard from since the process started (their last manifest or lease claim), for
the status page; bounded, forgetting the longest-silent. Thread-safe."""

from __future__ import annotations

import threading
from dataclasses import dataclass

MAX_SIDECARS_SEEN = 1000  # the status page's list of sidecars forgets the longest-silent beyond this


@dataclass(frozen=True)
class SidecarSeen:
    """A sidecar's last call (manifest or lease claim), read by the status page."""

    sidecar_id: str
    worker: str
    at: float  # the service's clock (epoch seconds)


class SidecarsSeen:
    def __init__(self) -> None:
        self._seen: dict[str, SidecarSeen] = {}  # sidecar id -> its last manifest or lease claim
        self._lock = threading.Lock()

    def note(self, sidecar_id: str, worker: str, at: float) -> None:
        with self._lock:
            self._seen[sidecar_id] = SidecarSeen(sidecar_id, worker, at)
            if len(self._seen) > MAX_SIDECARS_SEEN:
                del self._seen[min(self._seen.values(), key=lambda s: s.at).sidecar_id]

    def all(self) -> list[SidecarSeen]:
        """Most recently seen first."""
        with self._lock:
            return sorted(self._seen.values(), key=lambda s: s.at, reverse=True)
