"""The rogue client of the ``rogue_manifests`` fault: an outside client with a sidecar token."""

from __future__ import annotations

import logging
import random
import uuid
from collections import Counter
from typing import TYPE_CHECKING, Any

from lakegate_stack.chaos.settings import (
    PARTITIONS,
)
from lakegate_stack.chaos.verify import connect_committed
from lakegate_stack.services import SIDECAR_TOKEN

if TYPE_CHECKING:
    from lakegate_stack.chaos.run import ChaosRun

logger = logging.getLogger(__name__)


class RogueClient:
    """An outside client with a sidecar token: replays, duplicates and reorders manifests.

    It derives ranges from the landing area's names alone (no orphan guard of its own), claims
    leases as a second sidecar of a live worker, and sends each manifest twice, in shuffled order,
    with one manifest id reused for different files and one already-committed range replayed.
    The service must take none of it as new data beyond what the real sidecars would send.
    """

    def __init__(self, run: ChaosRun) -> None:
        self.run = run

    def attack(self, rng: random.Random) -> str:
        run = self.run
        assert run.service is not None and run.s3 is not None
        committed = connect_committed(run)
        listing = self._listing()
        files: list[dict[str, Any]] = []
        for (topic, partition), starts in listing.items():
            limit = committed.get((topic, partition), 0)
            complete = sorted(s for s in starts if s < limit)
            for j, start in enumerate(complete):
                end = (complete[j + 1] if j + 1 < len(complete) else limit) - 1
                files.append(self._file(topic, partition, start, end, listing[(topic, partition)][start]))
        if not files:
            return "nothing listed yet"
        rng.shuffle(files)
        statuses: Counter[str] = Counter()
        sidecar = {"id": f"rogue-{uuid.uuid4().hex[:6]}", "worker": "127.0.0.1:1"}  # the workers' host
        epochs = self._claim(sidecar)
        for f in files:
            if (f["topic"], f["partition"]) in epochs:
                f["lease_epoch"] = epochs[(f["topic"], f["partition"])]
        batches = [files[i : i + 50] for i in range(0, len(files), 50)]
        for batch in batches:
            body = {"manifest_id": f"rogue-{uuid.uuid4()}", "sidecar": sidecar, "files": batch}
            for _ in range(2):  # duplicated
                statuses.update(self._send(body))
        replay = {"manifest_id": f"rogue-{uuid.uuid4()}", "sidecar": sidecar, "files": batches[0]}
        statuses.update(self._send(replay))
        reused = {**replay, "files": batches[-1][:1] if len(batches) > 1 else batches[0][:1]}
        answer = run.service.call("POST", "/v1/manifests", SIDECAR_TOKEN, json=reused)
        statuses[f"http_{answer.status_code}"] += 1
        return f"{len(files)} files in {len(batches)} manifests x2 + replays: {dict(statuses)}"

    def _claim(self, sidecar: dict[str, str]) -> dict[tuple[str, int], int]:
        """Lease every partition as a second sidecar on the workers' host (the real sidecars take
        them back on their next round): the epoch each grant carries."""
        assert self.run.service is not None
        epochs: dict[tuple[str, int], int] = {}
        for name, (topic, _, _) in self.run.connectors.items():
            body = {
                "sidecar": sidecar,
                "connector": name,
                "tasks": [0, 1, 2],
                "partitions": [{"topic": topic, "partition": p} for p in range(PARTITIONS)],
            }
            answer = self.run.service.call("POST", "/v1/leases", SIDECAR_TOKEN, json=body)
            if answer.status_code != 200:
                continue
            for grant in answer.json().get("leases", []):
                if grant.get("granted"):
                    epochs[(grant["topic"], grant["partition"])] = grant["epoch"]
        return epochs

    def _listing(self) -> dict[tuple[str, int], dict[int, int]]:
        run = self.run
        assert run.s3 is not None
        client = run.s3.client()
        out: dict[tuple[str, int], dict[int, int]] = {}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=run.landing, Prefix="landing/"):
            for obj in page.get("Contents", []):
                name = obj["Key"][len("landing/") :]
                topic, _, rest = name.rpartition("-")
                topic, _, partition = topic.rpartition("-")
                if topic in run.topics and partition.isdigit() and rest.isdigit():
                    out.setdefault((topic, int(partition)), {})[int(rest)] = int(obj["Size"])
        return out

    def _file(self, topic: str, partition: int, start: int, end: int, size: int) -> dict[str, Any]:
        fmt = next(f for t, f, _ in self.run.connectors.values() if t == topic)
        key = f"landing/{topic}-{partition}-{start:020d}"
        return {
            "path": f"s3a://{self.run.landing}/{key}",
            "topic": topic,
            "partition": partition,
            "start_offset": start,
            "end_offset": end,
            "size_bytes": size,
            "format": fmt,
        }

    def _send(self, body: dict[str, Any]) -> list[str]:
        assert self.run.service is not None
        answer = self.run.service.call("POST", "/v1/manifests", SIDECAR_TOKEN, json=body)
        if answer.status_code != 202:
            return [f"http_{answer.status_code}"]
        return [f["status"] for f in answer.json()["files"]]
