"""Emma on gangs: K-invariance against one process, exact per-cycle traffic, and
the job outputs (:func:`emma_outputs`) of a gang run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from strata.operators.trainers import ModelConfig, TrainConfig
from strata.operators.trainers.distributed.config import DistributedConfig
from strata.operators.trainers.distributed.emma import (
    EmmaConfig,
    EmmaTrainer,
    emma_outputs,
)
from strata.storage import load_graph

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


@pytest.fixture(scope="module")
def two_workers():  # type: ignore[no-untyped-def]
    return run(2)


def test_two_workers_equal_one_process(two_workers) -> None:  # type: ignore[no-untyped-def]
    assert_same_run(two_workers, run(1))
    assert_cycle_traffic(two_workers.report, 4)


def test_job_outputs_carry_the_run_and_emmas_figures(two_workers) -> None:  # type: ignore[no-untyped-def]
    """The three ports as a pipeline emits them -> outputs; ratios from first
    principles: 20 iterations are 5 whole cycles of S=4, each sending every halo
    row once forward and once backward, so both ratios are exactly 1/4, and one
    exact exchange is (sum of halo sizes) rows x hidden 8 x 4 bytes (layer 2)."""
    run_ = two_workers
    epochs = [r.to_dict() for r in run_.history]
    out = emma_outputs([run_.result.to_dict()], epochs, [run_.report], {"graph": SBM})
    json.dumps(out)  # a job writes it as is
    assert out["graph"] == SBM
    assert out["test_accuracy"] == run_.result.test_accuracy
    assert out["loss_curve"] == [float(f"{r.loss:.4g}") for r in run_.history]
    assert out["emma_splits"] == 4
    assert out["emma_fwd_bytes_ratio"] == 0.25
    assert out["emma_bwd_bytes_ratio"] == 0.25
    assert out["emma_edges_ratio"] == 0.25
    assert out["emma_cycle_rows_equal_exact"] is True
    halo_rows = sum(run_.report["partition"]["halo_sizes"])
    assert halo_rows > 0
    assert out["emma_exact_exchange_bytes"] == halo_rows * 8 * 4
    assert out["emma_refreshes"] == [6, 12, 18]
    assert out["emma_refresh_bytes"] == 3 * halo_rows * 8 * 4  # layer 2, exact
    assert out["emma_eval_bytes"] == ITERATIONS * halo_rows * 8 * 4  # every epoch
    owned = max(w["owned"] for w in run_.report["per_worker"])
    assert out["emma_buffer_bytes"] == owned * (8 + 8) * 4  # features 8, hidden 8
    # Emma's counters in the run report: levels once, flows summed over the run
    totals = run_.report["totals"]
    assert totals["setup.buffer_bytes"] == 1200 * (8 + 8) * 4  # all owned rows
    assert totals.get("emma.control_bytes", 0) == 0  # zero counters are left out
    assert totals["emma.edges_aggregated"] * 4 == totals["emma.exact_edges"]
    assert totals["refresh.refresh_bytes"] == out["emma_refresh_bytes"]


def test_tensor_peak_counts_buffers_features_and_saved_tensors(two_workers) -> None:  # type: ignore[no-untyped-def]
    """Measured as in exact mode: at least the resident features (owned and
    local rows, 8 floats) and moving buffers (widths 8 and 8), plus what autograd
    saved, which is more than nothing."""
    for w in two_workers.report["per_worker"]:
        peak = w["tensor_peak_bytes"]
        assert isinstance(peak, int)
        owned, local = w["owned"], w["owned"] + w["halo"]
        assert peak > (owned * 8 + local * 8 + owned * (8 + 8)) * 4


@pytest.mark.slow
@pytest.mark.parametrize("model", ["sage", "gcn"])
def test_four_workers_equal_one_process(model: str) -> None:
    one = run(1, model)
    four = run(4, model)
    assert_same_run(four, one)
    assert_cycle_traffic(four.report, 4)
