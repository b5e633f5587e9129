"""What a storage sink connector's config says about the files it writes.

Standard library only. Read by the sidecar (which format each connector writes, how its CSV lines
are laid out, how its object keys are named: :mod:`sidecar.connect`, :mod:`sidecar.storage`) and by
the service's doctor (:mod:`commit_service.doctor`), which checks a connector's config against what
exactly once needs. Both speak of the same keys of Aiven's sink (``format.output.type``,
``format.output.fields``, ``file.name.template``, ``aws.s3.prefix``) and of Confluent's
(``format.class``, ``topics.dir``, ``s3.bucket.name``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakegate_core.errors import ProtocolError
from lakegate_core.protocol import CsvLayout, FileFormat

# Aiven's format.output.type -> what the service is told (csv is headerless; its layout, from
# format.output.fields and the value's encoding, goes with each file: csv_layout)
AIVEN_FORMATS = {
    "jsonl": FileFormat.JSONL,
    "parquet": FileFormat.PARQUET,
    "csv": FileFormat.CSV,
    "avro": FileFormat.AVRO,
    "json": FileFormat.JSON,
}
# Confluent's format.class (its simple name) -> the same
CONFLUENT_FORMATS = {"ParquetFormat": FileFormat.PARQUET, "JsonFormat": FileFormat.JSONL, "AvroFormat": FileFormat.AVRO}

# How the sidecar reads an object key (relative to its listing prefix) as (topic, partition, start)
NAMING_PRESETS = {
    "aiven": r"(?P<topic>.+)-(?P<partition>\d+)-(?P<start_offset>\d+)(?:\.[A-Za-z0-9]+)*",
    # Confluent's layout whatever its partitioner: <topics.dir>/<topic>/<encoded partition>/<topic>+<p>+<start>
    "confluent": r"(?:.+/)?(?P<topic>[^/]+)/(?:.+/)?(?P=topic)\+(?P<partition>\d+)\+(?P<start_offset>\d+)(?:\.[A-Za-z0-9]+)*",
}

# Aiven's file.compression.type -> the extension its file names get (unset: gzip's)
COMPRESSION_EXTENSIONS = {"none": "", "gzip": ".gz", "snappy": ".snappy", "zstd": ".zst"}
TEMPLATE_VARIABLE = re.compile(r"\{\{\s*([^}:\s]+)\s*(?::\s*([^}]*?)\s*)?}}")
NAME_VARIABLES = ("topic", "partition", "start_offset")  # what a file's name must carry


def output_format(config: Mapping[str, Any]) -> tuple[FileFormat | None, str]:
    """The data file format a sink connector writes, from its own config, and where that came from.

    ``(None, why)`` when it writes a format the service cannot commit (raw bytes, ...).
    The compression (``file.compression.type``) is not needed: the service reads it from the bytes.
    """
    if "format.output.type" in config:
        value = str(config["format.output.type"]).strip().lower()
        found = AIVEN_FORMATS.get(value)
        return found, f"format.output.type={value}" + ("" if found else " is not jsonl, json, parquet, csv or avro")
    if "format.class" in config:
        simple = str(config["format.class"]).rsplit(".", 1)[-1]
        found = CONFLUENT_FORMATS.get(simple)
        return found, f"format.class={simple}" + ("" if found else " is not ParquetFormat, JsonFormat or AvroFormat")
    if is_aiven(config):
        return FileFormat.CSV, "format.output.type unset: Aiven's default, csv"
    return None, (
        "neither format.output.type nor format.class is set; set format.output.type (jsonl, parquet, "
        "csv or avro) on the connector, or connect.formats in sidecar.yaml"
    )


def csv_layout(config: Mapping[str, Any]) -> CsvLayout:
    """How an Aiven sink lays out its CSV lines, from its config: ``format.output.fields`` in order
    (default ``value``) and ``format.output.fields.value.encoding`` (default ``base64``)."""
    encoding = str(config.get("format.output.fields.value.encoding", "base64")).strip().lower()
    return CsvLayout(output_fields(config) or ("value",), encoding)


def is_aiven(config: Mapping[str, Any]) -> bool:
    """Whether the connector speaks Aiven's keys (its class, or ``format.output.type`` set)."""
    return "aiven" in str(config.get("connector.class", "")).lower() or "format.output.type" in config


