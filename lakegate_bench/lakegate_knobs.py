"""The Lakegate settings the pipeline benchmarks (``pipeline``, ``iceberg-peer``) vary: the table's
catch-up (``--catch-up-seconds``) and the sidecar's poll interval (``--sidecar-poll-seconds``)."""

from __future__ import annotations

SIDECAR_POLL_SECONDS = 5.0  # the sidecar's default poll_interval_seconds (sidecar.config)


def catch_up_for(catch_up: float, interval: float) -> float:
    """``commit.catch_up_seconds`` for a table of ``interval``: ``catch_up``, at most half the interval."""
    return min(catch_up, interval / 2)


def catch_up_by_interval(catch_up: float, intervals: list[int]) -> dict[str, float]:
    """The result JSON's record of :func:`catch_up_for` at each interval."""
    return {str(i): catch_up_for(catch_up, i) for i in intervals}
