"""Emma on gangs: K-invariance against one process, and exact per-cycle traffic."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from operators.trainers import ModelConfig, TrainConfig
from operators.trainers.distributed.config import DistributedConfig
from operators.trainers.distributed.emma import EmmaConfig, EmmaTrainer
from storage import load_graph

pytestmark = pytest.mark.multiprocess

SBM = "sbm:n=1200,blocks=4,features=8,seed=1"
ITERATIONS = 20


def run(workers: int, model: str = "sage", splits: int = 4):  # type: ignore[no-untyped-def]
    config = TrainConfig(
        ModelConfig(model, hidden=8, dropout=0.5),
        epochs=ITERATIONS,
        device="cpu",
        restore_best=False,
        threads=1,
    )
    emma = EmmaConfig(splits, refresh_every=6, seed=3)
    dist = DistributedConfig(workers=workers, threads_per_worker=1, level1="random")
    trainer = EmmaTrainer(config, dist, emma)
    data = load_graph(SBM)
    return trainer.fit_local(data) if workers == 1 else trainer.fit(data)


def assert_same_run(a, b) -> None:  # type: ignore[no-untyped-def]
    for name in ("loss", "val_loss", "train_accuracy", "val_accuracy"):
        np.testing.assert_allclose(
            [getattr(r, name) for r in a.history],
            [getattr(r, name) for r in b.history],
            rtol=0,
            atol=1e-5,
        )
    for key, value in a.state.items():
        torch.testing.assert_close(value, b.state[key], rtol=0, atol=1e-5)
    assert a.result.test_accuracy == pytest.approx(b.result.test_accuracy, abs=1e-5)


def assert_cycle_traffic(report: dict, splits: int) -> None:
    emma = report["emma"]
    assert emma["cycles"] == ITERATIONS // splits
    assert emma["cycle_rows_equal_exact"]  # every halo row once per cycle, per worker
    whole = emma["cycles"] * splits
    fwd = np.asarray(emma["fwd_bytes_per_iteration"][:whole])
    assert fwd.sum() == emma["cycles"] * emma["exact_exchange_bytes"]
    assert emma["edges_ratio"] == pytest.approx(1 / splits, abs=1e-12)
    assert emma["control_bytes"] == 0
    assert emma["refreshes"] == [6, 12, 18]
    assert emma["refresh_bytes"] > 0


def test_two_workers_equal_one_process() -> None:
    one = run(1)
    two = run(2)
    assert_same_run(two, one)
    assert_cycle_traffic(two.report, 4)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["sage", "gcn"])
def test_four_workers_equal_one_process(model: str) -> None:
    one = run(1, model)
    four = run(4, model)
    assert_same_run(four, one)
    assert_cycle_traffic(four.report, 4)
