"""The doctor's checks of what a connector's own config says of its files (pure).

Each check takes a connector's :class:`~.facts.ConnectorFacts` and returns its findings (none: the
check passed). Read by :mod:`.doctor` through :data:`SINK_CHECKS`; unit-tested on plain configs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lakegate_core.doctor import Check, DoctorFinding, DoctorSeverity
from lakegate_core.errors import ProtocolError
from lakegate_core.protocol import FileFormat
from lakegate_core.sink_config import (
    CONFLUENT_PARTITIONERS,
    ConfluentLayout,
    csv_layout,
    is_aiven,
    output_fields,
    output_format,
    parse_name,
)

from .facts import PROBE_OFFSET, PROBE_PARTITION, CheckFn, ConnectorFacts

BLOCKING, WARNING, INFO = DoctorSeverity.BLOCKING, DoctorSeverity.WARNING, DoctorSeverity.INFO
BYTES_CONVERTERS = ("ByteArrayConverter", "BinaryConverter")
SMALL_FILE_RECORDS = 1000  # file.max.records below this makes many small files


def count(raw: str) -> int | None:
    """A config value as a non-negative count (at most 18 digits), or None."""
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 18 else None


def file_naming(f: ConnectorFacts) -> list[DoctorFinding]:
    """Each file's name carries topic, partition and start offset, and the sidecar's naming reads them back."""
    naming = f.listing.naming if f.listing else "aiven"
    for sample in f.sample_names:
        topic, name, full = sample.topic, sample.name, sample.full
        if full is None:
            lacks = ", ".join("{{" + v + "}}" for v in name.missing)
            extra = ", ".join("{{" + v + "}}" for v in name.unknown)
            what = f"does not carry {lacks}" if lacks else f"varies by {extra} within one file's range"
            return [
                f.finding(
                    Check.FILE_NAMING,
                    BLOCKING,
                    f"the file name ({name.source}) {what}",
                    "the sidecar learns a file's topic, partition and first offset from its name; without "
                    "them it cannot order files or prove a range is committed once",
                    key="file.name.template",
                    fix="unset file.name.template, or use {{topic}}-{{partition}}-{{start_offset}}",
                    topic=topic,
                )
            ]
        listed = f.listing.prefix if f.listing and f.listing.prefix is not None else f.location.prefix
        if not full.startswith(listed):
            return []  # the placement check says the sidecar lists elsewhere
        try:
            read = parse_name(naming, full[len(listed) :])
        except ProtocolError as exc:
            read, naming = None, f"{naming} ({exc.reason})"
        if read != (topic, PROBE_PARTITION, PROBE_OFFSET):
            return [
                f.finding(
                    Check.FILE_NAMING,
                    BLOCKING,
                    f"the sidecar's naming {naming!r} reads the key {full!r} ({name.source}) as {read}, "
                    f"not as {(topic, PROBE_PARTITION, PROBE_OFFSET)}",
                    "files the sidecar cannot read are never sent: their records never reach the table",
                    key="file.name.template",
                    fix="name files {{topic}}-{{partition}}-{{start_offset}} (or set storage.naming in sidecar.yaml to match)",
                    topic=topic,
                )
            ]
    return _shared_directories(f)


def _shared_directories(f: ConnectorFacts) -> list[DoctorFinding]:
    """Confluent's partitioners other than the default put every Kafka partition's files in shared
    directories (time or field values): correct, at a listing cost that grows with the archive."""
    layout = ConfluentLayout.of(f.config)
    if layout is None or layout.by_partition:
        return []
    known = layout.partitioner in CONFLUENT_PARTITIONERS
    return [
        f.finding(
            Check.FILE_NAMING,
            WARNING,
            f"partitioner.class={layout.partitioner} puts the files of every Kafka partition in shared directories"
            + ("" if known else " (a partitioner the doctor does not know: files are read by their names alone)"),
            "the sidecar then lists each topic's whole prefix every round, a cost that grows with the archive "
            "(DefaultPartitioner's partition=<p> directories are listed from the table's offset); a partition's "
            "files may interleave by offset (a field or record time that alternates): each is committed whole, "
            "in the order of its first offset",
            key="partitioner.class",
            fix="DefaultPartitioner for the sink Lakegate reads, or keep the archive under another topics.dir",
        )
    ]


def file_format(f: ConnectorFacts) -> list[DoctorFinding]:
    """The files are in a format the service reads (and a CSV layout it can decode)."""
    fmt, source = output_format(f.config)
    if fmt is None:
        return [
            f.finding(
                Check.FORMAT,
                BLOCKING,
                f"the service cannot read this sink's files: {source}",
                "a file the service cannot read is refused, and its records never reach the table",
                key="format.output.type",
                fix="format.output.type=parquet (or jsonl, csv, avro)",
            )
        ]
    if fmt is FileFormat.AVRO and is_aiven(f.config):
        return _aiven_avro(f)
    if fmt is FileFormat.CSV:
        try:
            csv_layout(f.config)
        except ProtocolError as exc:
            return [
                f.finding(
                    Check.FORMAT,
                    BLOCKING,
                    f"format.output.fields: {exc.reason}",
                    "a CSV line is read back by the fields its sink wrote",
                    key="format.output.fields",
                    fix="format.output.fields=key,value,offset,timestamp",
                )
            ]
    return []


def _aiven_avro(f: ConnectorFacts) -> list[DoctorFinding]:
    """Aiven's Avro: records that have schemas; a container file as it is is the cheaper read
    (``file.compression.type=none``: Aiven wraps any other format's stream, Avro's too, and gzip is
    its default)."""
    out = []
    compression = str(f.config.get("file.compression.type", "gzip")).strip().lower()
    if compression != "none":
        out.append(
            f.finding(
                Check.FORMAT,
                WARNING,
                f"file.compression.type={compression} wraps each Avro container file in a {compression} stream",
                "each file is decompressed by the service; where its writer schema is one Spark's Avro source "
                "reads (uuid, times, a named type used again), its container is written once more to the "
                "table's _lakegate/staging/ for the round, a write and a read more per file",
                key="file.compression.type",
                fix="file.compression.type=none, and avro.codec=snappy (or deflate, zstandard) to compress inside the file",
            )
        )
    schemaless = [k for k in ("key.converter.schemas.enable", "value.converter.schemas.enable") if _false(f.config, k)]
    if schemaless:
        return [
            f.finding(
                Check.FORMAT,
                BLOCKING,
                f"{schemaless[0]}=false: Aiven's Avro writer needs a schema for every key and value",
                "a record without a schema fails the sink's task (DataException), so nothing more is written",
                key=schemaless[0],
                fix=f"{schemaless[0]}=true, or an Avro converter",
            )
        ]
    return out


def _false(config: Mapping[str, Any], key: str) -> bool:
    return str(config.get(key, "")).strip().lower() == "false"


def offset_field(f: ConnectorFacts) -> list[DoctorFinding]:
    """The records carry their offset, so the orphan guard can check each file's range."""
    fields = output_fields(f.config)
    if is_aiven(f.config) and fields == ("value",) and output_format(f.config)[0] is FileFormat.PARQUET:
        return [
            f.finding(
                Check.OFFSET_FIELD,
                WARNING,
                "plain Parquet (format.output.fields=value): files are added to the table in place, unchecked",
                "this is what zero copy needs, and exactly once holds while every file the sink leaves is the one "
                "Connect committed. The risk that remains: a sink task that uploads files and crashes before "
                "Connect commits its offsets can leave a stale file inside the range of the file that replaces it; "
                "without each record's offset in the file the service trusts the names, and that file's records "
                "would be committed twice (the audit reports it)",
                key="format.output.fields",
                fix="format.output.fields=key,value,offset,timestamp closes it, at the cost of a rewrite per file",
            )
        ]
    if is_aiven(f.config) and "offset" not in fields:
        return [
            f.finding(
                Check.OFFSET_FIELD,
                BLOCKING,
                f"format.output.fields={','.join(fields)} leaves out offset",
                "without each record's offset in the file the orphan guard cannot tell a stale file a sink "
                "task left behind (uploaded, then re-written after a crash) from the one Connect committed, "
                "and the table cannot prove which records it holds",
                key="format.output.fields",
                fix="format.output.fields=key,value,offset,timestamp",
            )
        ]
    if not is_aiven(f.config):
        return [
            f.finding(
                Check.OFFSET_FIELD,
                WARNING,
                "this sink writes no offset field: the service trusts the file names",
                "the orphan guard needs the record offsets in the file; a stale file left by a crashed task "
                "cannot be told from the committed one by its name alone",
                key="connector.class",
                fix="Aiven's sink with format.output.fields=key,value,offset,timestamp writes them",
            )
        ]
    return []


