"""The console scripts exist and answer --help (run as installed, in a subprocess)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("script", ["lakegate-service", "lakegate-sidecar"])
def test_console_script_help(script: str) -> None:
    beside = Path(sys.executable).parent / script
    path = str(beside) if beside.exists() else shutil.which(script)
    assert path, f"{script} is not installed on PATH"
    out = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"usage: {script}")
    assert "--config" in out.stdout


def test_fetch_jars_lists_the_pins() -> None:
    out = subprocess.run(["scripts/fetch-jars", "--list"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    for group in ("kafka", "connect", "s3-sink", "delta", "hadoop-aws"):
        assert group in out.stdout
