"""The package layering of ARCHITECTURE.md, checked on every import statement.

engine knows nothing about graphs; storage stands alone; partition builds on
storage only; operators may use all three; nothing imports jobs.
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
        found.update((name.split(".")[0], node.lineno) for name in names)
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_the_layers_below(package: str) -> None:
    violations = [
        f"{path.relative_to(ROOT)}:{line} imports {top}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for top, line in _imported_packages(path)
        if top in PROJECT and top != package and top not in ALLOWED[package]
    ]
    assert not violations, "\n".join(violations)
