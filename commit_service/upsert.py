"""Upsert and CDC tables: what one round's files change, by key, as Spark DataFrames.

Read by :class:`~commit_service.delta_commit.DeltaCommitter` for a table with ``mode: upsert``.
A round's files become *changes* (:func:`changes`): per record, the row image, whether it deletes
its key, and the value that orders two changes of one key. :func:`latest` keeps each key's last
change. The committer then marks the rows holding those keys deleted (deletion vectors; or, with
``deletion_vectors: false``, rewrites their files) and commits that, the new rows and the
partitions' ``txn`` actions as one Delta transaction (``docs/design.md``, "Upserts").

What a record means:

- ``cdc: none`` — the record's value is the row; ``delete_on_tombstone: true`` makes a record
  whose value is null (a Kafka tombstone) delete its key, read from the record's Kafka key (a JSON
  object holding the key columns, or for a one-column key the bare value).
- ``cdc: debezium`` — the value is Debezium's envelope ``{before, after, source, op, ts_ms}``:
  ``c``, ``u`` and ``r`` upsert ``after``; ``d`` deletes ``before``'s key; a tombstone (Debezium
  sends one after each delete) is skipped unless ``delete_on_tombstone``.

The sink must write the envelope fields this needs (``format.output.fields``): ``value``, plus
``offset`` for the default ordering and ``key`` for tombstones. :func:`required_fields` says which;
the pure parts here are unit-tested, the Spark parts run in the integration tests.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from commit_service.content import KAFKA_COLUMNS
from commit_service.round_schema import VOID, Schema, merge_struct

OFFSET_COLUMN = KAFKA_COLUMNS["offset"]  # "_kafka_offset": the default ordering
DELETE = "__lakegate_delete"  # internal columns of a change; never written to the table
ORDER = "__lakegate_order"
TABLE_ORDER = "__lakegate_table_order"  # the ordering of the row a change replaces
INTERNAL = (DELETE, ORDER)
DEBEZIUM_UPSERTS = ("c", "u", "r")  # create, update, read (snapshot)


class TableMode(str, Enum):
    APPEND = "append"  # every record is a new row (the default)
    UPSERT = "upsert"  # one row per key: the last change wins, deletes remove it


class Cdc(str, Enum):
    NONE = "none"  # the record's value is the row
    DEBEZIUM = "debezium"  # the value is Debezium's change envelope


class ChangeError(ValueError):
    """A round's records cannot be read as changes (a key column missing, a null key, ...)."""


@dataclass(frozen=True)
class UpsertSpec:
    """How an upsert table reads and applies changes: ``tables[].key``, ``ordering``, ``cdc``,
    ``delete_on_tombstone``, ``deletion_vectors`` (built by :class:`~commit_service.config.TableConfig`)."""

    key: tuple[str, ...]
    ordering: str = OFFSET_COLUMN
    cdc: Cdc = Cdc.NONE
    delete_on_tombstone: bool = False
    deletion_vectors: bool = True  # mark replaced rows deleted, do not rewrite their files

    @property
    def orders_across_rounds(self) -> bool:
        """Whether a change must also beat the row already in the table (by ``ordering``): true
        for any ordering but the offset. Offsets of a key's partition only grow, so with them a
        later round always holds the later change."""
        return self.ordering != OFFSET_COLUMN

    def required_fields(self) -> tuple[str, ...]:
        """The sink envelope's fields (``format.output.fields``) this table needs."""
        fields = ["value"]
        if self.ordering == OFFSET_COLUMN:
            fields.append("offset")
        if self.delete_on_tombstone:
            fields.append("key")
        return tuple(fields)

    def check_envelope(self, columns: Mapping[str, Any]) -> None:
        """Raise :class:`ChangeError` unless a round's raw columns hold the envelope fields this
        table needs."""
        missing = [f for f in self.required_fields() if f not in columns]
        if missing:
            raise ChangeError(
                f"upsert needs the sink to write the fields {list(self.required_fields())} "
                f"(format.output.fields); these files lack {missing}"
            )

    def check_image(self, columns: Mapping[str, Any]) -> None:
        """Raise :class:`ChangeError` unless the row images hold every key column."""
        missing = [k for k in self.key if k not in columns]
        if missing:
            raise ChangeError(f"the records lack the key column(s) {missing} (tables[].key)")


def image_shape(raw: Schema, spec: UpsertSpec) -> Schema | None:
    """The row image of a round's raw (envelope) schema, voids kept: the value's struct, or for
    Debezium ``before`` and ``after`` joined (one row type; either is null in some changes).
    None where no value has a type (every record a tombstone)."""
    value = next((f["type"] for f in raw["fields"] if f["name"] == "value"), VOID)
    if not isinstance(value, dict) or value.get("type") != "struct":
        return None
    if spec.cdc is Cdc.NONE:
        return value
    parts = {f["name"]: f["type"] for f in value["fields"]}
    image: Schema = {"type": "struct", "fields": []}
    for name in ("before", "after"):
        part = parts.get(name, VOID)
        if isinstance(part, dict) and part.get("type") == "struct":
            image = merge_struct(image, part, "value.")
    return image


