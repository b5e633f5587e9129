"""Every reference to a section of the docs (``docs/<page>.md, "<Section>"`` in code and docs)
names a heading that exists on that page: a moved or renamed section fails here."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# docs/design.md, "The commit layout" | ``docs/design.md``, "Upserts" | docs/design.md` ("Orphans"
REFERENCE = re.compile(r"(docs/[\w-]+\.md)[`']*,?\s*\(?\s*\"([A-Z][^\"]{2,80})\"")


def references(text: str) -> list[tuple[str, str]]:
    """The (page, section) pairs ``text`` names, the section's line breaks (and comment or
    docstring indentation) read as spaces."""
    flat = re.sub(r"\s*\n\s*(#\s*)?", " ", text)
    return [(page, " ".join(section.split())) for page, section in REFERENCE.findall(flat)]


def headings(page: Path) -> list[str]:
    return [line.lstrip("#").strip() for line in page.read_text().splitlines() if line.startswith("#")]


def test_every_section_reference_names_a_heading() -> None:
    files = subprocess.run(["git", "ls-files", "*.py", "*.md"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    broken = []
    for name in files:
        for page, section in references((ROOT / name).read_text()):
            if not (ROOT / page).exists() or not any(h.startswith(section) for h in headings(ROOT / page)):
                broken.append(f"{name}: {page}, {section!r}")
    assert not broken, broken


def test_a_reference_over_two_lines_is_read() -> None:
    page = "docs/design" + ".md"  # written apart, so this file cites no section itself
    text = f'drives it ({page}, "The commit\n    layout"), and ``{page}``, "Errors"'
    assert references(text) == [(page, "The commit layout"), (page, "Errors")]
