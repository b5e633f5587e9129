"""The doctor's checks of a connector against the service and Kafka (pure): where its files land,
which tables its topics feed, how long Kafka keeps its records, whether its topics are written in
transactions, and whether Kafka or Connect went back behind a table.

Each check takes a connector's :class:`~.facts.ConnectorFacts` and returns its findings (none: the
check passed). Read by :mod:`.doctor` through :data:`TABLE_CHECKS`; unit-tested on plain data.
"""

from __future__ import annotations

from commit_service.domain.paths import UnsafePathError, is_under, normalize_uri
from lakegate_core.doctor import Check, DoctorFinding, DoctorSeverity
from lakegate_core.protocol import FileFormat
from lakegate_core.sink_config import output_format

from .facts import CheckFn, ConnectorFacts

BLOCKING, WARNING, INFO = DoctorSeverity.BLOCKING, DoctorSeverity.WARNING, DoctorSeverity.INFO
OPERATOR_WINDOW_SECONDS = 24 * 3600  # time an operator is given to retry or release a dead letter
DAY_MS = 24 * 3600 * 1000


def placement(f: ConnectorFacts) -> list[DoctorFinding]:
    """The sink writes where the sidecar lists and under ``storage.allowed_roots`` (blocking), and,
    for a table that adds Parquet files in place, under the table's root (else they are rewritten)."""
    where = f.location
    if where.uri is None:
        return [
            f.finding(
                Check.PLACEMENT,
                WARNING,
                "the doctor cannot tell where this sink writes (no aws.s3.bucket.name, s3.bucket.name or gcs.bucket.name)",
                "files outside storage.allowed_roots, or outside an in-place table's root, are refused",
                key="aws.s3.bucket.name",
            )
        ]
    out = []
    samples = f.sample_names if f.topics else ()  # (no stand-in topic: placement is about real files)
    listing = f.listing
    if listing is not None and listing.bucket and listing.bucket != where.bucket:
        out.append(
            f.finding(
                Check.PLACEMENT,
                BLOCKING,
                f"the sink writes to bucket {where.bucket}; its sidecar lists bucket {listing.bucket}",
                "the sidecar finds no file of this sink: nothing it writes is committed",
                key="aws.s3.bucket.name",
                fix="point the sidecar's storage.bucket and the connector's bucket at the same bucket",
            )
        )
    elif listing is not None and listing.prefix:  # None: not told; "": the whole bucket
        outside = [s.full for s in samples if s.full is not None and not s.full.startswith(listing.prefix)]
        if outside:
            out.append(
                f.finding(
                    Check.PLACEMENT,
                    BLOCKING,
                    f"the sink writes keys such as {outside[0]!r}; its sidecar lists under {listing.prefix!r}",
                    "the sidecar finds no file of this sink: nothing it writes is committed",
                    key="aws.s3.prefix",
                    fix="make the sidecar's storage.prefix a prefix of the connector's keys (its aws.s3.prefix)",
                )
            )
    in_place_format = output_format(f.config)[0] is FileFormat.PARQUET
    for sample in samples:
        topic = sample.topic
        if sample.full is None:
            continue  # the naming check reports it
        try:
            uri = normalize_uri(where.key_uri(sample.full) or "")
        except UnsafePathError:
            continue
        if not is_under(uri, f.allowed_roots):
            out.append(
                f.finding(
                    Check.PLACEMENT,
                    BLOCKING,
                    f"the sink's files ({where.uri}...) lie outside storage.allowed_roots {list(f.allowed_roots)}",
                    "the service refuses a file outside its allowed roots: its records never reach the table",
                    key="storage.allowed_roots",
                    fix=f"add {where.uri} (or a root above it) to the service's storage.allowed_roots",
                    topic=topic,
                )
            )
            break
        table = f.tables.get(topic)
        if table is not None and table.adds_in_place and in_place_format and not table.holds(uri):
            out.append(
                f.finding(
                    Check.PLACEMENT,
                    WARNING,
                    f"table {table.name} adds Parquet files in place, but the sink writes {uri}, outside its "
                    f"root {table.root}: each file is rewritten instead",
                    "an in-place table references the sink's files where they lie, which only works under its "
                    "root; elsewhere every record is read and written again (Spark time, twice the storage)",
                    key="aws.s3.prefix",
                    fix=f"write under {table.root} (aws.s3.prefix), or set tables[{table.name}].placement: copy_into_table",
                    table=table.name,
                    topic=topic,
                )
            )
            break
    return out


def routing(f: ConnectorFacts) -> list[DoctorFinding]:
    """Every topic the connector reads feeds a table."""
    if not f.topics:
        return [
            f.finding(
                Check.ROUTING,
                INFO,
                f"no topic to check: {f.kafka_note or 'topics.regex matches no topic'}",
                "the doctor checks the topics a connector reads against the tables' topics",
                key="topics.regex",
            )
        ]
    lost = [t for t in f.topics if f.tables.get(t) is None]
    if not lost:
        return []
    return [
        f.finding(
            Check.ROUTING,
            BLOCKING,
            f"no table takes the topic(s) {lost}",
            "the service refuses a file of a topic no table routes: those records never reach a table",
            key="tables[].topics",
            fix="add the topics to a table's topics (or topics_regex), or take them out of the connector's topics",
            topic=lost[0],
        )
    ]


