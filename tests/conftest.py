"""Shared pytest set-up: tests under tests/integration and tests/e2e are marked ``integration``.

The JVMs the tests start (Kafka, Connect, the catalogs, each service's Spark, the demo) compile
with C1 only (``-XX:TieredStopAtLevel=1``, through ``JDK_JAVA_OPTIONS``, which the ``java``
launcher reads): each lives for seconds to minutes on small data, and C2 compiling its start-up was
half of a Connect worker's CPU and a fifth of the e2e tests' JVM CPU (a per-thread sample of
``tests/e2e``). The tests' own Spark session lives the whole run and works hard: it turns C2 back
on (``tests/fixtures.FULL_JIT``; ``tests/integration/test_upsert.py`` took 389 s without it, 346 s
with it, in the same hour). Only the JIT differs from production; no test measures speed. Set
``JDK_JAVA_OPTIONS`` yourself (even empty) to run the tests with other options.
"""

from __future__ import annotations

import os

import pytest

# The real-service fixtures (S3 server, Kafka, Connect, Spark): shared by integration and e2e.
pytest_plugins = ["tests.fixtures"]

TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
os.environ.setdefault("JDK_JAVA_OPTIONS", TEST_JVM_OPTIONS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        parts = item.path.parts
        if "integration" in parts or "e2e" in parts:
            item.add_marker(pytest.mark.integration)
