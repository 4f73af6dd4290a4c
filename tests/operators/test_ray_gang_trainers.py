"""The gang trainers on Ray-actor gangs give what they give on local processes.

Oracles: single-device training (``test_distributed_exact``'s oracle: every
epoch's loss and every final weight within 1e-5) for the full-graph trainer,
exact and HongTu; the local 2-process gang's step losses for the sampled
trainer. ``$STRATA_GANG_LAUNCHER=ray`` is how the Ray executor's workers ask for
Ray gangs, so the trainers run unchanged (``launcher="auto"``).
``$STRATA_GANG_NETWORK=1`` sends every rank down the network path, as if it sat
on another node: shared segments travel by value, feature-server partitions are
read over the wire.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import distributed_workers as dw
import numpy as np
import pytest
import test_distributed_exact as exact
import test_sampled_gang as sampled

from strata.engine.gang import GangError
from strata.engine.gang.ray_gang import NETWORK_ENV
from strata.engine.gang.spec import LAUNCHER_ENV
from strata.operators.io.datasets import load_dataset
from strata.operators.trainers.distributed import DistributedConfig, DistributedTrainer

pytestmark = [pytest.mark.ray, pytest.mark.multiprocess]


@pytest.fixture
def on_ray(ray_session: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """Gangs start on the run's shared Ray cluster, as in a Ray executor's worker."""
    monkeypatch.setenv(LAUNCHER_ENV, "ray")


def full_graph(variant: str) -> DistributedTrainer:
    dist = DistributedConfig(workers=2, timeout_s=600, **exact.VARIANTS[variant])
    return DistributedTrainer(exact.train_config("gcn"), dist)


def test_full_graph_gcn_exact_and_hongtu_equal_single_device(on_ray: None) -> None:
    trainers = [full_graph("exact"), full_graph("hongtu-m3-cache")]
    runs = dw.fit_on_one_gang(exact.dataset("cora"), trainers)
    for variant, run in zip(("exact", "hongtu"), runs, strict=True):
        exact.assert_matches(run, exact.oracle("cora", "gcn"), f"ray, {variant}")
        assert run.report["backend"] == "gloo"


def test_network_path_full_graph_exact_equals_single_device(
    on_ray: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(NETWORK_ENV, "1")
    run = full_graph("exact").fit(exact.dataset("cora"))
    exact.assert_matches(run, exact.oracle("cora", "gcn"), "ray, network path")


@pytest.mark.slow
def test_network_path_refuses_hongtu_across_nodes(
    on_ray: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(NETWORK_ENV, "1")
    with pytest.raises(GangError, match="HongTu ranks on the node"):
        full_graph("hongtu-m3-cache").fit(exact.dataset("cora"))


@pytest.fixture(scope="module")
def cora() -> Any:
    return load_dataset("planetoid:cora", normalize_features=True)


def fit_sampled(data: Any) -> Any:
    return sampled._fit(data, 3, workers=2, cache=0.5, cache_policy="frequency")


@pytest.fixture(scope="module")
def local_sampled(cora: Any) -> Any:
    return fit_sampled(cora)


@pytest.mark.parametrize("network", [False, True], ids=["shm", "network"])
def test_sampled_sage_gang_gives_the_local_gang_losses(
    network: bool,
    on_ray: None,
    monkeypatch: pytest.MonkeyPatch,
    cora: Any,
    local_sampled: Any,
) -> None:
    if network:
        monkeypatch.setenv(NETWORK_ENV, "1")
    run = fit_sampled(cora)
    np.testing.assert_allclose(
        np.array(run.step_losses), np.array(local_sampled.step_losses), atol=1e-6
    )
    totals, local = run.report["totals"], local_sampled.report["totals"]
    assert totals["miss_rows"] == local["miss_rows"]
    assert run.report["traffic_agrees"]  # the network path's read is counted
