"""The examples in the streaming package's docstrings run as doctests."""

import doctest
import importlib
import pkgutil

import pytest

import strata.operators.streaming

MODULES = [
    "strata.operators.streaming",
    *sorted(
        info.name
        for info in pkgutil.walk_packages(
            strata.operators.streaming.__path__, prefix="strata.operators.streaming."
        )
    ),
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
