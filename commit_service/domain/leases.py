"""Partition leases: which sidecar may report a partition now (docs/design.md, "Fencing"). Pure, no I/O.

Read and written by the coordinator under its lock. A lease is granted (by the API, after Kafka
confirmed the partition is on the claimant's worker) to one sidecar at a time; a change of holder
raises the partition's epoch, and files sent with an older epoch are rejected, so a zombie sidecar
(its worker lost the partition) cannot get anything committed. Leases live in memory: after a
service restart every sidecar claims again on its next round (and is checked against Kafka again);
a file is accepted only from the current holder with the current epoch, so a zombie's old epoch
never matches a lease granted to someone else.

A lease is *live* while its holder renews it (every sidecar round claims again) within the TTL
(``leases.ttl_seconds``); only live leases are partitions a commit round waits for. So a deleted
connector, a stopped sidecar or a partition no worker holds stops delaying interval commits after
the TTL. An expired lease keeps its epoch: a holder coming back continues from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from lakegate_core.types import TopicPartition


@dataclass(frozen=True)
class Lease:
    holder: str  # sidecar id
    worker: str
    connector: str
    epoch: int
    renewed_at: float = 0.0  # when the holder last claimed it (the service's clock)


class LeaseTable:
    """Current leases; not thread-safe (the coordinator locks)."""

    def __init__(self) -> None:
        self._leases: dict[TopicPartition, Lease] = {}

    def grant(self, tp: TopicPartition, holder: str, worker: str, connector: str, now: float = 0.0) -> Lease:
        """Give (or renew) ``tp`` to ``holder`` at ``now``; the epoch rises when the holder (or its
        worker) changes."""
        current = self._leases.get(tp)
        if current is not None and (current.holder, current.worker, current.connector) == (holder, worker, connector):
            lease = Lease(holder, worker, connector, current.epoch, now)  # not replace(): 10,000 a claim
        else:
            lease = Lease(holder, worker, connector, (current.epoch if current else 0) + 1, now)
        self._leases[tp] = lease
        return lease

    def check(self, tp: TopicPartition, holder: str, epoch: int | None) -> str | None:
        """None if ``holder`` may send files of ``tp`` with ``epoch``; else the reason it may not."""
        lease = self._leases.get(tp)
        if lease is None:
            return f"no lease on {tp}: claim it with POST /v1/leases first"
        if epoch is None:
            return f"files of {tp} need lease_epoch (fencing is on)"
        if lease.holder != holder or epoch != lease.epoch:
            return (
                f"stale lease on {tp}: epoch {epoch} of {holder}, "
                f"the partition is leased to {lease.holder} at epoch {lease.epoch}"
            )
        return None

    def get(self, tp: TopicPartition) -> Lease | None:
        return self._leases.get(tp)

    def all(self) -> dict[TopicPartition, Lease]:
        """A copy of every lease, live or lapsed (the status page shows both)."""
        return dict(self._leases)

    def live(self, now: float, ttl: float) -> set[TopicPartition]:
        """The partitions whose lease was renewed within ``ttl`` of ``now``: what a complete commit
        round waits for."""
        return {tp for tp, lease in self._leases.items() if now - lease.renewed_at <= ttl}
