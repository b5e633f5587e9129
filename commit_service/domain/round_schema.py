"""One schema rule for a commit round: every file's columns reconciled with each other and the table's.

Pure (no Spark, no I/O): schemas are Spark's JSON form (``StructType.jsonValue()``). Called by
:mod:`commit_service.round.convert` (append tables) and :mod:`commit_service.delta.upsert` (upsert
tables) before a round's files are read as one frame, and by :mod:`commit_service.delta.committer`
to decide which Parquet files can still be added where they lie.

The rules (``docs/configuration.md``, "Schema rules"):

- a value that is null in every record of a file has no type there (:data:`VOID`: read by
  :mod:`commit_service.domain.json_infer` for text, from the footer's null counts for Parquet), and a
  type-less column never wins over a real one, in the round or in the table;
- a column or struct field new to the table is added (nullable), at any depth, inside arrays and
  map values too;
- numbers widen as Delta's type widening allows (byte → short → int → long, float → double,
  byte/short/int → double, decimals gaining digits, integers → decimal, date → timestamp_ntz), a
  table's column only with ``tables[].type_widening`` (delta-rs reads no table with that
  feature); inside one round a column the table does not have yet also joins long and double (a
  JSON number) as double, as Spark's own JSON inference does;
- anything else (a string and a number, a struct and a string, ...) is a conflict: the file that
  brings it is refused, naming the column and both types, and the rest of the round goes on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

VOID = "void"  # Spark's NullType: no value seen, so no type
INTEGERS = ("byte", "short", "integer", "long")
INTEGER_DIGITS = {"byte": 3, "short": 5, "integer": 10, "long": 20}
MAX_PRECISION = 38
_DECIMAL = re.compile(r"decimal\((\d+),\s*(-?\d+)\)")

SparkType = Any  # a Spark type in JSON form: a name (str) or a dict (struct, array, map)
Schema = dict[str, Any]  # a struct type in JSON form


class Conflict(ValueError):
    """Two types of one column that no rule joins; ``column`` is its dotted path."""

    def __init__(self, column: str, have: SparkType, new: SparkType, why: str = "", *, in_table: bool = False) -> None:
        self.column, self.have, self.new = column, have, new
        where = "the table" if in_table else "another file of the round"
        detail = why or f"{type_name(new)} in this file but {type_name(have)} in {where}"
        super().__init__(f"column {column!r} is {detail}")


@dataclass(frozen=True)
class FileShape:
    """One file's columns as the table would get them (after unwrapping), voids marked."""

    path: str
    schema: Schema


@dataclass(frozen=True)
class Widening:
    """A table column whose type this round widens (Delta records it as a type change)."""

    column: str
    from_type: SparkType
    to_type: SparkType


@dataclass(frozen=True)
class RoundSchema:
    """What a round writes: ``schema`` (the table's, grown by the accepted files; voids kept, see
    :func:`resolved`), the files ``refused`` (path -> reason) and the table columns ``widened``."""

    schema: Schema
    refused: dict[str, str]
    widened: tuple[Widening, ...] = ()


def type_name(t: SparkType) -> str:
    """A type as people read it: ``long``, ``struct``, ``array<string>``."""
    if isinstance(t, str):
        return "null (no value)" if t == VOID else t
    kind = t.get("type")
    if kind == "array":
        return f"array<{type_name(t['elementType'])}>"
    if kind == "map":
        return f"map<{type_name(t['keyType'])},{type_name(t['valueType'])}>"
    return str(kind)


def _decimal(t: SparkType) -> tuple[int, int] | None:
    m = _DECIMAL.fullmatch(t) if isinstance(t, str) else None
    return (int(m.group(1)), int(m.group(2))) if m else None


def _digits(t: str) -> tuple[int, int] | None:
    """(integer digits, scale) of an exact number type, or None."""
    if t in INTEGER_DIGITS:
        return INTEGER_DIGITS[t], 0
    d = _decimal(t)
    return (d[0] - d[1], d[1]) if d else None


def delta_widens(old: str, new: str) -> bool:
    """Whether Delta's type widening changes a column from ``old`` to ``new`` (equal included)."""
    if old == new:
        return True
    if old in INTEGERS and new in INTEGERS:
        return INTEGERS.index(old) < INTEGERS.index(new)
    if new == "double":
        return old in ("float", "byte", "short", "integer")
    if old == "date":
        return new == "timestamp_ntz"
    a, b = _digits(old), _digits(new)
    return a is not None and b is not None and _decimal(new) is not None and b[0] >= a[0] and b[1] >= a[1]


