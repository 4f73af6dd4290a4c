"""Shared fixtures: the ``executor`` every pipeline test runs on, one Ray per run."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from types import ModuleType

import pytest

#: Logical CPUs of the test run's local Ray cluster. The Ray executor's actors and
#: tasks and a CPU gang's rank actors ask for 0 CPUs, so they schedule whatever
#: this is; 4 leaves room for plain Ray tasks in tests (1 CPU each by default).
#: Logical only: on this 2-core machine 2 and 4 start alike (connect 5.6 vs 4.7 s,
#: 8 zero-CPU actors ready 6.3 vs 5.2 s, loaded; 4 keeps one more idle worker).
RAY_CPUS = 4

RAY_MISSING = "needs Ray, which is not installed (pip install 'strata-gnn[ray]')"


@pytest.fixture(
    params=[
        "local",
        pytest.param("process", marks=pytest.mark.multiprocess),
        pytest.param("ray", marks=[pytest.mark.ray, pytest.mark.multiprocess]),
    ],
)
def executor(request: pytest.FixtureRequest) -> str:
    """An executor name for ``strata.engine.execute``, ``strata.engine.testing.run``.

    Every pipeline test taking it runs on each executor; ``ray`` on the test
    run's shared cluster (``ray_session``), skipped where Ray is not installed.
    """
    name: str = request.param
    if name == "ray":
        request.getfixturevalue("ray_session")
    return name


@pytest.fixture(
    params=[
        pytest.param("process", marks=pytest.mark.multiprocess),
        pytest.param("ray", marks=[pytest.mark.ray, pytest.mark.multiprocess]),
    ],
)
def other_executor(request: pytest.FixtureRequest) -> str:
    """An executor to check against the local one: ``process``, then ``ray``.

    Executor-agreement tests run a job on ``local`` and on this, and compare the
    outputs. The ``ray`` case runs on the test run's shared cluster
    (``ray_session``), and is skipped where Ray is not installed.
    """
    name: str = request.param
    if name == "ray":
        request.getfixturevalue("ray_session")
    return name


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip ``ray``-marked tests, with the reason, where Ray is not installed.

    A hook rather than an autouse fixture: it runs before any fixture is set up, so
    the session-scoped ``ray_session`` never gets as far as failing to import Ray.
    """
    if item.get_closest_marker("ray") and importlib.util.find_spec("ray") is None:
        pytest.skip(RAY_MISSING)


@pytest.fixture(scope="session")
def ray_session() -> Iterator[ModuleType]:
    """The ``ray`` module, connected to ONE local cluster shared by the whole run.

    Ray's start-up costs seconds; every Ray test takes this fixture, so the run
    pays it once. The cluster shuts down when the session ends; tests never call
    ``ray.shutdown()``. Ray's daemons and workers are children of this process:
    ``tests/engine/conftest.py``'s ``no_leftovers`` leaves them out, and counts the
    Ray actors a test leaves alive instead.
    """
    if importlib.util.find_spec("ray") is None:
        pytest.skip(RAY_MISSING)
    from strata.engine.ray_cluster import connect

    ray = connect(num_cpus=RAY_CPUS)
    yield ray
    ray.shutdown()
