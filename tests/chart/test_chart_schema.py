"""The chart's values schema against the service's config types: every key the service reads is
one the schema lets through (its ``additionalProperties: false`` would otherwise refuse a
documented key at ``helm install``), and the schema names no key the service would refuse."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from commit_service.config import IcebergCatalog, ServiceConfig, TableConfig
from tests.chart.helm import CHART

SCHEMA = json.loads((CHART / "values.schema.json").read_text())


def keys(cls: Any) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


@pytest.mark.parametrize(
    ("cls", "schema"),
    [
        (TableConfig, SCHEMA["definitions"]["table"]),
        (IcebergCatalog, SCHEMA["definitions"]["icebergCatalog"]),
        (ServiceConfig, SCHEMA["properties"]["config"]),
    ],
    ids=["table", "catalog", "config"],
)
def test_the_schema_lets_through_exactly_the_keys_the_service_reads(cls: Any, schema: dict[str, Any]) -> None:
    allowed = set(schema["properties"])
    assert keys(cls) - allowed == set(), f"{cls.__name__} keys the chart's schema refuses"
    assert allowed - keys(cls) == set(), f"schema keys {cls.__name__} does not have"
