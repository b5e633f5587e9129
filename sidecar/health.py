"""Each followed connector's state as last seen, and its changes reported to the service's doctor.

Every round the loop notes each followed connector's state and failed tasks
(:meth:`ConnectorHealth.saw`); a connector whose state changed since the last round (or that does
not run when first seen) is logged and reported (:meth:`ConnectorHealth.report`), so the doctor's
report, status page and metrics show a task that failed after the sidecar's start. A report that
failed is made again no sooner than ``HEALTH_RETRY_SECONDS`` later (or with the next change).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

logger = logging.getLogger(__name__)

HEALTH_RETRY_SECONDS = 30.0  # a connector state report that failed is sent again no sooner


class ConnectorHealth:
    """Each followed connector's state and failed tasks as last seen, and the changes a failed
    report did not carry."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._seen: dict[str, tuple[str, tuple[int, ...]]] = {}
        self._unsent: set[str] = set()  # changes a failed report did not carry
        self._retry_at = 0.0

    def saw(self, name: str, health: tuple[str, tuple[int, ...]]) -> bool:
        """Note a connector's state and failed tasks as this round saw them; whether they changed
        since the last round (a connector first seen: unless it runs with no failed task)."""
        changed = self._seen.get(name, ("RUNNING", ())) != health
        self._seen[name] = health
        return changed

    def report(self, changed: list[str], send: Callable[[list[str]], None] | None) -> None:
        """Connectors whose state or failed tasks changed since the last round (or that do not run
        when first seen): logged, and reported to the service's doctor (``send``), whose report,
        status page and metrics then show what stopped. A failed report is logged and tried again
        after ``HEALTH_RETRY_SECONDS`` (or with the next change)."""
        if not changed and not self._unsent:
            return
        for name in changed:
            state, failed = self._seen[name]
            if state == "RUNNING" and not failed:
                logger.info("connector %s runs again", name)
            else:
                logger.warning(
                    "connector %s is %s%s: its partitions get no new files until it runs again",
                    name,
                    state,
                    f", tasks {list(failed)} FAILED" if failed else "",
                )
        if send is None:
            return
        names = sorted(set(changed) | self._unsent)
        if not changed and self.clock() < self._retry_at:
            return  # a failed report is tried again at most every HEALTH_RETRY_SECONDS
        try:
            send(names)
        except Exception as exc:  # the service or Connect unreachable (a restart): tried again later
            logger.warning("cannot report connector state to the service's doctor: %s", exc)
            self._unsent = set(names)
            self._retry_at = self.clock() + HEALTH_RETRY_SECONDS
            return
        self._unsent = set()
