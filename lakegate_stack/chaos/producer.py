"""The chaos run's producer: unique ids at a paced rate, stopping at each fault's gate until the
fault is in; and the model of the upsert topic's keys (which key record ``i`` changes, each key's
last change)."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import TYPE_CHECKING

from lakegate_stack.chaos.settings import (
    PARTITIONS,
    UPSERT_EVERY,
    UPSERT_KEYS,
    ChaosError,
)

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)


class Producer(threading.Thread):
    """Produces ids ``0..records-1`` at about ``rate``/s, stopping at each gate until it is opened.

    Record ``i`` goes to topic ``a`` or ``b`` (``i % 2``), partition ``(i // 2) % 6``. Every
    :data:`UPSERT_EVERY`-th record also sets key :func:`upsert_key` of topic ``c`` (the upsert
    table's) to ``seq = i``, in partition ``key % 6``. At a gate the producer flushes (so every
    record below it is in Kafka) and waits: the fault lands exactly there.
    """

    def __init__(self, bootstrap: str, topics: tuple[str, str, str], records: int, rate: int, gates: list[int]) -> None:
        super().__init__(name="chaos-producer", daemon=True)
        self.bootstrap, self.topics, self.records, self.rate = bootstrap, topics, records, rate
        self.reached = {n: threading.Event() for n in gates}
        self.opened = {n: threading.Event() for n in gates}
        self.stop_now = threading.Event()
        self.started_at = time.monotonic()
        self.produced = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._produce()
        except BaseException as exc:  # surfaced through wait_for / the final check
            self.error = exc

    def _produce(self) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=20, retries=10)
        batch = max(1, self.rate // 20)
        try:
            self.started_at = time.monotonic()
            for i in range(self.records):
                if i in self.reached:
                    producer.flush(120)
                    self.produced = i
                    self.reached[i].set()
                    while not self.opened[i].wait(0.5):
                        if self.stop_now.is_set():
                            return
                topic, partition = self.topics[i % 2], (i // 2) % PARTITIONS
                value = json.dumps({"id": i, "src": topic, "amount": i * 0.01}).encode()
                producer.send(topic, key=str(i).encode(), value=value, partition=partition)
                if i % UPSERT_EVERY == 0:
                    key = upsert_key(i)
                    change = json.dumps({"id": key, "seq": i}).encode()
                    producer.send(self.topics[2], key=str(key).encode(), value=change, partition=key % PARTITIONS)
                if i % batch == batch - 1:
                    time.sleep(batch / self.rate)
                if self.stop_now.is_set():
                    return
            producer.flush(120)
            self.produced = self.records
        finally:
            producer.close()

    def wait_for(self, gate: int, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while not self.reached[gate].wait(1):
            if self.error is not None:
                raise ChaosError(f"the producer failed: {self.error!r}")
            if time.monotonic() > deadline:
                raise ChaosError(f"the producer did not reach record {gate} in {timeout:.0f}s")


def upsert_key(i: int) -> int:
    """The key of topic ``c`` that record ``i`` changes (``i`` a multiple of :data:`UPSERT_EVERY`)."""
    return (i // UPSERT_EVERY) % UPSERT_KEYS


def upsert_model(produced: int) -> dict[int, int]:
    """The upsert table once the first ``produced`` records are committed: key -> its last ``seq``."""
    return {upsert_key(i): i for i in range(0, produced, UPSERT_EVERY)}
