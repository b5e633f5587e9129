"""A DataFrame made to hold exactly a target schema: Spark column expressions, no data read here.

Called by :mod:`commit_service.round.convert` (and through it the upsert path) on each group of a
round's files once :mod:`commit_service.domain.round_schema` has decided the round's schema: every
target column is selected by name, a missing column or struct field is a typed null, a void
(all-null) one is a typed null, a narrower number is cast up, a struct is rebuilt field by field
(a null struct stays null), arrays and map values are conformed element by element. Frames
conformed to one schema union by position without loss.
"""

from __future__ import annotations

from typing import Any

from commit_service.domain.round_schema import VOID, Schema, SparkType


def conform(df: Any, source: Schema, target: Schema) -> Any:
    """``df`` (whose Spark schema is ``source``, voids marked) as ``target``'s columns, in order."""
    from pyspark.sql import functions as F

    have = {f["name"].lower(): f for f in source["fields"]}
    cols = []
    for f in target["fields"]:
        src = have.get(f["name"].lower())
        expr = F.col(f"`{src['name']}`") if src is not None else None
        cols.append(_cast(expr, src["type"] if src is not None else VOID, f["type"]).alias(f["name"]))
    return df.select(*cols)


def _cast(col: Any, source: SparkType, target: SparkType) -> Any:
    """``col`` (of type ``source``; None: absent) as ``target``."""
    from pyspark.sql import functions as F

    spark_type = _spark_type(target)
    if col is None or source == VOID:
        return F.lit(None).cast(spark_type)
    if source == target:
        return col
    if isinstance(target, str) or isinstance(source, str):
        return col.cast(spark_type)
    kind = target["type"]
    if kind == "struct":
        have = {f["name"].lower(): f for f in source["fields"]}
        fields = []
        for f in target["fields"]:
            src = have.get(f["name"].lower())
            inner = col.getField(src["name"]) if src is not None else None
            fields.append(_cast(inner, src["type"] if src is not None else VOID, f["type"]).alias(f["name"]))
        return F.when(col.isNull(), F.lit(None).cast(spark_type)).otherwise(F.struct(*fields))
    if kind == "array":
        return F.transform(col, lambda e: _cast(e, source["elementType"], target["elementType"]))
    keyed = F.transform_keys(col, lambda k, _: _cast(k, source["keyType"], target["keyType"]))
    return F.transform_values(keyed, lambda _, v: _cast(v, source["valueType"], target["valueType"]))


def _spark_type(t: SparkType) -> Any:
    """A JSON-form type as a pyspark DataType (voids become strings: only nulls are cast to them)."""
    from pyspark.sql.types import DataType, StringType, _parse_datatype_json_value

    if t == VOID:
        return StringType()
    parsed: DataType = _parse_datatype_json_value(devoid(t))
    return parsed


def devoid(t: SparkType) -> SparkType:
    """``t`` with every void replaced by ``string``: the type a reader parses an all-null value as."""
    if t == VOID:
        return "string"
    if isinstance(t, str):
        return t
    kind = t.get("type")
    if kind == "struct":
        return {**t, "fields": [{**f, "type": devoid(f["type"])} for f in t["fields"]]}
    if kind == "array":
        return {**t, "elementType": devoid(t["elementType"])}
    return {**t, "keyType": devoid(t["keyType"]), "valueType": devoid(t["valueType"])}
