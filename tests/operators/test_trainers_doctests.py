"""The examples in the trainers' and dataset steps' docstrings run as doctests."""

import doctest
import importlib
import pkgutil

import pytest

import strata.operators.trainers

MODULES = [
    "strata.operators.io.datasets",
    *sorted(
        info.name
        for info in pkgutil.walk_packages(
            strata.operators.trainers.__path__, prefix="strata.operators.trainers."
        )
    ),
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