def output_fields(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The record fields an Aiven sink writes (``format.output.fields``, default ``value``); empty
    for a sink without the key (Confluent's writes the value alone)."""
    if not is_aiven(config) and "format.output.fields" not in config:
        return ()
    raw = str(config.get("format.output.fields", "value"))
    return tuple(f.strip() for f in raw.split(",") if f.strip()) or ("value",)


@dataclass(frozen=True)
class SinkLocation:
    """Where a sink writes: its bucket and the key prefix every object it writes starts with."""

    scheme: str  # s3 | gs | hdfs | "" (not told)
    bucket: str | None
    prefix: str = ""

    @property
    def uri(self) -> str | None:
        """As the service's ``allowed_roots`` and table paths spell S3 (``s3a://``), or None."""
        return self.key_uri(self.prefix)

    def key_uri(self, key: str) -> str | None:
        """The URI of the object ``key`` (a whole key in the bucket), or None without a bucket."""
        if not self.bucket:
            return None
        scheme = "s3a" if self.scheme == "s3" else self.scheme
        return f"{scheme}://{self.bucket}/{key}"


def sink_location(config: Mapping[str, Any]) -> SinkLocation:
    """The bucket and fixed key prefix of a sink's objects (Aiven's S3 and GCS sinks, Confluent's S3)."""
    for scheme, keys in (
        ("s3", ("aws.s3.bucket.name", "aws_s3_bucket", "s3.bucket.name")),
        ("gs", ("gcs.bucket.name",)),
    ):
        for key in keys:
            if config.get(key):
                return SinkLocation(scheme, str(config[key]), _fixed_prefix(config))
    return SinkLocation("", None)


def _fixed_prefix(config: Mapping[str, Any]) -> str:
    prefix = config.get("aws.s3.prefix") or config.get("aws_s3_prefix") or config.get("file.name.prefix")
    if prefix:
        return str(prefix)
    template = config.get("file.name.template")
    if template and is_aiven(config):  # the part of the template before its first variable
        return str(template).split("{{", 1)[0]
    return ""


@dataclass(frozen=True)
class RenderedName:
    """The key a sink would give a file of (topic, partition, start), relative to its location's
    prefix; ``missing`` names the variables its naming does not carry (then ``key`` is None)."""

    key: str | None
    source: str  # which config key decided the name (for messages)
    missing: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()  # template variables that vary by record (key, timestamp): not one file per start


def object_key(config: Mapping[str, Any], topic: str, partition: int, start: int) -> RenderedName:
    """The object key a sink connector gives the file of ``topic``/``partition`` starting at ``start``,
    by Aiven's rules (an ``aws.s3.prefix`` names ``<prefix><topic>-<partition>-<start, 20 digits>``
    plus the compression's extension; else ``file.name.template``, default
    ``{{topic}}-{{partition}}-{{start_offset}}`` plus the extension) or Confluent's
    (:class:`ConfluentLayout`; a partitioner whose directories vary by record renders a sample's)."""
    layout = ConfluentLayout.of(config)
    if layout is not None:
        return RenderedName(layout.key(topic, partition, start), "Confluent's layout (" + layout.described + ")")
    compression = str(config.get("file.compression.type", "gzip")).strip().lower()
    ext = COMPRESSION_EXTENSIONS.get(compression, "")
    prefix = config.get("aws.s3.prefix") or config.get("aws_s3_prefix")
    if prefix:
        return RenderedName(f"{topic}-{partition}-{start:020d}{ext}", "aws.s3.prefix (Aiven's prefix naming)")
    template = config.get("file.name.template")
    if not template:
        return RenderedName(f"{topic}-{partition}-{start}{ext}", "file.name.template unset (Aiven's default)")
    values = {"topic": topic, "partition": partition, "start_offset": start}
    seen: set[str] = set()
    unknown: list[str] = []

    def fill(m: re.Match[str]) -> str:
        name, params = m.group(1).lower(), (m.group(2) or "").replace(" ", "").lower()
        if name not in values:
            unknown.append(name)
            return "{" + name + "}"
        seen.add(name)
        if "padding=true" in params:
            return f"{values[name]:0{20 if name == 'start_offset' else 10}d}"
        return str(values[name])

    rendered = TEMPLATE_VARIABLE.sub(fill, str(template))
    missing = tuple(v for v in NAME_VARIABLES if v not in seen)
    fixed = _fixed_prefix(config)
    key = rendered[len(fixed) :] if rendered.startswith(fixed) else rendered
    source = f"file.name.template={template}"
    return RenderedName(None if missing else key, source, missing, tuple(unknown))


def offset_width(config: Mapping[str, Any]) -> int | None:
    """How many digits the connector's names give a start offset, zero-padded (Aiven's prefix
    naming or ``padding=true``: 20; Confluent's ``filename.offset.zero.pad.width``); None where
    they are not padded or the naming does not say (a listing can then not rely on the width)."""
    one, two = object_key(config, "t", 9, 1).key, object_key(config, "t", 9, 2).key
    if one is None or two is None or len(one) != len(two):
        return None
    end = next(i for i, (a, b) in enumerate(zip(one, two, strict=True)) if a != b)
    start = end
    while start > 0 and one[start - 1] == "0":
        start -= 1
    return end - start + 1 if end > start else None


def parse_name(regex: str, key: str) -> tuple[str, int, int] | None:
    """(topic, partition, start) as a naming regex (a preset's or a custom one with the named
    groups ``topic``, ``partition``, ``start_offset``) reads ``key``; None if it does not match."""
    try:
        m = re.fullmatch(NAMING_PRESETS.get(regex, regex), key)
    except re.error as exc:
        raise ProtocolError("naming", f"not a regular expression: {exc}") from None
    if m is None:
        return None
    try:
        return m.group("topic"), int(m.group("partition")), int(m.group("start_offset"))
    except (IndexError, ValueError):
        return None


# Confluent's partitioners (the simple names of partitioner.class) and the path.format of the fixed ones
CONFLUENT_PARTITIONERS = (
    "DefaultPartitioner",
    "FieldPartitioner",
    "TimeBasedPartitioner",
    "DailyPartitioner",
    "HourlyPartitioner",
)
FIXED_PATH_FORMATS = {
    "DailyPartitioner": "'year'=YYYY/'month'=MM/'day'=dd",
    "HourlyPartitioner": "'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH",
}
SAMPLE_TIME = (2026, 1, 2, 3, 4, 5)  # the instant a time-based path is rendered at for a sample name
JODA_FIELD = re.compile(r"'([^']*)'|([A-Za-z])\2*")


@dataclass(frozen=True)
class ConfluentLayout:
    """Where Confluent's S3 sink puts a file and how it names it, from the connector's config:
    ``<topics.dir><d><topic><d><encoded partition><d><topic>+<partition>+<start>.<ext>`` with ``<d>``
    ``directory.delim`` (``/``), the encoded partition the partitioner's (``partition=<p>`` for the
    default one, ``<field>=<value>`` for the field partitioner, ``path.format`` at the record's
    time for the time-based ones) and the start offset zero-padded to
    ``filename.offset.zero.pad.width`` (10) digits. Only the default partitioner keeps each Kafka
    partition in a directory of its own (the sidecar then lists a partition alone)."""

    topics_dir: str = "topics"
    partitioner: str = "DefaultPartitioner"  # the simple name of partitioner.class
    path_format: str = ""  # time-based: the Joda-Time pattern of the directories
    fields: tuple[str, ...] = ()  # FieldPartitioner: partition.field.name
    directory_delim: str = "/"
    file_delim: str = "+"
    pad_width: int = 10
    extension: str = ""

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> ConfluentLayout | None:
        """The layout of a Confluent sink connector's files; None for a connector of Aiven's keys."""
        if is_aiven(config) or "format.class" not in config:
            return None
        partitioner = str(config.get("partitioner.class", "DefaultPartitioner")).rsplit(".", 1)[-1]
        path_format = FIXED_PATH_FORMATS.get(partitioner, str(config.get("path.format", "")))
        fields = tuple(f.strip() for f in str(config.get("partition.field.name", "")).split(",") if f.strip())
        width = str(config.get("filename.offset.zero.pad.width", "10")).strip()
        return cls(
            topics_dir=str(config.get("topics.dir", "topics")).strip("/"),
            partitioner=partitioner,
            path_format=path_format,
            fields=fields,
            directory_delim=str(config.get("directory.delim", "/")),
            file_delim=str(config.get("file.delim", "+")),
            pad_width=int(width) if width.isdigit() else 10,
            extension=_confluent_extension(config),
        )

    @property
    def by_partition(self) -> bool:
        """Whether each Kafka partition's files sit in a directory of their own."""
        return self.partitioner == "DefaultPartitioner"

    @property
    def described(self) -> str:
        return f"topics.dir={self.topics_dir}, partitioner.class={self.partitioner}"

    def topic_prefix(self, topic: str) -> str:
        """What every key of ``topic``'s files starts with."""
        d = self.directory_delim
        return f"{self.topics_dir}{d}{topic}{d}" if self.topics_dir else f"{topic}{d}"

    def partition_prefix(self, topic: str, partition: int) -> str | None:
        """What every key of one partition's files starts with up to its start offset's digits
        (the default partitioner's); None where a partition's files share directories."""
        if not self.by_partition:
            return None
        return (
            f"{self.topic_prefix(topic)}partition={partition}{self.directory_delim}{self.file_name(topic, partition)}"
        )

    def file_name(self, topic: str, partition: int, start: int | None = None) -> str:
        """The name of the file starting at ``start``; without it, the name up to the offset."""
        head = f"{topic}{self.file_delim}{partition}{self.file_delim}"
        return head if start is None else f"{head}{start:0{self.pad_width}d}{self.extension}"

    def key(self, topic: str, partition: int, start: int) -> str:
        """The key of a file; the directories of a partitioner that encodes by record are a sample's."""
        d = self.directory_delim
        if self.partitioner == "FieldPartitioner":
            encoded = d.join(f"{f}=x" for f in self.fields or ("field",))
        elif self.path_format:
            encoded = _joda(self.path_format, SAMPLE_TIME)
        else:
            encoded = f"partition={partition}"
        return f"{self.topic_prefix(topic)}{encoded}{d}{self.file_name(topic, partition, start)}"


def _confluent_extension(config: Mapping[str, Any]) -> str:
    """What Confluent's formats append: ``.avro``; ``.json`` (``.json.gz`` with
    ``s3.compression.type=gzip``); ``.<codec>.parquet`` (``parquet.codec``, snappy by default)."""
    simple = str(config.get("format.class", "")).rsplit(".", 1)[-1]
    if simple == "AvroFormat":
        return ".avro"
    if simple == "JsonFormat":
        return ".json" + (".gz" if str(config.get("s3.compression.type", "none")).lower() == "gzip" else "")
    if simple == "ParquetFormat":
        codec = str(config.get("parquet.codec", "snappy")).lower()
        return ("" if codec in ("none", "uncompressed") else f".{codec}") + ".parquet"
    return ".bin"


def _joda(pattern: str, when: tuple[int, ...]) -> str:
    """A Joda-Time pattern (``'year'=YYYY/'month'=MM``) at ``when`` (year, month, day, hour, minute,
    second): the fields a partition path uses; other letters are kept as they are."""
    values = {"Y": when[0], "y": when[0], "M": when[1], "d": when[2], "H": when[3], "m": when[4], "s": when[5]}

    def field(m: re.Match[str]) -> str:
        if m.group(1) is not None:
            return m.group(1) if m.group(0) != "''" else "'"
        letter, n = m.group(0)[0], len(m.group(0))
        return f"{values[letter]:0{n}d}" if letter in values else m.group(0)

    return JODA_FIELD.sub(field, pattern)
