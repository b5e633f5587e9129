"""Joining a file's schema to its table's: Delta's rules for what may change, as the commit path
applies them (:mod:`commit_service.delta_commit`). Pure: schemas are Spark's JSON form."""

from __future__ import annotations

from typing import Any

from commit_service.errors import SchemaMismatchError


def merge_schema(table: dict[str, Any], incoming: dict[str, Any], path: str, where: str = "") -> dict[str, Any]:
    """The table schema widened by ``incoming``'s new columns (added as nullable), or an error.

    Same-named columns must have the same type (structs merge recursively); names are compared
    case-insensitively, as Delta does.
    """
    fields = [dict(f) for f in table["fields"]]
    by_name = {f["name"].lower(): i for i, f in enumerate(fields)}
    for f in incoming["fields"]:
        col = f"{where}{f['name']}"
        i = by_name.get(f["name"].lower())
        if i is None:
            fields.append({**f, "nullable": True})
            by_name[f["name"].lower()] = len(fields) - 1
            continue
        have = fields[i]
        if have["name"] != f["name"]:
            raise SchemaMismatchError(path, f"column {col!r} differs only in case from {where}{have['name']!r}")
        t_have, t_new = have["type"], f["type"]
        if isinstance(t_have, dict) and isinstance(t_new, dict) and t_have.get("type") == t_new.get("type") == "struct":
            fields[i] = {**have, "type": merge_schema(t_have, t_new, path, f"{col}.")}
        elif t_have != t_new:
            raise SchemaMismatchError(
                path, f"column {col!r} is {_type_name(t_new)} in the file but {_type_name(t_have)} in the table"
            )
    return {**table, "fields": fields}


def _type_name(t: Any) -> str:
    return t if isinstance(t, str) else str(t.get("type", t))
