"""Reading a Kafka Connect sink's consumer group (``connect-<connector>``) from Kafka.

Shared by the sidecar (which partitions its worker's tasks own, how far Connect committed) and by
the service when fencing is on (is a claimed partition really on the claimant's worker; never
commit beyond Connect's committed offset). A kafka-python ``KafkaAdminClient`` comes from an
injected factory, made on first use and dropped after any error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from lakegate_core.errors import LakegateError
from lakegate_core.types import PartitionOffsets, TopicPartition


class GroupReadError(LakegateError):
    """Kafka could not be asked this time; the next call makes a new client and tries again."""

    status, code, retryable = 503, "kafka_unavailable", True


@dataclass(frozen=True)
class KafkaSettings:
    """How to reach the Kafka holding the Connect groups: the ``kafka`` config section of the
    service (fencing) and of the sidecar."""

    bootstrap_servers: str
    security: dict[str, str] = field(default_factory=dict)  # kafka-python client settings

    def admin_factory(self, client_id: str) -> Callable[[], Any]:
        def make() -> Any:
            from kafka import KafkaAdminClient

            return KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, client_id=client_id, **self.security)

        return make

    def consumer(self, client_id: str, timeout_ms: int) -> Any:
        """A kafka-python consumer outside any group that commits nothing (assigned partitions
        only): the service's log-end reads (``observe.lag``) and its audits (``audit.kafka``)."""
        from kafka import KafkaConsumer

        return KafkaConsumer(
            bootstrap_servers=self.bootstrap_servers,
            client_id=client_id,
            group_id=None,
            enable_auto_commit=False,
            request_timeout_ms=timeout_ms + 1000,
            **self.security,
        )


@dataclass(frozen=True)
class Assignment:
    """Who holds one partition in the group: the task (from the client id) and its host."""

    task: int
    host: str  # the consumer's address as Kafka sees it, without the leading "/"


def task_of(client_id: str, connector: str) -> int | None:
    """Connect names a sink task's consumer ``connector-consumer-<connector>-<task>``."""
    prefix = f"connector-consumer-{connector}-"
    rest = client_id[len(prefix) :] if client_id.startswith(prefix) else ""
    return int(rest) if rest.isdigit() else None


def assignments(members: Iterable[dict[str, Any]], connector: str) -> dict[TopicPartition, Assignment]:
    """Partition -> holder, from a ``describe_groups`` member list (other clients ignored)."""
    out: dict[TopicPartition, Assignment] = {}
    for m in members:
        task = task_of(str(m.get("client_id", "")), connector)
        if task is None:
            continue
        host = str(m.get("client_host") or "").lstrip("/")
        assignment = m.get("member_assignment") or {}
        for entry in assignment.get("assigned_partitions", []) if isinstance(assignment, dict) else []:
            for p in entry.get("partitions", []):
                out[TopicPartition(str(entry["topic"]), int(p))] = Assignment(task, host)
    return out


class LazyClient:
    """One kafka-python client (admin or consumer) from an injected factory, made on first use and
    dropped after any error, so the next call makes a new one. Base of :class:`GroupReader` and of
    the service's log-end reader (:class:`commit_service.observe.lag.LogEnds`)."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._client: Any = None

    def _call(self, what: str, fn: Callable[[Any], Any]) -> Any:
        """``fn(client)``; any failure drops the client and raises :class:`GroupReadError`."""
        try:
            if self._client is None:
                self._client = self._factory()
            return fn(self._client)
        except Exception as exc:  # kafka-python raises many types; reconnect next time
            self.close()
            raise GroupReadError(f"Kafka {what}: {exc}") from exc

    def close(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            except Exception:  # closing a broken client may fail too; it is dropped either way
                pass
            self._client = None


class GroupReader(LazyClient):
    """Describes ``connect-<connector>`` and reads its committed offsets."""

    def assignments(self, connector: str) -> dict[TopicPartition, Assignment]:
        group = f"connect-{connector}"
        described = self._call("describe group", lambda a: a.describe_groups([group]))
        members = described.get(group, {}).get("members", []) if isinstance(described, dict) else []
        return assignments(members, connector)

    def owned(self, connector: str, tasks: Iterable[int]) -> set[TopicPartition]:
        mine = set(tasks)
        return {tp for tp, a in self.assignments(connector).items() if a.task in mine}

    def log_ends(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        """Each partition's log end now (the offset the next record appended will get), in one
        ``ListOffsets`` request per leader broker."""
        from kafka import TopicPartition as KafkaPartition
        from kafka.admin import OffsetSpec

        specs = {KafkaPartition(tp.topic, tp.partition): OffsetSpec.LATEST for tp in partitions}
        if not specs:
            return PartitionOffsets()
        ends = self._call("log ends", lambda a: a.list_partition_offsets(specs))
        return PartitionOffsets((TopicPartition(k.topic, k.partition), int(v.offset)) for k, v in ends.items())

    def offsets_at(self, partitions: Iterable[TopicPartition], at_ms: int) -> PartitionOffsets:
        """Per partition, the offset of its first record whose timestamp is ``at_ms`` or later
        (``ListOffsets`` by timestamp); its log end when every record it keeps is older."""
        from kafka import TopicPartition as KafkaPartition
        from kafka.admin import OffsetSpec

        specs = {KafkaPartition(tp.topic, tp.partition): at_ms for tp in partitions}
        if not specs:
            return PartitionOffsets()
        found = self._call("offsets by time", lambda a: a.list_partition_offsets(specs))
        later = {k: OffsetSpec.LATEST for k, v in found.items() if v.offset is None or v.offset < 0}
        ends = self._call("log ends", lambda a: a.list_partition_offsets(later)) if later else {}
        return PartitionOffsets(
            (TopicPartition(k.topic, k.partition), int(ends[k].offset if k in later else v.offset))
            for k, v in found.items()
        )

    def committed(self, connector: str) -> PartitionOffsets:
        """The group's committed offsets: per partition, the next offset its task will consume."""
        group = f"connect-{connector}"
        offsets = self._call("committed offsets", lambda a: a.list_group_offsets({group: None}))
        return PartitionOffsets(
            (TopicPartition(tp.topic, tp.partition), int(meta.offset))
            for tp, meta in offsets.get(group, {}).items()
            if meta.offset is not None and meta.offset >= 0
        )
