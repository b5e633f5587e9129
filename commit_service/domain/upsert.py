"""Upsert and CDC tables, the pure half: the table mode, the spec of a key, and the row image's
shape; the Spark half (``commit_service.round.changes``) turns a round's files into changes.

Read by the config (``tables[].mode``, ``key``, ``cdc``) and by
:class:`~commit_service.delta.upsert.UpsertWriter` for a table with ``mode: upsert``.
A round's files become *changes* (``changes``): per record, the row image, whether it deletes
its key, and the value that orders two changes of one key. ``latest`` keeps each key's last
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

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from commit_service.domain.content import KAFKA_COLUMNS
from commit_service.domain.round_schema import VOID, Schema, merge_struct

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
    round's ``after`` is null in every record). Raises :class:`~commit_service.domain.round_schema.Conflict`
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
