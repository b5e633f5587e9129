"""What the doctor checks one connector on: plain data, gathered by :mod:`.doctor` and read by the
pure checks (:mod:`.sink_checks`, :mod:`.table_checks`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from commit_service.config import TableConfig
from lakegate_core.doctor import Check, ConnectorSpec, DoctorFinding, DoctorSeverity, Listing
from lakegate_core.sink_config import RenderedName, SinkLocation, object_key, sink_location
from lakegate_core.types import PartitionOffsets

PROBE_PARTITION, PROBE_OFFSET = 7, 1234  # the file whose name is rendered and read back
SAMPLED_TOPICS = 20  # topics of a connector whose names are checked


@dataclass(frozen=True)
class SampleName:
    """The name the sink gives the probe file of one topic: ``full`` is its whole key in the bucket
    (the sink's fixed prefix and the rendered name), None when the naming does not carry the file."""

    topic: str
    name: RenderedName
    full: str | None


@dataclass(frozen=True)
class TopicFacts:
    """One topic as Kafka describes it (read by :class:`~commit_service.doctor.kafka.TopicInspector`)."""

    exists: bool = True
    retention_ms: int | None = None  # retention.ms; -1: forever; None: not read
    cleanup_policy: str = "delete"  # delete | compact | compact,delete
    log_ends: Mapping[int, int] = field(default_factory=dict)  # partition -> the next offset
    transactional: bool | None = None  # transaction markers seen in its logs' tail; None: cannot tell

    @property
    def compacted(self) -> bool:
        return "compact" in self.cleanup_policy


@dataclass(frozen=True)
class ConnectorFacts:
    """Everything one connector is checked on."""

    spec: ConnectorSpec
    source: str  # who reported it ("sidecar <id>", "request")
    listing: Listing | None  # where its sidecar lists files and how it reads names (None: not told)
    topics: tuple[str, ...]  # its topics (topics, or topics.regex against Kafka's topic list)
    tables: Mapping[str, TableConfig | None]  # topic -> the table it feeds (None: no table routes it)
    allowed_roots: tuple[str, ...]  # storage.allowed_roots
    kafka: Mapping[str, TopicFacts] | None = None  # topic -> facts; None: Kafka not read (kafka_note says why)
    kafka_note: str | None = None
    table_offsets: PartitionOffsets = field(default_factory=PartitionOffsets)  # the tables' committed next offsets
    connect_offsets: PartitionOffsets | None = None  # Connect's group's committed offsets; None: not read
    connect_note: str | None = None

    @property
    def config(self) -> Mapping[str, str]:
        return self.spec.config

    @functools.cached_property
    def location(self) -> SinkLocation:
        """Where the sink writes (bucket, fixed prefix)."""
        return sink_location(self.config)

    @functools.cached_property
    def sample_names(self) -> tuple[SampleName, ...]:
        """The probe file's name for each of the first :data:`SAMPLED_TOPICS` topics (a stand-in
        topic when none is known), as the naming and placement checks read them."""
        out = []
        for topic in self.topics[:SAMPLED_TOPICS] or ("orders",):
            name = object_key(self.config, topic, PROBE_PARTITION, PROBE_OFFSET)
            out.append(SampleName(topic, name, None if name.key is None else self.location.prefix + name.key))
        return tuple(out)

    def routed(self) -> dict[str, TableConfig]:
        """The tables this connector feeds, by name."""
        return {t.name: t for t in self.tables.values() if t is not None}

    def finding(
        self,
        check: Check,
        severity: DoctorSeverity,
        message: str,
        why: str,
        *,
        key: str | None = None,
        fix: str | None = None,
        table: str | None = None,
        topic: str | None = None,
    ) -> DoctorFinding:
        return DoctorFinding(check, severity, self.spec.name, message, why, key, fix, table, topic)


CheckFn = Callable[[ConnectorFacts], list[DoctorFinding]]  # one check: what it finds ([]: passed)
