"""Lower the CPU priority of the JVM thread that serves the calling Python thread.

Called by :class:`~commit_service.delta.maintenance.DeltaMaintainer` on the thread that writes a
table's background checkpoints, so that on a busy machine a checkpoint takes the CPU the commit
rounds leave over instead of half of it.

PySpark pins each Python thread to a JVM thread of its own (py4j's connection per thread), so a
call made from this thread runs on that peer and on no other thread's. The peer reads
``/proc/thread-self`` to learn its Linux thread id, and this process raises that thread's nice
value with ``setpriority(2)``, which any process may do to a thread of its own user. Raising it
cannot be undone without privilege; the peer thread ends with the Python thread.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from commit_service.spark.jvm_classes import java_class

logger = logging.getLogger(__name__)

MAX_NICE = 19


def jvm_peer_thread_id(jvm: Any) -> int | None:
    """The Linux thread id of the JVM thread serving this Python thread; None off Linux."""
    try:
        link = java_class(jvm, "java.nio.file.Files").readSymbolicLink(
            java_class(jvm, "java.io.File")("/proc/thread-self").toPath()
        )
        return int(str(link.getFileName().toString()))
    except Exception as exc:  # no /proc (not Linux) or an unexpected link: keep the priority
        logger.debug("no thread id for this thread's JVM peer: %s", exc)
        return None


def lower_jvm_peer(jvm: Any, increment: int) -> int | None:
    """Raise the nice value of this thread's JVM peer by ``increment`` (at most to 19); the new
    value, or None when it could not be changed (the reason is logged)."""
    tid = jvm_peer_thread_id(jvm)
    if tid is None:
        return None
    try:
        nice = min(MAX_NICE, os.getpriority(os.PRIO_PROCESS, tid) + increment)
        os.setpriority(os.PRIO_PROCESS, tid, nice)
    except OSError as exc:
        logger.info("could not lower the priority of JVM thread %d: %s", tid, exc)
        return None
    return nice
