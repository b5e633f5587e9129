"""Who may import whom (docs/design.md, module map): read from the source, so a new import that
crosses a layer fails here before it grows roots."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# package -> top-level packages of this project it must never import
FORBIDDEN = {
    "lakegate_core": {"commit_service", "sidecar", "lakegate_stack"},
    "sidecar": {"commit_service", "lakegate_stack"},
    "commit_service": {"sidecar", "lakegate_stack"},
    "lakegate_stack": {"commit_service", "sidecar"},
}


def imported_packages(path: Path) -> set[str]:
    """The top-level package of every import in one file (module level or not)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module.split(".")[0])
    return out


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_packages_import_only_the_layers_below(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"no sources under {package}/"
    crossings = {
        f"{path.relative_to(ROOT)} imports {bad}"
        for path in files
        for bad in imported_packages(path) & FORBIDDEN[package]
    }
    assert not crossings, sorted(crossings)


def test_the_checker_sees_a_crossing(tmp_path: Path) -> None:
    bad = tmp_path / "m.py"
    bad.write_text("def f():\n    from commit_service.domain.state import TableState\n    import sidecar.loop\n")
    assert imported_packages(bad) >= {"commit_service", "sidecar"}
