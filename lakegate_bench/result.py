"""How the standalone benchmark scripts report: the result printed as JSON and written to ``--out``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def report(result: dict[str, Any], out: Path) -> None:
    """Print ``result`` and write it to ``out`` (creating its folder)."""
    text = json.dumps(result, indent=2)
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {out}")