def retention(f: ConnectorFacts) -> list[DoctorFinding]:
    """Kafka keeps each topic's records longer than the longest a record may wait to be committed."""
    out = []
    for topic, table in f.tables.items():
        facts = (f.kafka or {}).get(topic)
        if table is None or facts is None or not facts.exists or facts.retention_ms is None or facts.retention_ms < 0:
            continue
        c = table.commit
        wait_s = c.interval_seconds + c.timeout_seconds + c.quarantine_after_seconds
        keep_s = facts.retention_ms / 1000
        if keep_s < wait_s:
            severity, why = (
                BLOCKING,
                (
                    f"a record may wait {wait_s:g} s to commit (commit.interval_seconds + timeout_seconds + "
                    "quarantine_after_seconds): Kafka may delete it first, and a file quarantined in the "
                    "dead letters can then never be replayed"
                ),
            )
        elif keep_s < wait_s + OPERATOR_WINDOW_SECONDS:
            severity, why = (
                WARNING,
                (
                    "a file quarantined in the dead letters waits for an operator to retry or release it; "
                    "its records must still be in Kafka to be replayed (the doctor asks for a day beyond "
                    f"the {wait_s:g} s a round may take)"
                ),
            )
        else:
            continue
        out.append(
            f.finding(
                Check.RETENTION,
                severity,
                f"topic {topic} keeps records {keep_s:g} s (retention.ms={facts.retention_ms})",
                why,
                key="retention.ms",
                fix=f"kafka-configs --alter --entity-type topics --entity-name {topic} "
                f"--add-config retention.ms={max(7 * DAY_MS, int((wait_s + OPERATOR_WINDOW_SECONDS) * 1000))}",
                table=table.name,
                topic=topic,
            )
        )
    return out


def isolation_level(f: ConnectorFacts) -> list[DoctorFinding]:
    """A topic written by transactional producers is read ``read_committed``."""
    level = f.config.get("consumer.override.isolation.level", "read_uncommitted").strip().lower()
    if level == "read_committed":
        return []
    written = [t for t, facts in (f.kafka or {}).items() if facts.transactional]
    if not written:
        return []
    return [
        f.finding(
            Check.ISOLATION_LEVEL,
            BLOCKING,
            f"topic(s) {written} are written in transactions; the sink reads them {level}",
            "read_uncommitted hands the sink records of aborted transactions: records that never "
            "happened land in the table",
            key="consumer.override.isolation.level",
            fix="consumer.override.isolation.level=read_committed (the worker must allow "
            "connector.client.config.override.policy=All)",
            topic=written[0],
        )
    ]


def offsets_backwards(f: ConnectorFacts) -> list[DoctorFinding]:
    """Neither Kafka's log end nor Connect's committed offset lies behind what a table committed."""
    out = []
    for tp, committed in sorted(f.table_offsets.items()):
        facts = (f.kafka or {}).get(tp.topic)
        if facts is not None:
            end = facts.log_ends.get(tp.partition) if facts.exists else None
            if end is None or end < committed:
                now = "does not exist" if end is None else f"ends at {end}"
                out.append(
                    f.finding(
                        Check.OFFSETS_BACKWARDS,
                        BLOCKING,
                        f"{tp.topic}-{tp.partition} {now} in Kafka; the table committed up to {committed}",
                        "the topic was deleted and made again (or the cluster replaced): new records at "
                        "offsets the table already holds are taken for duplicates and dropped",
                        key="lakegate.offsets",
                        fix="begin a new ledger epoch of the topic: POST /v1/tables/{table}/epochs "
                        "(docs/operations.md, 'A topic deleted and made again')",
                        topic=tp.topic,
                    )
                )
                continue
        connect = f.connect_offsets.get(tp) if f.connect_offsets is not None else None
        if connect is not None and connect < committed:
            out.append(
                f.finding(
                    Check.OFFSETS_BACKWARDS,
                    WARNING,
                    f"Connect's group is at {connect} on {tp.topic}-{tp.partition}; the table committed up to {committed}",
                    "the connector's offsets were reset (or the connector made again): it re-reads records the "
                    "table holds, and the service refuses those files as duplicates until it catches up",
                    key="connect-<connector> group offsets",
                    fix="expected after a deliberate reset; otherwise reset the group to the table's offsets "
                    "(GET /v1/tables/{table}/offsets)",
                    topic=tp.topic,
                )
            )
    return out


def not_checked(f: ConnectorFacts) -> list[DoctorFinding]:
    """Say which checks could not run, and why."""
    out = []
    if f.kafka is None:
        out.append(
            f.finding(
                Check.NOT_CHECKED,
                INFO,
                f"retention, transactions and log ends not checked: {f.kafka_note or 'no kafka section'}",
                "the doctor reads topic configs and log ends from the Kafka the service's kafka section names",
                key="kafka.bootstrap_servers",
            )
        )
    if f.connect_offsets is None and f.table_offsets:
        out.append(
            f.finding(
                Check.NOT_CHECKED,
                INFO,
                f"Connect's committed offsets not checked: {f.connect_note or 'no kafka section'}",
                "the doctor reads the connect-<connector> group's offsets from Kafka",
                key="kafka.bootstrap_servers",
            )
        )
    return out


TABLE_CHECKS: dict[Check, CheckFn] = {
    Check.ROUTING: routing,
    Check.PLACEMENT: placement,
    Check.RETENTION: retention,
    Check.ISOLATION_LEVEL: isolation_level,
    Check.OFFSETS_BACKWARDS: offsets_backwards,
    Check.NOT_CHECKED: not_checked,
}
