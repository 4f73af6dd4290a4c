"""The examples in the trainers' and dataset steps' docstrings run as doctests."""

import doctest
import importlib
import pkgutil

import pytest

import operators.trainers

MODULES = [
    "operators.io.datasets",
    *sorted(
        info.name
        for info in pkgutil.walk_packages(
            operators.trainers.__path__, prefix="operators.trainers."
        )
    ),
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
