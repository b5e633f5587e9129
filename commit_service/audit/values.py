"""A Kafka record as the row the table should hold for it, and the two compared field by field. Pure.

Used by the value audit (:class:`~commit_service.audit.auditor.Auditor`): the record is read back
from Kafka, the rows from the table (through :class:`commit_service.ports.TableLedger`, which gives
each row as plain data: structs as dicts, timestamps as epoch milliseconds). The sink writes the
record's key as text (``StringConverter``) and its value as JSON (``JsonConverter``; with schemas,
the ``payload``); the service unwraps the value's fields into columns and the rest into
``_kafka_*`` columns (docs/configuration.md, ``tables[].unwrap``).

Null and absent are one: a column the record has no field for holds null, and so does a struct
field another record added. Numbers compare by value (``1`` equals ``1.0``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from commit_service.domain.content import KAFKA_COLUMNS

MAX_SHOWN = 200  # characters of a value shown in a finding


@dataclass(frozen=True)
class KafkaRecord:
    """One record as Kafka returned it."""

    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int


def decoded_value(raw: bytes | None) -> Any:
    """The record's value as the sink's JSON converter reads it (a payload inside a schema
    envelope is the value); bytes that are no JSON stay text."""
    if raw is None:
        return None
    text = raw.decode("utf-8", errors="replace")
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if isinstance(value, dict) and set(value) == {"schema", "payload"}:
        return value["payload"]
    return value


def expected_row(record: KafkaRecord, columns: Sequence[str]) -> dict[str, Any]:
    """The row the table should hold for ``record``, over the table's ``columns``: unwrapped
    (the value's fields as columns) when the table has ``_kafka_offset``, else the sink's envelope."""
    value = decoded_value(record.value)
    key = None if record.key is None else record.key.decode("utf-8", errors="replace")
    if KAFKA_COLUMNS["offset"] in columns:
        row: dict[str, Any] = dict(value) if isinstance(value, dict) else {}
        if not isinstance(value, dict) and value is not None:
            row["value"] = value
        row[KAFKA_COLUMNS["offset"]] = record.offset
        row[KAFKA_COLUMNS["key"]] = key
        row[KAFKA_COLUMNS["timestamp"]] = record.timestamp_ms
    else:
        row = {"key": key, "value": value, "offset": record.offset, "timestamp": record.timestamp_ms}
    return {name: v for name, v in row.items() if name in columns or v is not None}


def normal(value: Any) -> Any:
    """``value`` with nulls dropped from every object (null and absent are one) and integral
    floats as ints (JSON's ``1`` and a double column's ``1.0``)."""
    if isinstance(value, Mapping):
        return {str(k): normal(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [normal(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def differences(
    expected: Mapping[str, Any], row: Mapping[str, Any], skip: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """Per column that differs: ``{"kafka": ..., "table": ...}`` (shortened); empty when equal.
    ``skip``: columns the table holds but the record cannot be compared on (headers)."""
    out: dict[str, Any] = {}
    for name in sorted((set(expected) | set(row)) - skip):
        want, got = normal(expected.get(name)), normal(row.get(name))
        if want != got and not (want in (None, {}) and got in (None, {})):
            out[name] = {"kafka": _shown(want), "table": _shown(got)}
    return out


def best_match(
    expected: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], skip: frozenset[str] = frozenset()
) -> tuple[int, dict[str, Any]] | None:
    """The index of the row among ``rows`` that equals ``expected`` (an offset's rows: one per
    partition that committed it), or else the closest one and its differences; None without rows."""
    best: tuple[int, dict[str, Any]] | None = None
    for i, row in enumerate(rows):
        diff = differences(expected, row, skip)
        if not diff:
            return i, {}
        if best is None or len(diff) < len(best[1]):
            best = (i, diff)
    return best


def _shown(value: Any) -> Any:
    text = json.dumps(value, default=str, sort_keys=True)
    return value if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "..."
