"""A record's freshness, as the ``pipeline`` and ``iceberg-peer`` parts see it: records produced at a
paced rate over a topic's :data:`PARTITIONS` partitions, each carrying ``produced_ms``, and a
:class:`FreshnessPoller` reading the table every 0.25 s for the commit that made each visible (a
format's poller gives the reading: ``pipeline.Poller`` for Delta, ``iceberg_peer.IcebergPoller``
for Iceberg); the warm-up before a measured run, and the wait until every record is visible."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field

from kafka import KafkaProducer

PARTITIONS = 3  # of each topic records are produced into (round-robin), and its sink's tasks


@dataclass(eq=False)
class FreshnessPoller(threading.Thread):
    """One reader of a table, every ``period_s`` (0.25 s): for every new commit, when it was first
    seen and the ``produced_ms`` of every record its added files hold. A format's poller gives :meth:`poll`."""

    seen_ms: list[tuple[int, int]] = field(default_factory=list)  # (produced_ms, visible_ms) per record
    # per record, where its time went, when the format's poller can tell: (produced_ms, the file's
    # last-modified ms on the S3 server, the commit's timestamp ms, visible_ms)
    stages_ms: list[tuple[int, int, int, int]] = field(default_factory=list)
    versions: set[str] = field(default_factory=set)
    warm_up_versions: int = 0  # of ``versions``, those committed before the measured run
    period_s: float = 0.25  # how often the table is read
    stop: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    def __post_init__(self) -> None:
        threading.Thread.__init__(self, name="freshness-poller", daemon=True)

    def run(self) -> None:
        try:
            while not self.stop.wait(self.period_s):
                self.poll()
            self.poll()
        except BaseException as exc:  # reported by the caller
            self.error = exc

    def poll(self) -> None:
        raise NotImplementedError


def produce(bootstrap: str, topic: str, rate: int, seconds: int) -> int:
    """``rate`` records per second for ``seconds``, paced by the clock; returns how many."""
    return produce_to(bootstrap, (topic,), rate, seconds)


def produce_to(bootstrap: str, topics: tuple[str, ...], rate: int, seconds: int) -> int:
    """:func:`produce`, each record sent to every one of ``topics`` (the same key, value and
    partition: two systems fed the same records); returns how many records each topic got."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, acks="all")
    total, started = rate * seconds, time.monotonic()
    base = int(time.time() * 1000) * 1000  # ids unique across calls (the warm-up, then the run)
    for n in range(total):
        due = started + n / rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        value = {"id": base + n, "produced_ms": int(time.time() * 1000), "amount": n * 0.25, "note": f"record {n}"}
        key, body = str(n).encode(), json.dumps(value).encode()
        for topic in topics:
            producer.send(topic, key=key, value=body, partition=n % PARTITIONS)
    producer.flush()
    producer.close()
    return total


WARM_UP = 300  # records produced and waited for before the measured run: first commits load code


def warm_up(poller: FreshnessPoller, bootstrap: str, topic: str, rate: int, seconds: int) -> None:
    """Produce a few records and wait until they are in the table (the first commit of either
    system is seconds of class loading and planning that no steady state has), then, with
    ``seconds``, that many seconds at the measured rate (what the JVMs compile for this load is
    compiled before the measurement, as in a pipeline that has run for a while); forget them."""
    expected = produce(bootstrap, topic, WARM_UP, 1)
    if seconds:
        print(f"    warming up: {rate}/s for {seconds} s, not measured ...", flush=True)
        expected += produce(bootstrap, topic, rate, seconds)
    wait_for(poller, expected, timeout=300 + seconds, stop=False)
    poller.seen_ms.clear()
    poller.stages_ms.clear()
    poller.warm_up_versions = len(poller.versions)


def wait_for(poller: FreshnessPoller, expected: int, timeout: float, *, stop: bool = True) -> None:
    deadline = time.monotonic() + timeout
    while len(poller.seen_ms) < expected:
        if poller.error is not None:
            raise poller.error
        if time.monotonic() > deadline:
            raise SystemExit(f"only {len(poller.seen_ms)} of {expected} records visible after {timeout:.0f} s")
        time.sleep(0.5)
    if stop:
        poller.stop.set()
        poller.join(10)
