"""Every strata.engine.gang module's examples run as doctests (none starts one)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import strata.engine.gang

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(
        strata.engine.gang.__path__, prefix="strata.engine.gang."
    )
)


@pytest.mark.parametrize("name", ["strata.engine.gang", *MODULES])
def test_doctests(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(
        module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    )
    assert result.failed == 0
