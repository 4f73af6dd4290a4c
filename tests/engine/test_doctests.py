"""Every engine module's examples run as doctests."""

import doctest
import importlib
import pkgutil

import pytest

import engine

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(engine.__path__, prefix="engine.")
    if not info.name.endswith(".worker")
)


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(
        module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    )
    assert result.failed == 0