def upsert_fields(f: ConnectorFacts) -> list[DoctorFinding]:
    """An upsert table's records carry what its merge reads (value; offset; key for tombstones)."""
    out = []
    fields = set(output_fields(f.config)) or {"value"}
    for name, table in f.routed().items():
        spec = table.upsert
        missing = [x for x in spec.required_fields() if x not in fields] if spec else []
        if missing:
            out.append(
                f.finding(
                    Check.UPSERT_FIELDS,
                    BLOCKING,
                    f"upsert table {name} needs the fields {list(spec.required_fields()) if spec else []}; "
                    f"this sink leaves out {missing}",
                    "the merge orders a key's changes by offset and reads a tombstone's key from the record's "
                    "key; a round without them fails and the table stops",
                    key="format.output.fields",
                    fix="format.output.fields=key,value,offset,timestamp",
                    table=name,
                )
            )
    return out


# The columns the service makes of the sink's record fields (after unwrap), by the field each needs;
# _kafka_partition comes from the file's name, so every sink has it.
KAFKA_COLUMNS = {
    "_kafka_key": "key",
    "_kafka_offset": "offset",
    "_kafka_timestamp": "timestamp",
    "_kafka_headers": "headers",
}


def partition_fields(f: ConnectorFacts) -> list[DoctorFinding]:
    """A table partitioned by a Kafka field (``day(_kafka_timestamp)``) gets that field from the sink."""
    out = []
    fields = set(output_fields(f.config)) or {"value"}
    for name, table in f.routed().items():
        spec = table.partition_spec
        missing = sorted({KAFKA_COLUMNS[p.column] for p in spec if p.column in KAFKA_COLUMNS} - fields)
        if missing:
            out.append(
                f.finding(
                    Check.PARTITION_FIELDS,
                    BLOCKING,
                    f"table {name} is partitioned by {[str(p) for p in spec]}; this sink leaves out {missing}",
                    "its files lack a column a partition is computed from: every round is refused (409 "
                    "table_layout, nothing committed) and the table stops",
                    key="format.output.fields",
                    fix=f"format.output.fields={','.join(sorted(fields | set(missing)))}",
                    table=name,
                )
            )
    return out