def wider_atomic(a: str, b: str) -> str | None:
    """The narrowest type holding every value of ``a`` and ``b`` (both atomic), or None."""
    if a == b:
        return a
    if a in INTEGERS and b in INTEGERS:
        return a if INTEGERS.index(a) > INTEGERS.index(b) else b
    numbers = (*INTEGERS, "float", "double")
    if a in numbers and b in numbers and ("double" in (a, b) or "float" in (a, b)):
        return "double"
    if {a, b} == {"date", "timestamp_ntz"}:
        return "timestamp_ntz"
    da, db = _digits(a), _digits(b)
    if da is not None and db is not None:
        scale, whole = max(da[1], db[1]), max(da[0], db[0])
        return f"decimal({whole + scale},{scale})" if whole + scale <= MAX_PRECISION else None
    return None


def merge(have: SparkType, new: SparkType, column: str, table: SparkType | None, widen: bool = True) -> SparkType:
    """``have`` (the round so far) joined with a file's ``new``; ``table`` is the table's type of the
    column (None: new to the table), which only widens as Delta allows, and only with ``widen``
    (the table's ``type_widening``). Raises :class:`Conflict`."""
    if new == VOID:
        return have
    if have == VOID:
        return new if table is None or table == VOID else merge(table, new, column, table, widen)
    if isinstance(have, str) and isinstance(new, str):
        joined = wider_atomic(have, new)
        if joined is None:
            raise Conflict(column, have, new, in_table=table == have)
        base = table if isinstance(table, str) and table != VOID else None
        if base is not None and not delta_widens(base, joined):
            raise Conflict(
                column,
                have,
                new,
                f"{new} in this file but {base} in the table, and Delta cannot widen {base} to {joined}",
            )
        if base is not None and joined != base and not widen:
            why = (
                f"{new} in this file but {base} in the table (tables[].type_widening: true would widen it to {joined})"
            )
            raise Conflict(column, have, new, why)
        return joined
    kind_have = have.get("type") if isinstance(have, dict) else have
    kind_new = new.get("type") if isinstance(new, dict) else new
    if kind_have != kind_new:
        raise Conflict(column, have, new, in_table=table == have)
    sub = table if isinstance(table, dict) and table.get("type") == kind_have else None
    if kind_have == "struct":
        return merge_struct(have, new, column + ".", sub, widen)
    if kind_have == "array":
        element = merge(have["elementType"], new["elementType"], f"{column}[]", sub and sub["elementType"], widen)
        return {**have, "elementType": element, "containsNull": have["containsNull"] or new["containsNull"]}
    key = merge(have["keyType"], new["keyType"], f"{column}{{key}}", sub and sub["keyType"], widen)
    value = merge(have["valueType"], new["valueType"], f"{column}{{value}}", sub and sub["valueType"], widen)
    contains_null = have["valueContainsNull"] or new["valueContainsNull"]
    return {**have, "keyType": key, "valueType": value, "valueContainsNull": contains_null}


def merge_struct(have: Schema, new: Schema, where: str = "", table: Schema | None = None, widen: bool = True) -> Schema:
    """Struct ``have`` grown by ``new``'s fields (new ones appended, nullable); names are compared
    case-insensitively, as Delta does, and may not differ only in case."""
    fields = [dict(f) for f in have["fields"]]
    index = {f["name"].lower(): i for i, f in enumerate(fields)}
    in_table = {f["name"].lower(): f["type"] for f in table["fields"]} if table else {}
    for f in new["fields"]:
        column = f"{where}{f['name']}"
        i = index.get(f["name"].lower())
        if i is None:
            fields.append({**f, "nullable": True})
            index[f["name"].lower()] = len(fields) - 1
            continue
        if fields[i]["name"] != f["name"]:
            raise Conflict(
                column, fields[i]["type"], f["type"], f"named {column!r} here but {where}{fields[i]['name']!r} before"
            )
        joined = merge(fields[i]["type"], f["type"], column, in_table.get(f["name"].lower()), widen)
        fields[i] = {**fields[i], "type": joined, "nullable": fields[i]["nullable"] or f["nullable"]}
    return {**have, "fields": fields}


