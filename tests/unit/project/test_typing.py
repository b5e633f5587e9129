"""The packages are mypy-clean; a type error fails the suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_mypy_is_clean() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "lakegate_core", "commit_service", "lakegate_stack", "sidecar"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
