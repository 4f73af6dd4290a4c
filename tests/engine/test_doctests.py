"""Every engine module's examples run as doctests."""

import doctest
import importlib
import pkgutil

import pytest

import strata.engine

# Modules whose examples start worker processes.
STARTS_PROCESSES = {"strata.engine.executors.process"}
MODULES = [
    pytest.param(name, marks=pytest.mark.multiprocess)
    if name in STARTS_PROCESSES
    else name
    for name in sorted(
        info.name
        for info in pkgutil.walk_packages(
            strata.engine.__path__, prefix="strata.engine."
        )
        # strata.engine.gang (issue 6) runs its own doctests with its own markers.
        if not info.name.endswith(".worker")
        and not info.name.startswith("strata.engine.gang")
    )
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(
        module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    )
    assert result.failed == 0