def typed_raw(raw: Schema, spec: UpsertSpec, table: Schema | None, widen: bool = False) -> Schema:
    """A round's raw schema whose row image is typed by the table wherever the round's values are
    all null, and for Debezium holds one row type in both ``before`` and ``after`` (a delete-only
    round's ``after`` is null in every record). Raises :class:`~commit_service.round_schema.Conflict`
    where the image cannot join the table's columns."""
    image = image_shape(raw, spec)
    if image is None:
        return raw
    if table is not None:
        row = {**table, "fields": [f for f in table["fields"] if f["name"] not in KAFKA_COLUMNS.values()]}
        image = merge_struct(row, image, "", row, widen)
    fields = []
    for f in raw["fields"]:
        if f["name"] == "value" and spec.cdc is Cdc.NONE:
            f = {**f, "type": image}
        elif f["name"] == "value":
            parts = [{**g, "type": image} if g["name"] in ("before", "after") else g for g in f["type"]["fields"]]
            f = {**f, "type": {**f["type"], "fields": parts}}
        fields.append(f)
    return {**raw, "fields": fields}


def changes(raw: Any, spec: UpsertSpec, table_type: Any | None = None) -> Any:
    """One change per record of ``raw`` (the sink's envelope, as Spark read it): the row image's
    columns, ``_kafka_*`` columns from the envelope, and :data:`DELETE` / :data:`ORDER`.
    ``table_type`` (the table's Spark schema) is the row type of a round holding only tombstones,
    whose values Spark cannot type (without a table yet, the Kafka keys' type is)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    structs = {f.name: f.dataType for f in raw.schema.fields}
    spec.check_envelope(structs)
    value_type = raw.schema["value"].dataType
    kafka = [F.col(name).alias(alias) for name, alias in KAFKA_COLUMNS.items() if name in structs]
    tombstone = F.col("value").isNull()
    only_tombstones = not isinstance(value_type, StructType) and (
        raw.where(F.col("value").isNotNull()).limit(1).count() == 0  # a Spark job, only in this case
    )
    if spec.cdc is Cdc.DEBEZIUM and only_tombstones:  # Debezium's tombstones after deletes, nothing else
        image_type = _without_kafka(table_type) if table_type is not None else _key_type(raw, spec)
        image, deletes, keep = None, F.lit(False), F.lit(False)
    elif spec.cdc is Cdc.DEBEZIUM:
        if not isinstance(value_type, StructType) or not {"op", "after", "before"} <= set(value_type.names):
            raise ChangeError("cdc: debezium needs each value to be Debezium's envelope {before, after, op, ...}")
        op = F.col("value.op")
        image_type = _image_type(value_type)
        image = F.when(op == "d", F.col("value.before")).otherwise(F.col("value.after"))
        deletes = op == "d"
        keep = op.isin(*DEBEZIUM_UPSERTS) | deletes
    else:
        if isinstance(value_type, StructType):
            image_type, image = value_type, F.col("value")
        elif spec.delete_on_tombstone and only_tombstones:  # Spark could not type the values
            image_type = _without_kafka(table_type) if table_type is not None else _key_type(raw, spec)
            image = None
        else:
            raise ChangeError("upsert needs each record's value to be a JSON object or struct (the row)")
        deletes = F.lit(False)
        keep = ~tombstone
    spec.check_image({f.name: f.dataType for f in image_type.fields})
    if spec.delete_on_tombstone:
        key_image = _key_image(raw, spec, image_type)
        image = key_image if image is None else F.when(tombstone, key_image).otherwise(image)
        deletes = deletes | tombstone
        keep = keep | tombstone
    if image is None:  # nothing of the round is kept: an empty frame of the row type
        image = F.lit(None).cast(image_type)
    staged = raw.where(keep).select(image.alias("__image"), deletes.alias(DELETE), *kafka)
    order = F.col(spec.ordering if spec.ordering.startswith("_kafka_") else f"__image.{spec.ordering}")
    names = [f.name for f in image_type.fields]
    out = staged.select(
        *[F.col(f"__image.{n}").alias(n) for n in names],
        *[F.col(c) for c in staged.columns if c.startswith("_kafka_")],
        F.col(DELETE),
        order.alias(ORDER),
    )
    any_null = functools.reduce(lambda a, b: a | b, [F.col(k).isNull() for k in spec.key])
    null_key = out.where(any_null).limit(1).count()
    if null_key:
        raise ChangeError(f"a record has no value for the key column(s) {list(spec.key)}")
    return out


def _key_type(raw: Any, spec: UpsertSpec) -> Any:
    """The row type a table gets from a first round of tombstones only: its key columns, typed as
    the Kafka keys are (a later round widens it)."""
    from pyspark.sql.types import StringType, StructField, StructType

    key_type = _text_key_type(raw) or raw.schema["key"].dataType
    if isinstance(key_type, StructType):
        missing = [k for k in spec.key if k not in key_type.names]
        if missing:
            raise ChangeError(f"the tombstones' Kafka keys lack the key column(s) {missing}")
        return StructType([key_type[k] for k in spec.key])
    if len(spec.key) != 1:
        raise ChangeError(f"a tombstone's Kafka key must be an object holding the key columns {list(spec.key)}")
    return StructType([StructField(spec.key[0], StringType())])


def _text_key_type(raw: Any) -> Any | None:
    """The object type of keys written as JSON text (inferred from the first such key: two Spark
    jobs, only for a new table's first round of tombstones), else None."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DataType, StringType, StructType

    if not isinstance(raw.schema["key"].dataType, StringType):
        return None
    first = raw.where(F.ltrim(F.col("key")).startswith("{")).select("key").first()
    if first is None:
        return None
    ddl = raw.select(F.schema_of_json(F.lit(first[0]))).first()[0]
    inferred = DataType.fromDDL(ddl)
    return inferred if isinstance(inferred, StructType) else None


def _without_kafka(table_type: Any) -> Any:
    from pyspark.sql.types import StructType

    return StructType([f for f in table_type.fields if f.name not in KAFKA_COLUMNS.values()])


def _image_type(envelope: Any) -> Any:
    """Debezium's row type: ``after``'s, or ``before``'s when every record of the round deletes."""
    after = envelope["after"].dataType
    from pyspark.sql.types import StructType

    return after if isinstance(after, StructType) else envelope["before"].dataType


def _key_image(raw: Any, spec: UpsertSpec, image_type: Any) -> Any:
    """A tombstone's row image: the key columns from the record's Kafka key, the rest null. The
    key is an object (JSON lines), or its JSON text (the sink's Parquet output writes a
    schemaless key as a string), or for a one-column key the bare value."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    key_type = raw.schema["key"].dataType
    text = isinstance(key_type, StringType)
    parsed = F.from_json(F.col("key"), StructType([StructField(k, image_type[k].dataType) for k in spec.key]))
    is_object = F.ltrim(F.col("key")).startswith("{")
    fields = []
    for f in image_type.fields:
        if f.name not in spec.key:
            fields.append(F.lit(None).cast(f.dataType).alias(f.name))
        elif isinstance(key_type, StructType) and f.name in key_type.names:
            fields.append(F.col(f"key.{f.name}").cast(f.dataType).alias(f.name))
        elif isinstance(key_type, StructType) and len(spec.key) == 1 and "payload" in key_type.names:
            fields.append(F.col(f"key.payload.{f.name}").cast(f.dataType).alias(f.name))
        elif text and len(spec.key) == 1:
            bare = F.col("key").try_cast(f.dataType)  # a malformed key is a null key: refused, naming the file
            fields.append(F.when(is_object, parsed[f.name]).otherwise(bare).alias(f.name))
        elif text:
            fields.append(parsed[f.name].alias(f.name))
        elif len(spec.key) == 1:
            fields.append(F.col("key").cast(f.dataType).alias(f.name))
        else:
            raise ChangeError(f"a tombstone's Kafka key must be an object holding the key columns {list(spec.key)}")
    return F.struct(*fields)


def not_older(last: Any, table: Any, spec: UpsertSpec, *, broadcast: bool = False) -> Any:
    """``last`` without the changes whose ``ordering`` is below that of their key's row in
    ``table`` (a late change arriving after a newer one was committed). Equal values apply (a
    replay is idempotent); a change or row without a value applies (nothing to compare). A
    deleted key has no row left to compare with, so an older change arriving after its delete
    applies. ``broadcast``: ``last`` is small enough to send to every task scanning ``table``."""
    from pyspark.sql import functions as F

    root = spec.ordering.split(".", 1)[0]
    if root not in table.columns:
        return last
    current = table.select(*spec.key, F.col(spec.ordering).alias(TABLE_ORDER))
    probe = F.broadcast(last) if broadcast else last
    stale = probe.join(current, list(spec.key)).where(F.col(TABLE_ORDER) > F.col(ORDER)).select(*spec.key)
    return last.join(stale, list(spec.key), "left_anti")


def latest(changes_df: Any, spec: UpsertSpec) -> Any:
    """Each key's last change in the round: the greatest :data:`ORDER` (ties: any one of them)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rank = F.row_number().over(Window.partitionBy(*spec.key).orderBy(F.col(ORDER).desc_nulls_last()))
    return changes_df.withColumn("__rank", rank).where(F.col("__rank") == 1).drop("__rank")
