"""The README's main command works: the demo runs the whole pipeline and checks its own result."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("table_format", ["delta", "iceberg"])
def test_demo_commits_every_record_once(tmp_path: Path, table_format: str) -> None:
    cmd = [
        sys.executable,
        "-m",
        "lakegate_stack.demo",
        "--records",
        "900",
        "--rate",
        "0",
        "--commit-interval",
        "2",
        "--exit-when-done",
        "--timeout",
        "300",
        "--workdir",
        str(tmp_path / "demo"),
        "--format",
        table_format,
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=Path(__file__).parents[2])
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "all 900 records committed exactly once" in out.stdout
    assert "Spark UI" in out.stdout and ("commit v1:" if table_format == "iceberg" else "commit v0:") in out.stdout
    assert ("read back with pyiceberg" if table_format == "iceberg" else "read back with delta-rs") in out.stdout
    assert "status page   http://127.0.0.1:" in out.stdout
