"""Without Ray installed, the Ray paths say which extra to install.

``sys.modules["ray"] = None`` makes ``import ray`` fail as if Ray were not
installed, whether or not it is; the Ray executor's own modules are dropped from
``sys.modules`` too, so their (lazy) imports run again under it.
"""

from __future__ import annotations

import sys

import pytest

from strata.engine import Pipeline, execute
from strata.engine.ray_cluster import connect, require_ray
from strata.engine.testing import ListSink, ListSource
from strata.operators.cli.main import main

EXTRA = r"pip install 'strata-gnn\[ray\]'"


@pytest.fixture
def without_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    for name in list(sys.modules):
        if name.startswith("strata.engine.executors.ray_"):
            monkeypatch.delitem(sys.modules, name)


def numbers() -> Pipeline:
    p = Pipeline("numbers")
    p.step("numbers", ListSource([1, 2, 3]))
    p.step("sink", ListSink(), "numbers")
    return p


@pytest.mark.usefixtures("without_ray")
def test_require_ray_and_connect_name_the_extra() -> None:
    with pytest.raises(ImportError, match=EXTRA):
        require_ray()
    with pytest.raises(ImportError, match=EXTRA):
        connect()


@pytest.mark.usefixtures("without_ray")
def test_the_ray_executor_names_the_extra() -> None:
    with pytest.raises(ImportError, match=EXTRA):
        execute(numbers(), "ray")


@pytest.mark.usefixtures("without_ray")
def test_strata_run_on_ray_is_a_usage_error_not_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["run", "jobs/degree_stats.py", "--quiet", "--executor", "ray"]
    assert main([*argv, "--set", "num_edges=1000", "--set", "num_nodes=100"]) == 2
    err = capsys.readouterr().err
    assert "strata-gnn[ray]" in err
    assert "Traceback" not in err
