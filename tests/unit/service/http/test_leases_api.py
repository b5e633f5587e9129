"""Leases, fencing and watermarks over HTTP, over a fake committer and fake Connect groups:
a lease only where Kafka shows the partition, files only from the holder at its epoch, commits
capped at Connect's offsets, complete rounds from every leased partition's watermark."""

from __future__ import annotations

import time
from typing import Any

from flask.testing import FlaskClient

from commit_service.config import ServiceConfig
from commit_service.http.app import create_app
from commit_service.http.runtime import runtime
from lakegate_core.configfile import build
from lakegate_core.types import PartitionOffsets
from tests.unit.fakes import ADMIN, CONFIG, FakeCommitter, h, lease, manifest


class FakeGroups:
    """Kafka's view of connect-snk: partition -> (task, host), and committed offsets."""

    def __init__(self) -> None:
        from lakegate_core.connect_group import Assignment

        self.held = {("orders", 0): Assignment(0, "10.0.0.1"), ("orders", 1): Assignment(1, "10.0.0.2")}
        self.offsets: dict[tuple[str, int], int] = {("orders", 0): 100, ("orders", 1): 100}

    def assignments(self, connector: str) -> dict[tuple[str, int], Any]:
        return dict(self.held)

    def committed(self, connector: str) -> PartitionOffsets:
        return PartitionOffsets(self.offsets)


def fenced(sidecar: str, epoch: int | None, partition: int = 0, mid: str = "f", start: int = 0) -> dict[str, Any]:
    m = manifest(mid, start, start + 9, partition=partition)
    m["sidecar"]["id"] = sidecar
    if epoch is not None:
        m["files"][0]["lease_epoch"] = epoch
    return m


def test_fencing_leases_epochs_and_connect_limits(committer: FakeCommitter) -> None:
    groups = FakeGroups()
    app = create_app(
        build(ServiceConfig, {**CONFIG, "kafka": {"bootstrap_servers": "k:9092"}}),
        committer_factory=lambda t: committer,
        start=False,
        groups=groups,
    )
    runtime(app).coordinator.load()
    c = app.test_client()

    grants = lease(c, "sc-a", "10.0.0.1:8083", [0], [0, 1])
    assert grants["fencing"] is True
    assert grants["leases"][0] == {"topic": "orders", "partition": 0, "granted": True, "epoch": 1, "held_next": 0}
    assert grants["leases"][1]["granted"] is False and "task 1 on 10.0.0.2" in grants["leases"][1]["reason"]

    assert c.post("/v1/manifests", json=fenced("sc-a", None), headers=h()).json["files"][0]["status"] == "rejected"  # type: ignore[index]
    r = c.post("/v1/manifests", json=fenced("sc-a", 1, mid="f1"), headers=h()).json
    assert r["files"][0]["status"] == "accepted", r  # type: ignore[index]

    # a rebalance: partition 0 moves to task 1 on the other worker; the zombie sc-a is fenced
    from lakegate_core.connect_group import Assignment

    groups.held[("orders", 0)] = Assignment(1, "10.0.0.2")
    assert lease(c, "sc-a", "10.0.0.1:8083", [0], [0])["leases"][0]["granted"] is False
    assert lease(c, "sc-b", "10.0.0.2:8083", [1], [0])["leases"][0]["epoch"] == 2
    zombie = c.post("/v1/manifests", json=fenced("sc-a", 1, mid="z", start=10), headers=h()).json
    assert zombie["files"][0]["status"] == "rejected" and "stale lease" in zombie["files"][0]["reason"]  # type: ignore[index]
    assert (
        c.post("/v1/manifests", json=fenced("sc-b", 2, mid="b", start=10), headers=h()).json["files"][0]["status"]
        == "accepted"
    )  # type: ignore[index]

    # never beyond what Connect committed: 10..19 waits until the group passes 20
    groups.offsets[("orders", 0)] = 15
    assert c.post("/v1/tables/orders/commit", headers=h(ADMIN)).json["offsets"] == {"orders": {"0": 10}}  # type: ignore[index]
    assert c.post("/v1/tables/orders/commit", headers=h(ADMIN)).json["committed"] is False  # type: ignore[index]
    groups.offsets[("orders", 0)] = 20
    assert c.post("/v1/tables/orders/commit", headers=h(ADMIN)).json["offsets"] == {"orders": {"0": 20}}  # type: ignore[index]


def test_without_kafka_leases_are_granted_and_not_required(client: FlaskClient) -> None:
    grants = lease(client, "sc-a", "10.0.0.1:8083", [0], [0])
    assert grants["fencing"] is False and grants["leases"][0]["granted"] is True
    assert client.post("/v1/manifests", json=fenced("sc-a", None), headers=h()).json["files"][0]["status"] == "accepted"  # type: ignore[index]


def test_watermarks_of_every_leased_partition_make_a_complete_round_with_vtts(committer: FakeCommitter) -> None:
    app = create_app(
        build(ServiceConfig, {**CONFIG, "kafka": {"bootstrap_servers": "k:9092"}}),
        committer_factory=lambda t: committer,
        start=False,
        groups=FakeGroups(),
    )
    runtime(app).coordinator.load()
    c = app.test_client()
    lease(c, "sc-a", "10.0.0.1:8083", [0], [0])
    assert c.post("/v1/manifests", json=fenced("sc-a", 1), headers=h()).json["files"][0]["status"] == "accepted"  # type: ignore[index]
    read_at = int(time.time() * 1000) + 1
    body = {
        "sidecar": {"id": "sc-a", "worker": "10.0.0.1:8083"},
        "connector": "snk",
        "tasks": [0],
        "partitions": [{"topic": "orders", "partition": 0}],
        "watermarks": [{"topic": "orders", "partition": 0, "connect_offset": 10, "read_at_ms": read_at}],
    }
    assert c.post("/v1/leases", json=body, headers=h()).status_code == 200
    record = c.post("/v1/tables/orders/commit", headers=h(ADMIN)).json
    assert record["committed"] is True and record["vtts"] is not None  # type: ignore[index]


def test_a_partition_without_a_watermark_makes_a_partial_round(committer: FakeCommitter) -> None:
    app = create_app(
        build(ServiceConfig, {**CONFIG, "kafka": {"bootstrap_servers": "k:9092"}}),
        committer_factory=lambda t: committer,
        start=False,
        groups=FakeGroups(),
    )
    runtime(app).coordinator.load()
    c = app.test_client()
    lease(c, "sc-a", "10.0.0.1:8083", [0], [0])
    lease(c, "sc-b", "10.0.0.2:8083", [1], [1])  # leased, but never says it is caught up
    c.post("/v1/manifests", json=fenced("sc-a", 1), headers=h())
    record = c.post("/v1/tables/orders/commit", headers=h(ADMIN)).json
    assert record["committed"] is True and record["vtts"] is None  # type: ignore[index]
