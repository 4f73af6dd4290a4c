"""The runnable examples in the docstrings of the geo library (not servers: GB's)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "errors",
    "topology",
    "items",
    "layers",
    "routing",
    "cost",
    "workload",
    "heat",
    "placement",
    "twin",
    "optimal",
    "configurations",
    "summary",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(f"strata.storage.geo.{name}")
    result = doctest.testmod(module)
    assert result.failed == 0
    assert result.attempted > 0