def key_converter(f: ConnectorFacts) -> list[DoctorFinding]:
    """An upsert table that deletes by the record's key gets keys as text it can read."""
    needs_key = [n for n, t in f.routed().items() if t.upsert is not None and t.upsert.delete_on_tombstone]
    if not needs_key:
        return []
    converter = f.config.get("key.converter")
    if converter is None:
        return [
            f.finding(
                Check.KEY_CONVERTER,
                INFO,
                "key.converter is not set on the connector: it inherits the worker's, which the doctor cannot read",
                f"{', '.join(needs_key)} delete a key on a tombstone, read from the record's key as text",
                key="key.converter",
                fix="set key.converter=org.apache.kafka.connect.storage.StringConverter (or JsonConverter) on the connector",
                table=needs_key[0],
            )
        ]
    if converter.rsplit(".", 1)[-1] in BYTES_CONVERTERS:
        return [
            f.finding(
                Check.KEY_CONVERTER,
                BLOCKING,
                f"key.converter={converter.rsplit('.', 1)[-1]}: the sink writes each key as base64 text",
                f"{', '.join(needs_key)} read a tombstone's key as JSON (or the bare key); base64 text "
                "matches no row, so deletes are lost",
                key="key.converter",
                fix="key.converter=org.apache.kafka.connect.storage.StringConverter (JSON keys as text)",
                table=needs_key[0],
            )
        ]
    return []


def errors_tolerance(f: ConnectorFacts) -> list[DoctorFinding]:
    """Records Connect cannot convert are not dropped silently."""
    if f.config.get("errors.tolerance", "none").strip().lower() != "all":
        return []
    if not f.config.get("errors.deadletterqueue.topic.name"):
        return [
            f.finding(
                Check.ERRORS_TOLERANCE,
                BLOCKING,
                "errors.tolerance=all without a dead letter queue",
                "a record Connect cannot convert is skipped and its offset committed: it is lost without "
                "a trace, and the table shows only a gap",
                key="errors.tolerance",
                fix="errors.tolerance=none (the task stops on a bad record), or set errors.deadletterqueue.topic.name",
            )
        ]
    return [
        f.finding(
            Check.ERRORS_TOLERANCE,
            WARNING,
            f"errors.tolerance=all: bad records go to {f.config['errors.deadletterqueue.topic.name']}, not the table",
            "records routed to Connect's dead letter queue are gaps in the table; the audit reports them",
            key="errors.deadletterqueue.topic.name",
            fix="watch the dead letter topic and replay what belongs in the table",
        )
    ]


