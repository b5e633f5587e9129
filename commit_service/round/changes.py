"""Upsert and CDC tables, the Spark half: one round's records as *changes*, by key, as Spark
DataFrames (the pure half, the spec and the row image's shape, is ``commit_service.domain.upsert``).

Called by :class:`~commit_service.round.upsert_round.RoundChanges` (both formats' upserts):
:func:`changes` makes one change per record (the row image, whether it deletes its key, the value
that orders two changes of one key), :func:`latest` keeps each key's last change,
:func:`key_range` bounds the table rows a round's keys can match and :func:`not_older` drops the
changes older than the row the table holds.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

from commit_service.domain.content import KAFKA_COLUMNS
from commit_service.domain.upsert import DEBEZIUM_UPSERTS, DELETE, ORDER, TABLE_ORDER, Cdc, ChangeError, UpsertSpec


def changes(
    raw: Any,
    spec: UpsertSpec,
    table_type: Any | None = None,
    check_keys: bool = True,
    read: Measured | None = None,
) -> Any:
    """One change per record of ``raw`` (the sink's envelope, as Spark read it): the row image's
    columns, ``_kafka_*`` columns from the envelope, and :data:`DELETE` / :data:`ORDER`.
    ``table_type`` (the table's Spark schema) is the row type of a round holding only tombstones,
    whose values Spark cannot type (without a table yet, the Kafka keys' type is).
    ``check_keys``: a Spark job here refuses a change without a key; without it the caller counts
    :func:`no_key` where the changes are read anyway (a round's one pass, :class:`Measured`), as
    ``read`` measures the records (after the jobs of their own this may run on ``raw``: a
    measure is taken by the first action that reads it)."""
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
    if read is not None:
        raw = read.on(raw)
    staged = raw.where(keep).select(image.alias("__image"), deletes.alias(DELETE), *kafka)
    order = F.col(spec.ordering if spec.ordering.startswith("_kafka_") else f"__image.{spec.ordering}")
    names = [f.name for f in image_type.fields]
    out = staged.select(
        *[F.col(f"__image.{n}").alias(n) for n in names],
        *[F.col(c) for c in staged.columns if c.startswith("_kafka_")],
        F.col(DELETE),
        order.alias(ORDER),
    )
    if check_keys and out.where(no_key(spec)).limit(1).count():
        raise ChangeError(no_key_message(spec))
    return out


def no_key(spec: UpsertSpec) -> Any:
    """A change with no value for some key column (a Column: true for such a change)."""
    from pyspark.sql import functions as F

    return functools.reduce(lambda a, b: a | b, [F.col(f"`{k}`").isNull() for k in spec.key])


def no_key_message(spec: UpsertSpec) -> str:
    return f"a record has no value for the key column(s) {list(spec.key)}"


class Measured:
    """Aggregates of a frame taken in the pass that reads it anyway (Spark's ``observe``): added
    with :meth:`on` before the frame's action, read with :meth:`values` after it. Where Spark
    reports none (a plan it found empty and did not run), one job of their own counts them."""

    def __init__(self, name: str, *measures: Any) -> None:
        import uuid

        self.measures = measures
        self._name = f"lakegate_{name}_{uuid.uuid4().hex[:8]}"  # one per plan, whatever runs beside it
        self._observation: Any = None
        self._frame: Any = None

    def on(self, frame: Any) -> Any:
        """``frame`` measured as it is read (a new frame: use it instead of ``frame``)."""
        from pyspark.sql import Observation

        self._observation, self._frame = Observation(self._name), frame
        return frame.observe(self._observation, *self.measures)

    def values(self) -> dict[str, Any]:
        """The measures, after an action read the frame :meth:`on` returned (or a frame of it)."""
        try:
            return dict(self._observation.get)
        except Exception:  # no metrics: Spark did not run the plan's measuring node (nothing to read)
            return self._frame.agg(*self.measures).first().asDict()  # type: ignore[no-any-return]


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


def key_measures(schema: Any, key: tuple[str, ...]) -> list[Any]:
    """The aggregates :func:`key_range` reads from a round's last changes (of Spark ``schema``):
    their count, and the least and greatest value of each key column of an ordered type."""
    from pyspark.sql import functions as F

    columns = [F.col(f"`{k}`") for k in _ordered(schema, key)]  # quoted: a key's name may hold a dot
    bounds = [agg for i, c in enumerate(columns) for agg in (F.min(c).alias(f"lo{i}"), F.max(c).alias(f"hi{i}"))]
    return [F.count(F.lit(1)).alias("n"), *bounds]


class KeyRange(NamedTuple):
    """What :func:`key_range` measures of a round's kept changes."""

    kept: int  # how many changes the round keeps
    condition: Any | None  # Column every table row of one of their keys meets (None: nothing bounds them)
    limits: dict[str, tuple[Any, Any]]  # key column -> (least, greatest) as Python values (the same bounds)


def key_range(measured: dict[str, Any], schema: Any, key: tuple[str, ...]) -> KeyRange:
    """How many changes a round keeps, and a condition every table row of one of their keys meets
    (a Column; None: nothing bounds them), from :func:`key_measures` of those changes (of Spark
    ``schema``): each key column of an ordered type (integers, dates, decimals) between the
    round's least and greatest value, the literals of the column's own type (data skipping needs
    the column uncast). The formats scan the table under it, so a file whose statistics put its
    keys outside the range is never read: a round of new keys above the table's (an identity, a
    sequence) reads no file at all. Text keys are not bounded: most are random (UUIDs), their
    range is the whole table's, and filtering by it cost a Delta round on S3 about 0.5 s for
    nothing; nor timestamps and floating point keys (a literal's time zone, NaN). The same bounds
    as Python values are :attr:`KeyRange.limits` (a Delta table's files are matched against them
    from its log, :mod:`commit_service.delta.key_ranges`)."""
    from pyspark.sql import functions as F

    ordered = _ordered(schema, key)
    limits = {
        k: (measured[f"lo{i}"], measured[f"hi{i}"]) for i, k in enumerate(ordered) if measured[f"lo{i}"] is not None
    }
    conditions = [
        F.col(f"`{k}`").between(F.lit(lo).cast(schema[k].dataType), F.lit(hi).cast(schema[k].dataType))
        for k, (lo, hi) in limits.items()
    ]
    condition = functools.reduce(lambda a, b: a & b, conditions) if conditions else None
    return KeyRange(int(measured["n"]), condition, limits)


def _ordered(schema: Any, key: tuple[str, ...]) -> list[str]:
    from pyspark.sql.types import DateType, DecimalType, IntegralType

    return [k for k in key if isinstance(schema[k].dataType, (IntegralType, DateType, DecimalType))]


def latest(changes_df: Any, spec: UpsertSpec) -> Any:
    """Each key's last change in the round: the greatest :data:`ORDER` (ties: any one of them)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rank = F.row_number().over(Window.partitionBy(*spec.key).orderBy(F.col(ORDER).desc_nulls_last()))
    return changes_df.withColumn("__rank", rank).where(F.col("__rank") == 1).drop("__rank")
