"""The examples in the recommender modules' docstrings run as doctests."""

import doctest
import importlib
import pkgutil

import pytest

import strata.operators.recsys

pytestmark = pytest.mark.usefixtures("one_torch_thread")

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(
        strata.operators.recsys.__path__, prefix="strata.operators.recsys."
    )
)


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
