"""docs/design.md's module map against the code: every module of the commit service has a row,
and every module a row names exists (a move or a new module without its row fails here)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DESIGN = ROOT / "docs" / "design.md"


def map_section(text: str) -> str:
    return text[text.index("## Module map") : text.index("\n## ", text.index("## Module map") + 1)]


def named_modules(section: str) -> set[str]:
    """The repository paths the map's rows name: ``a/b.py``, and ``c.py`` after it in one cell
    (``commit_service/http/status_page.py``, ``templates/``) meaning a sibling."""
    named: set[str] = set()
    for row in section.splitlines():
        if not row.startswith("| `"):
            continue
        cell = row.split("|")[1]
        paths = re.findall(r"`([\w/.]+)`", cell)
        folder = ""
        for path in paths:
            if "/" in path.rstrip("/"):
                folder = path.rsplit("/", 1)[0]
                named.add(path)
            elif folder:
                named.add(f"{folder}/{path}")
    return named


def test_every_commit_service_module_has_a_row_and_every_row_exists() -> None:
    named = named_modules(map_section(DESIGN.read_text()))
    modules = {str(p.relative_to(ROOT)) for p in (ROOT / "commit_service").rglob("*.py")}
    packages = {m for m in modules if m.endswith("/__init__.py") and m != "commit_service/__init__.py"}
    missing = modules - packages - named  # a package's own row is its bold heading
    assert not missing, f"modules without a row in docs/design.md's module map: {sorted(missing)}"
    absent = {n for n in named if not (ROOT / n).exists()}
    assert not absent, f"rows of docs/design.md's module map naming nothing: {sorted(absent)}"


def test_the_reader_of_the_map_sees_a_missing_row() -> None:
    section = "## Module map\n| `commit_service/a.py`, `b.py` | x |\n| `lakegate_core/c.py` | y |\n## Next\n"
    assert named_modules(map_section(section)) == {"commit_service/a.py", "commit_service/b.py", "lakegate_core/c.py"}
