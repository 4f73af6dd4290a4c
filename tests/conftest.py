"""Shared fixtures: the ``executor`` every pipeline test runs on."""

from __future__ import annotations

import pytest


@pytest.fixture(
    params=["local", pytest.param("process", marks=pytest.mark.multiprocess)],
)
def executor(request: pytest.FixtureRequest) -> str:
    """An executor name for ``strata.engine.execute``, ``strata.engine.testing.run``."""
    name: str = request.param
    return name