def reconcile(table: Schema | None, files: Sequence[FileShape], *, widen: bool = True) -> RoundSchema:
    """The round's schema: the table's (or an empty one) grown by each file in order; a file that
    conflicts is refused and leaves no trace in the schema. ``widen``: the table's columns may
    widen (Delta's type widening: delta-rs cannot read such a table)."""
    schema: Schema = table if table is not None else {"type": "struct", "fields": []}
    refused: dict[str, str] = {}
    seen: dict[int, str | None] = {}  # id of a shape already joined -> its refusal (files share shapes)
    for f in files:
        if id(f.schema) in seen:  # joining a shape again changes nothing
            reason = seen[id(f.schema)]
            if reason is not None:
                refused[f.path] = reason
            continue
        try:
            schema = merge_struct(schema, f.schema, "", table, widen)
            seen[id(f.schema)] = None
        except Conflict as exc:
            refused[f.path] = seen[id(f.schema)] = f"cannot join the table's schema: {exc}"
    return RoundSchema(schema, refused, tuple(widenings(table, schema)) if table is not None else ())


def widenings(old: SparkType, new: SparkType, column: str = "") -> list[Widening]:
    """Where ``new`` widened one of ``old``'s atomic types (at any depth)."""
    if isinstance(old, str) or isinstance(new, str):
        return [Widening(column, old, new)] if old != new and VOID not in (old, new) else []
    kind = old.get("type")
    if kind == "struct":
        fields = {f["name"]: f["type"] for f in new["fields"]}
        prefix = f"{column}." if column else ""
        return [w for f in old["fields"] for w in widenings(f["type"], fields[f["name"]], prefix + f["name"])]
    if kind == "array":
        return widenings(old["elementType"], new["elementType"], f"{column}[]")
    return [*widenings(old["keyType"], new["keyType"], column), *widenings(old["valueType"], new["valueType"], column)]


def resolved(t: SparkType) -> SparkType | None:
    """``t`` as written: a void column or field is left out (no value has typed it yet), a struct
    left with no field too; an array or map of voids holds strings (Spark's choice: its values are
    empty, and an empty array is not a null). None: nothing of ``t`` is written."""
    if t == VOID:
        return None
    if isinstance(t, str):
        return t
    kind = t.get("type")
    if kind == "struct":
        fields = [{**f, "type": r} for f in t["fields"] if (r := resolved(f["type"])) is not None]
        return {**t, "fields": fields} if fields else None
    if kind == "array":
        return {**t, "elementType": resolved(t["elementType"]) or "string"}
    return {**t, "keyType": resolved(t["keyType"]) or "string", "valueType": resolved(t["valueType"]) or "string"}


def resolved_schema(schema: Schema) -> Schema:
    """:func:`resolved` of a top-level schema (always a struct, possibly with no field)."""
    return resolved(schema) or {"type": "struct", "fields": []}


def fits(file_type: SparkType, target: SparkType) -> bool:
    """Whether a Parquet file of ``file_type`` can be added as it is to a table of ``target``: every
    column of the file is in the target with the same type (nested: the same fields). Otherwise
    the file is rewritten to the target's types."""
    if isinstance(file_type, str) or isinstance(target, str):
        return file_type == target
    if file_type.get("type") != target.get("type"):
        return False
    if file_type["type"] == "struct":
        have = {f["name"]: f["type"] for f in target["fields"]}
        return all(f["name"] in have and fits(f["type"], have[f["name"]]) for f in file_type["fields"])
    return _same(file_type, target)


def _same(a: SparkType, b: SparkType) -> bool:
    """Equal types ignoring nullability and field metadata."""
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    if a.get("type") != b.get("type"):
        return False
    if a["type"] == "struct":
        return [f["name"] for f in a["fields"]] == [f["name"] for f in b["fields"]] and all(
            _same(x["type"], y["type"]) for x, y in zip(a["fields"], b["fields"], strict=True)
        )
    if a["type"] == "array":
        return _same(a["elementType"], b["elementType"])
    return _same(a["keyType"], b["keyType"]) and _same(a["valueType"], b["valueType"])


def leaf_columns(t: SparkType, column: str = "") -> set[str]:
    """The dotted paths of ``t``'s typed leaves (lower case; void ones, and arrays and maps of
    voids, left out): what the round guard (:mod:`commit_service.domain.round_guard`) requires of the
    written schema."""
    if t == VOID:
        return set()
    if isinstance(t, str):
        return {column.lower()}
    kind = t.get("type")
    if kind == "struct":
        prefix = f"{column}." if column else ""
        return {leaf for f in t["fields"] for leaf in leaf_columns(f["type"], prefix + f["name"])}
    if kind == "array":
        return leaf_columns(t["elementType"], f"{column}[]")
    return leaf_columns(t["keyType"], f"{column}{{key}}") | leaf_columns(t["valueType"], f"{column}{{value}}")
