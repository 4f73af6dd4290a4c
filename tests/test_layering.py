"""The package layering of ARCHITECTURE.md, checked on every import statement.

engine knows nothing about graphs; storage stands alone; partition builds on
storage only; operators may use all three; nothing imports jobs. Every import
names the installed namespace (``strata.engine``, never a bare ``engine``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = {"engine", "storage", "partition", "operators", "jobs"}
ALLOWED = {
    "engine": set(),
    "storage": set(),
    "partition": {"storage"},
    "operators": {"engine", "storage", "partition"},
    "jobs": {"engine", "storage", "partition", "operators"},
}


def _imported_packages(path: Path) -> set[tuple[str, int]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[tuple[str, int]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] in PROJECT:  # a bare top-level name: never valid now
                found.add((f"{parts[0]} (not strata.{parts[0]})", node.lineno))
            elif parts[0] == "strata" and len(parts) > 1:
                found.add((parts[1], node.lineno))
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_the_layers_below(package: str) -> None:
    violations = [
        f"{path.relative_to(ROOT)}:{line} imports {top}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for top, line in _imported_packages(path)
        if top not in ALLOWED[package] | {package}
        and top.split(" ")[0] in PROJECT  # a project package, or a bare name
    ]
    assert not violations, "\n".join(violations)
