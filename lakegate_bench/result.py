"""How the benchmarks report (the result printed as JSON and written to ``--out``) and where they
work (a temporary folder, removed when the benchmark's process ends)."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

KEEP_ENV = "LAKEGATE_BENCH_KEEP"  # set (to anything but empty) to keep a benchmark's work folder


def work_dir(prefix: str) -> Path:
    """A new folder for one benchmark's files (its landing files, tables, services' logs: a
    10,000-file run writes half a GiB), removed when the process exits, unless
    ``LAKEGATE_BENCH_KEEP`` is set (to read the services' logs afterwards)."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    if os.environ.get(KEEP_ENV):
        print(f"{KEEP_ENV} is set: {work} is kept", flush=True)
    else:
        atexit.register(shutil.rmtree, work, ignore_errors=True)
    return work


def report(result: dict[str, Any], out: Path) -> None:
    """Print ``result`` and write it to ``out`` (creating its folder)."""
    text = json.dumps(result, indent=2)
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {out}")
