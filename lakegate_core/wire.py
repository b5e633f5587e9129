"""How wire types become JSON and back: field readers that name the culprit, and one encoder.

Standard library only; used by :mod:`lakegate_core.protocol` and :mod:`lakegate_core.status`.
Readers (``read_*``) check one key of a decoded JSON object and raise
:class:`~lakegate_core.errors.ProtocolError` with its dotted path; :func:`encode` turns any wire
dataclass into JSON-ready data the same way everywhere (enums by value, tuples as arrays, a
:class:`~lakegate_core.types.TopicPartition` as ``{topic, partition}``, offsets in their one JSON
form, optional fields left out while unset).
"""

from __future__ import annotations

import dataclasses
import functools
from enum import Enum
from typing import Any

from lakegate_core.errors import ProtocolError
from lakegate_core.types import PartitionOffsets, TopicPartition

_KIND_NAMES = {str: "a string", int: "an integer", dict: "an object", list: "an array", bool: "a boolean"}


def read(d: dict[str, Any], key: str, path: str, kind: type | tuple[type, ...], *, required: bool = True) -> Any:
    """``d[key]`` if it is of ``kind`` (booleans are never numbers); None if absent and optional."""
    if key not in d or d[key] is None:
        if required:
            raise ProtocolError(f"{path}{key}", "is required")
        return None
    value = d[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        raise ProtocolError(f"{path}{key}", f"must be {_kind_name(kinds)}, not a boolean")
    if not isinstance(value, kinds):
        raise ProtocolError(f"{path}{key}", f"must be {_kind_name(kinds)}, got {type(value).__name__}")
    return value


def _kind_name(kinds: tuple[type, ...]) -> str:
    return " or ".join(_KIND_NAMES.get(k, k.__name__) for k in kinds)


def read_text(d: dict[str, Any], key: str, path: str, *, max_len: int = 4096, required: bool = True) -> Any:
    """A string of 1..``max_len`` characters."""
    value = read(d, key, path, str, required=required)
    if value is not None and not (0 < len(value) <= max_len):
        raise ProtocolError(f"{path}{key}", f"must be 1..{max_len} characters")
    return value


MAX_LONG = 2**63 - 1  # Kafka offsets, Delta txn versions and epoch milliseconds are signed 64-bit
MAX_PARTITION = 2**31 - 1  # Kafka partitions are signed 32-bit


def read_count(d: dict[str, Any], key: str, path: str, *, required: bool = True, maximum: int = MAX_LONG) -> Any:
    """A non-negative integer, at most ``maximum`` (by default what a signed 64-bit field holds)."""
    value = read(d, key, path, int, required=required)
    if value is not None and not 0 <= value <= maximum:
        raise ProtocolError(f"{path}{key}", f"must be from 0 to {maximum}")
    return value


def read_object(value: Any, path: str) -> dict[str, Any]:
    """``value`` itself, if it is a JSON object."""
    if not isinstance(value, dict):
        raise ProtocolError(path or "body", f"must be a JSON object, got {type(value).__name__}")
    return value


def read_list(d: dict[str, Any], key: str, path: str, *, required: bool = True) -> list[Any]:
    """A JSON array (empty if absent and optional)."""
    return read(d, key, path, list, required=required) or []


def read_topic_partition(raw: Any, path: str) -> TopicPartition:
    """``{topic, partition}`` as a :class:`TopicPartition`."""
    d = read_object(raw, path.rstrip("."))
    return TopicPartition(
        read_text(d, "topic", path, max_len=249), read_count(d, "partition", path, maximum=MAX_PARTITION)
    )


class WireModel:
    """Base of every wire dataclass: ``to_dict`` is :func:`encode` (one JSON form everywhere)."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        return encode(self)  # type: ignore[no-any-return]


_SCALARS = frozenset({str, int, float, bool, type(None)})  # exact types: an enum member's type is its enum


@functools.cache
def _plan(cls: type) -> tuple[tuple[str, bool, bool], ...] | None:
    """Per type, once: None unless a wire dataclass; else each field's name, whether an unset
    (None) value is left out, and whether it is flattened into its parent (a manifest of 10,000
    files encodes 10,000 receipts)."""
    if not dataclasses.is_dataclass(cls):
        return None
    return tuple(
        (f.name, f.default is None and not f.metadata.get("keep_null"), bool(f.metadata.get("flatten")))
        for f in dataclasses.fields(cls)
    )


def encode(value: Any) -> Any:
    """JSON-ready data for a wire value (dataclass, enum, tuple, offsets, topic-partition)."""
    kind: type = type(value)
    if kind in _SCALARS:
        return value
    plan = _plan(kind)
    if plan is not None:
        out: dict[str, Any] = {}
        for name, drop_none, flatten in plan:
            item = getattr(value, name)
            if item is None and drop_none:
                continue  # an optional field left unset is left out
            if flatten:
                out.update(encode(item))
            else:
                out[name] = encode(item)
        return out
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, TopicPartition):  # a tuple: before the tuples
        return {"topic": value.topic, "partition": value.partition}
    if isinstance(value, PartitionOffsets):
        return value.to_json()
    if isinstance(value, (tuple, list)):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    return value
