"""The chart tests need the pinned Helm and the offline validator: missing, they FAIL with the
command to run (a chart that was never rendered must not pass as "skipped")."""

from __future__ import annotations

import os

import pytest

from tests.chart.helm import HELM, VALIDATE


@pytest.fixture(scope="session", autouse=True)
def tools() -> None:
    missing = [str(p) for p in (HELM, VALIDATE) if not os.access(p, os.X_OK)]
    if missing:
        pytest.fail(f"chart tooling missing: {', '.join(missing)}; run scripts/install-helm first", pytrace=False)