def file_cadence(f: ConnectorFacts) -> list[DoctorFinding]:
    """Files complete at least as often as the tables commit, and are not tiny."""
    out = []
    intervals = [t.commit.interval_seconds for t in f.routed().values()]
    interval = min(intervals) if intervals else None
    for key in ("rotate.schedule.interval.ms", "rotate.interval.ms"):
        raw = f.config.get(key, "")
        if count(raw) is not None and interval and int(raw) > interval * 1000:
            out.append(
                f.finding(
                    Check.FILE_CADENCE,
                    WARNING,
                    f"{key}={raw}: files complete every {int(raw) / 1000:g} s, the tables commit every {interval:g} s",
                    "a round commits only completed files: records wait for the file to close, so freshness "
                    "is bounded by the file cadence, not the commit interval",
                    key=key,
                    fix=f"{key}={int(interval * 1000)} or less",
                )
            )
    if (
        not is_aiven(f.config)
        and "flush.size" in f.config
        and not any(f.config.get(k) for k in ("rotate.schedule.interval.ms", "rotate.interval.ms"))
    ):
        out.append(
            f.finding(
                Check.FILE_CADENCE,
                WARNING,
                f"flush.size={f.config['flush.size']} and no rotation interval: a file closes only when full",
                "a quiet partition holds its last records in an open file indefinitely: they never commit",
                key="rotate.schedule.interval.ms",
                fix="rotate.schedule.interval.ms at or below the commit interval",
            )
        )
    raw = f.config.get("file.max.records", "")
    if count(raw) is not None and 0 < int(raw) < SMALL_FILE_RECORDS:
        out.append(
            f.finding(
                Check.FILE_CADENCE,
                WARNING,
                f"file.max.records={raw}: many small files",
                "each file is a manifest entry, a footer read and a table file until compaction: small files "
                "cost commit time and reader time",
                key="file.max.records",
                fix="file.max.records=0 (a file per flush), or keep tables[].maintenance on",
            )
        )
    if is_aiven(f.config) and interval is not None and not out:
        out.append(
            f.finding(
                Check.FILE_CADENCE,
                INFO,
                "Aiven's sink completes its files at the worker's offset flush (offset.flush.interval.ms, a "
                "worker setting the doctor cannot read; Connect's default is 60000)",
                f"a round commits only completed files: keep the flush at or below the commit interval ({interval:g} s)",
                key="offset.flush.interval.ms",
                fix=f"offset.flush.interval.ms={int(interval * 1000)} in the worker's properties",
            )
        )
    return out


def connector_state(f: ConnectorFacts) -> list[DoctorFinding]:
    """The connector and its tasks run."""
    state = f.spec.state
    if state is None or (state == "RUNNING" and not f.spec.failed_tasks):
        return []
    if state == "MISSING":
        message, severity = "Connect has no such connector", BLOCKING
    elif f.spec.failed_tasks:
        message, severity = f"tasks {list(f.spec.failed_tasks)} failed", WARNING
    else:
        message, severity = f"the connector is {state}", WARNING
    return [
        f.finding(
            Check.CONNECTOR_STATE,
            severity,
            message,
            "a stopped task writes no files: its partitions' records wait in Kafka (and expire with its retention)",
            key="connector.class",
            fix="see the task's trace in Connect's status API; restart it when the cause is fixed",
        )
    ]


SINK_CHECKS: dict[Check, CheckFn] = {
    Check.CONNECTOR_STATE: connector_state,
    Check.FORMAT: file_format,
    Check.FILE_NAMING: file_naming,
    Check.OFFSET_FIELD: offset_field,
    Check.UPSERT_FIELDS: upsert_fields,
    Check.PARTITION_FIELDS: partition_fields,
    Check.KEY_CONVERTER: key_converter,
    Check.ERRORS_TOLERANCE: errors_tolerance,
    Check.FILE_CADENCE: file_cadence,
}
