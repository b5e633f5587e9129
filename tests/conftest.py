"""Shared pytest set-up: tests under tests/integration and tests/e2e are marked ``integration``."""

from __future__ import annotations

import pytest

# The real-service fixtures (S3 server, Kafka, Connect, Spark): shared by integration and e2e.
pytest_plugins = ["tests.fixtures"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        parts = item.path.parts
        if "integration" in parts or "e2e" in parts:
            item.add_marker(pytest.mark.integration)
