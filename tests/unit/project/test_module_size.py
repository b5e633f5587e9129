"""No module of the product over 450 lines: a module that grows past it holds more than one role
and is split into rooms (docs/design.md, "Module map") before it grows further."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("commit_service", "sidecar", "lakegate_core", "lakegate_stack", "lakegate_bench", "lakegate_ops")
MAX_LINES = 450


def long_modules(root: Path, limit: int = MAX_LINES) -> dict[str, int]:
    sizes = {
        str(p.relative_to(root)): len(p.read_text().splitlines())
        for package in PACKAGES
        for p in (root / package).rglob("*.py")
    }
    return {path: n for path, n in sorted(sizes.items()) if n > limit}


def test_no_module_is_over_450_lines() -> None:
    assert not long_modules(ROOT), f"modules over {MAX_LINES} lines (split them by role): {long_modules(ROOT)}"


def test_a_long_module_is_found(tmp_path: Path) -> None:
    (tmp_path / "sidecar").mkdir()
    (tmp_path / "sidecar" / "big.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "sidecar" / "small.py").write_text("x = 1\n" * MAX_LINES)
    assert long_modules(tmp_path) == {"sidecar/big.py": MAX_LINES + 1}
