"""Who may import whom, read from the source, so a new import that crosses a layer fails here
before it grows roots: between the project's packages, between the commit service's areas
(its subpackages and top modules), and which area may import each heavy library."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SERVICE = "commit_service"
# package -> top-level packages of this project it must never import
FORBIDDEN = {
    "lakegate_core": {"commit_service", "sidecar", "lakegate_stack", "lakegate_bench"},
    "sidecar": {"commit_service", "lakegate_stack", "lakegate_bench"},
    "commit_service": {"sidecar", "lakegate_stack", "lakegate_bench"},
    "lakegate_stack": {"commit_service", "sidecar", "lakegate_bench"},
    "lakegate_bench": {"sidecar"},  # the benchmarks drive the service in-process and the stack; never the reverse
    "lakegate_ops": {"commit_service", "sidecar", "lakegate_stack", "lakegate_bench"},  # a client of the API
}
# area of the commit service -> the areas it may import (besides itself); an area is a
# subpackage (``config`` is one too), or a top module (``errors``, ``ports``, ``cli``, ``__init__``)
MAY_IMPORT = {
    "errors": set(),
    "domain": {"errors"},
    "config": {"domain", "errors"},
    "ports": {"domain", "config", "errors"},
    "coordination": {"domain", "ports", "config", "errors"},
    "storage": {"domain", "config", "errors"},
    "spark": {"domain", "storage", "config", "errors"},
    "faults": set(),
    "round": {"spark", "domain", "storage", "config", "errors", "faults"},
    "delta": {"round", "spark", "domain", "ports", "storage", "config", "errors", "faults"},
    "iceberg": {"round", "spark", "domain", "ports", "storage", "config", "errors", "faults"},
    "observe": {"coordination", "domain", "ports", "config", "errors"},
    "audit": {"domain", "ports", "config", "errors"},
    "doctor": {"domain", "config", "errors"},
    "serving": {"config", "errors"},
    "http": {
        "audit",
        "doctor",
        "delta",
        "iceberg",
        "spark",
        "coordination",
        "storage",
        "observe",
        "domain",
        "ports",
        "config",
        "errors",
    },
    "cli": {"http", "serving", "config", "errors"},
    "__init__": set(),
}
DOORS = {"delta", "iceberg"}  # areas imported from outside only through their package (its __init__)
# heavy library -> the only areas that may import it
HEAVY = {
    "pyspark": {"spark", "round", "delta", "iceberg"},
    "py4j": {"spark", "delta", "iceberg"},
    "flask": {"http"},
    "werkzeug": {"http"},
    "jinja2": {"http"},
    "gunicorn": {"serving"},
    "kafka": {"observe", "audit", "doctor"},
    "pyarrow": {"storage"},
    "pyiceberg": {"iceberg"},
    "requests": set(),
}


def parse(path: Path, attempts: int = 3) -> ast.Module:
    """``ast.parse`` of one file. CPython 3.11 keeps the AST builder's recursion count in state
    shared by every thread (python/cpython#106905), so a parse running while another thread of the
    test process compiles can fail with "AST constructor recursion depth mismatch" (seen once in a
    full run, after the integration tests); such a spurious failure is parsed again."""
    for attempt in range(attempts):
        try:
            return ast.parse(path.read_text(), str(path))
        except SystemError as exc:
            if "recursion depth mismatch" not in str(exc) or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def imports(path: Path) -> set[str]:
    """Every module named by an import in one file (module level or not), with ``from m import n``
    also giving ``m.n`` (n may be a module)."""
    out: set[str] = set()
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
            out.update(f"{node.module}.{alias.name}" for alias in node.names)
    return out


def imported_packages(path: Path) -> set[str]:
    """The top-level package of every import in one file."""
    return {name.split(".")[0] for name in imports(path)}


def area(module: str) -> str:
    """The area of a commit service module (``commit_service.delta.committer`` -> ``delta``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def module_of(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def crossings(root: Path) -> list[str]:
    """Every import in the commit service under ``root`` that breaks :data:`MAY_IMPORT`,
    :data:`DOORS` or :data:`HEAVY`."""
    found = []
    modules = {module_of(p, root) for p in (root / SERVICE).rglob("*.py")}
    for path in sorted((root / SERVICE).rglob("*.py")):
        here = area(module_of(path, root))
        for name in imports(path):
            top = name.split(".")[0]
            if top == SERVICE and name in modules:
                there = area(name)
                if there != here and there not in MAY_IMPORT[here]:
                    found.append(f"{path.relative_to(root)}: {here} may not import {there} ({name})")
                elif there != here and there in DOORS and name != f"{SERVICE}.{there}":
                    found.append(f"{path.relative_to(root)}: {name} is behind the door of {SERVICE}.{there}")
            elif top in HEAVY and here not in HEAVY[top]:
                found.append(f"{path.relative_to(root)}: {here} may not import {top}")
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_packages_import_only_the_layers_below(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"no sources under {package}/"
    bad = {
        f"{path.relative_to(ROOT)} imports {p}" for path in files for p in imported_packages(path) & FORBIDDEN[package]
    }
    assert not bad, sorted(bad)


def test_every_area_of_the_commit_service_has_a_rule() -> None:
    areas = {area(module_of(p)) for p in (ROOT / SERVICE).rglob("*.py")}
    assert areas == set(MAY_IMPORT), (
        f"areas without a rule: {areas - set(MAY_IMPORT)}; rules without an area: {set(MAY_IMPORT) - areas}"
    )


def test_the_commit_services_areas_import_only_what_their_rule_allows() -> None:
    assert crossings(ROOT) == []


@pytest.mark.parametrize(
    ("where", "source", "complaint"),
    [
        (
            "domain/state.py",
            "from commit_service.delta.committer import DeltaCommitter\n",
            "domain may not import delta",
        ),
        (
            "coordination/x.py",
            "def f():\n    from commit_service.storage.reader import StorageReader\n",
            "coordination may not import storage",
        ),
        ("http/x.py", "from commit_service.delta.committer import DeltaCommitter\n", "is behind the door"),
        ("domain/x.py", "import pyarrow.parquet as pq\n", "domain may not import pyarrow"),
        ("coordination/x.py", "from flask import Flask\n", "coordination may not import flask"),
    ],
)
def test_a_broken_rule_is_found(tmp_path: Path, where: str, source: str, complaint: str) -> None:
    """The checker itself: one crossing of each kind, planted in a copy of the service, is found."""
    copy = tmp_path / SERVICE
    for path in (ROOT / SERVICE).rglob("*.py"):
        target = copy / path.relative_to(ROOT / SERVICE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text())
    planted = copy / where
    planted.write_text((planted.read_text() if planted.exists() else "") + source)
    assert any(complaint in c for c in crossings(tmp_path)), crossings(tmp_path)


def test_the_checker_sees_a_crossing_inside_a_function(tmp_path: Path) -> None:
    bad = tmp_path / "m.py"
    bad.write_text("def f():\n    from commit_service.domain.state import TableState\n    import sidecar.loop\n")
    assert imported_packages(bad) >= {"commit_service", "sidecar"}


def test_no_test_module_imports_another() -> None:
    """Shared fakes and helpers live in modules of their own (``tests/unit/fakes.py``, ...), never
    in a test module another one imports (its tests would be collected twice, its fixtures shadowed)."""
    tests = ROOT / "tests"
    bad = sorted(
        f"{path.relative_to(ROOT)} imports {name}"
        for path in tests.rglob("test_*.py")
        for name in imports(path)
        if name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith("test_")
    )
    assert not bad, bad


def test_the_rules_draw_no_cycle_between_areas() -> None:
    """The areas can be listed so that each imports only areas listed after it."""
    left = {area: set(allowed) for area, allowed in MAY_IMPORT.items()}
    order: list[str] = []
    while left:
        leaves = sorted(a for a, allowed in left.items() if allowed <= set(order))
        assert leaves, f"a cycle among {sorted(left)}"
        order.extend(leaves)
        for a in leaves:
            del left[a]
