"""Upsert table settings (no JVM): what the config accepts and refuses, and what the sink must write."""

from __future__ import annotations

from typing import Any

import pytest

from commit_service.config import ServiceConfig
from commit_service.domain.upsert import OFFSET_COLUMN, Cdc, ChangeError, UpsertSpec
from commit_service.errors import ConfigError
from lakegate_core.configfile import build

BASE: dict[str, Any] = {"storage": {"allowed_roots": ["s3a://landing/"]}, "auth": {"enabled": False}}


def table(**keys: Any) -> dict[str, Any]:
    return {"name": "users", "path": "s3a://lake/users", "topics": ["users"], **keys}


def test_an_upsert_table_builds_its_spec() -> None:
    cfg = build(ServiceConfig, {**BASE, "tables": [table(mode="upsert", key=["id"], cdc="debezium")]})
    assert cfg.tables[0].upsert == UpsertSpec(("id",), OFFSET_COLUMN, Cdc.DEBEZIUM, False)
    assert build(ServiceConfig, {**BASE, "tables": [table(placement="copy_into_table")]}).tables[0].upsert is None


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"mode": "upsert"}, "needs the key column"),
        ({"key": ["id"]}, "only for mode: upsert"),
        ({"cdc": "debezium"}, "only for mode: upsert"),
        ({"delete_on_tombstone": True}, "only for mode: upsert"),
        ({"ordering": "updated_at"}, "only for mode: upsert"),
        ({"mode": "upsert", "key": ["a.b"]}, "top-level column"),
        ({"mode": "upsert", "key": ["id", "id"]}, "named twice"),
        ({"mode": "upsert", "key": ["id"], "ordering": "1st"}, "not a column name"),
        ({"mode": "merge", "key": ["id"]}, "mode"),
    ],
)
def test_bad_upsert_settings_are_refused(keys: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build(ServiceConfig, {**BASE, "tables": [table(**keys)]})


def test_what_the_sink_must_write() -> None:
    assert UpsertSpec(("id",)).required_fields() == ("value", "offset")
    assert UpsertSpec(("id",), "updated_at").required_fields() == ("value",)
    assert UpsertSpec(("id",), delete_on_tombstone=True).required_fields() == ("value", "offset", "key")
    UpsertSpec(("id",)).check_envelope({"value": object(), "offset": object(), "key": object()})
    with pytest.raises(ChangeError, match=r"lack \['key'\]"):
        UpsertSpec(("id",), delete_on_tombstone=True).check_envelope({"value": object(), "offset": object()})


def test_rows_without_a_key_column_are_named() -> None:
    UpsertSpec(("id", "region")).check_image({"id": 1, "region": 2, "name": 3})
    with pytest.raises(ChangeError, match=r"\['region'\]"):
        UpsertSpec(("id", "region")).check_image({"id": 1, "name": 3})


def test_only_an_ordering_other_than_the_offset_compares_with_the_table() -> None:
    assert not UpsertSpec(("id",)).orders_across_rounds
    assert UpsertSpec(("id",), "updated_at").orders_across_rounds
    assert UpsertSpec(("id",), "_kafka_timestamp").orders_across_rounds
