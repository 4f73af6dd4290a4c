"""Sampled training on a gang: worker-count invariance, cache/prefetch invariance,
accuracy on Cora, honest traffic counters, and failures that never hang.

Oracles: the one-worker run (in this process, no server) for the losses; the
servers' own counters for the clients'; the process table and /dev/shm for what
a failed run leaves behind.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import numpy as np
import psutil
import pytest
import torch

from strata.engine.gang import GangError
from strata.operators.io.datasets import load_dataset
from strata.operators.trainers import ModelConfig, TrainConfig
from strata.operators.trainers.data import as_training_data
from strata.operators.trainers.sampled import (
    NetworkConfig,
    SampledGangConfig,
    SampledGangTrainer,
    SampledTrainer,
    SamplingConfig,
)
from tests.engine.conftest import worker_processes

pytestmark = pytest.mark.multiprocess


@pytest.fixture(scope="module")
def cora() -> Any:
    return load_dataset("planetoid:cora", normalize_features=True)


def _config(epochs: int, dropout: float = 0.5, seed: int = 0) -> TrainConfig:
    model = ModelConfig("sage", hidden=64, num_layers=2, dropout=dropout)
    return TrainConfig(
        model,
        lr=0.01,
        weight_decay=5e-4,
        epochs=epochs,
        patience=0,
        seed=seed,
        device="cpu",
        threads=1,
    )


SAMPLING = SamplingConfig(fanouts=(10, 10), batch_size=32)


def _fit(data: Any, epochs: int, **gang: Any) -> Any:
    config = SampledGangConfig(device="cpu", timeout_s=240, **gang)
    return SampledGangTrainer(_config(epochs), SAMPLING, config).fit(data)


@pytest.fixture(scope="module")
def one_worker(cora: Any) -> Any:
    return _fit(cora, 30, workers=1)


@pytest.fixture(scope="module")
def two_workers(cora: Any) -> Any:
    return _fit(cora, 30, workers=2, cache=0.5, cache_policy="frequency")


def test_two_workers_give_the_one_worker_losses(one_worker: Any, two_workers: Any):
    one = np.array(one_worker.step_losses)
    two = np.array(two_workers.step_losses)
    assert one.shape == two.shape == (30, 5)  # 140 training nodes, batch 32
    # Float reduction order differs (two partial sums instead of one), and Adam
    # carries the difference forward, so the bound is absolute 1e-5 early and
    # relative 1e-4 over the whole run.
    np.testing.assert_allclose(two[:5], one[:5], atol=1e-5, rtol=0)
    np.testing.assert_allclose(two, one, rtol=1e-4, atol=1e-6)


def test_cora_accuracy_with_cache_and_prefetch(one_worker: Any, two_workers: Any):
    one, two = one_worker.result.test_accuracy, two_workers.result.test_accuracy
    assert two >= 0.78
    assert abs(two - one) <= 0.01


def test_counters_are_real_and_agree(two_workers: Any):
    report = two_workers.report
    totals = report["totals"]
    assert report["traffic_agrees"] is True
    # Every remote access is a hit or a miss; misses are what was fetched.
    assert totals["cache_hits"] + totals["cache_misses"] == totals["remote_accesses"]
    assert totals["miss_rows"] == totals["cache_misses"]
    assert totals["remote_rows"] == totals["miss_rows"] + totals["fill_rows"]
    assert totals["remote_accesses"] > 0
    assert totals["cache_hits"] > 0
    served = report["server_traffic"]
    assert (
        sum(t["served_rows"] for t in served.values())
        == (report["client_traffic"]["client_rows"])
    )
    assert report["train_balance"] <= 1.01


def test_cache_and_prefetch_never_change_the_losses(cora: Any):
    """R5: on-demand (no cache, no prefetch) and cache + prefetch, same steps."""
    base: dict[str, Any] = {"workers": 2, "cache_policy": "none"}
    config = _config(3)
    on_demand = SampledGangTrainer(
        config,
        SamplingConfig(fanouts=(10, 10), batch_size=32, prefetch=0),
        SampledGangConfig(device="cpu", timeout_s=240, **base),  # type: ignore[arg-type]
    ).fit(cora)
    cached = _fit(cora, 3, workers=2, cache=0.25, cache_policy="belady")
    assert on_demand.step_losses == cached.step_losses
    assert on_demand.report["totals"]["cache_hits"] == 0
    assert cached.report["totals"]["cache_hits"] > 0


def test_two_runs_end_with_identical_weights(cora: Any):
    a = _fit(cora, 2, workers=2, cache=0.5)
    b = _fit(cora, 2, workers=2, cache=0.5)
    assert a.state.keys() == b.state.keys()
    for name in a.state:
        assert torch.equal(a.state[name], b.state[name]), name


def test_the_one_process_trainer_agrees_without_dropout(cora: Any):
    """The gang's one definition of the step matches SampledTrainer's."""
    config = _config(3, dropout=0.0)
    gang = SampledGangTrainer(config, SAMPLING, SampledGangConfig(workers=1)).fit(cora)
    single = SampledTrainer(config, SAMPLING).fit(cora)
    assert gang.result.test_accuracy == pytest.approx(single.test_accuracy, abs=0.01)


def test_bad_settings_are_refused(cora: Any):
    with pytest.raises(ValueError, match="patience"):
        SampledGangTrainer(
            TrainConfig(ModelConfig("sage"), patience=5), SAMPLING, SampledGangConfig()
        )
    with pytest.raises(ValueError, match="workers"):
        SampledGangTrainer(
            _config(1), SAMPLING, SampledGangConfig(workers=cora_nodes(cora) + 1)
        ).fit(cora)


def cora_nodes(cora: Any) -> int:
    return int(as_training_data(cora, "test").num_nodes)


# ------------------------------------------------------------------ failures


def _segments() -> set[str]:
    """Shared-memory segments this process created (their names carry its pid)."""
    pid = str(os.getpid())
    return {name for name in os.listdir("/dev/shm") if pid in name}


def _kill_later(find: Any, delay_s: float) -> threading.Thread:
    def run() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            proc = find()
            if proc is not None:
                time.sleep(delay_s)
                proc.kill()
                return
            time.sleep(0.05)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _descendants() -> list[psutil.Process]:
    """This process's children, but the fork server's and the test run's Ray's."""
    found = []
    for pid in worker_processes():  # the session's long-lived helpers left out
        try:
            found.append(psutil.Process(pid))
        except psutil.Error:
            continue
    return found


def _server(part: int) -> psutil.Process | None:
    for proc in _descendants():
        with_part = f'-features-p{part}"'
        try:
            if any(with_part in arg for arg in proc.cmdline()):
                return proc
        except psutil.Error:
            continue
    return None


def _slow_run(cora: Any, **gang: Any) -> SampledGangTrainer:
    network = NetworkConfig(latency_s=0.02)
    config = SampledGangConfig(
        device="cpu",
        workers=2,
        network=network,
        fetch_timeout_s=3.0,
        collective_timeout_s=20.0,
        timeout_s=120.0,
        **gang,
    )
    return SampledGangTrainer(_config(40), SamplingConfig((10, 10), 16), config)


def test_a_killed_feature_server_fails_the_run_naming_it(cora: Any):
    before = _segments()
    killer = _kill_later(lambda: _server(1), delay_s=4.0)
    start = time.monotonic()
    with pytest.raises(GangError) as caught:
        _slow_run(cora).fit(cora)
    took = time.monotonic() - start
    killer.join(5)
    message = str(caught.value)
    assert "partition 1" in message
    assert "features-p1" in message
    assert took < 60
    time.sleep(0.5)
    assert not [p for p in _descendants() if p.is_running() and p.status() != "zombie"]
    assert _segments() <= before


def test_a_killed_trainer_fails_the_run_naming_its_rank(cora: Any):
    before = _segments()

    def trainer() -> psutil.Process | None:
        """A gang worker: a child of the engine's fork server, busy training."""
        for proc in psutil.Process().children(recursive=True):
            try:
                if "forkserver" not in " ".join(proc.cmdline()):
                    continue
                for child in proc.children():
                    if child.cpu_times().user > 1.0:
                        return child
            except psutil.Error:
                continue
        return None

    killer = _kill_later(trainer, delay_s=0.5)
    with pytest.raises(GangError, match="rank"):
        _slow_run(cora).fit(cora)
    killer.join(5)
    time.sleep(0.5)
    assert _server(0) is None
    assert _server(1) is None
    assert _segments() <= before


def test_prefetch_queue_stays_under_its_byte_limit(cora: Any):
    """R6: the prefetcher never holds more than ``prefetch_bytes`` (one batch
    alone may exceed it), and without the limit it would have held more."""
    limit = 4 << 20  # a Cora batch of 32 seeds reads ~260 rows of 5.7 kB
    sampling = SamplingConfig(fanouts=(10, 10), batch_size=32, prefetch=8)

    def peak(prefetch_bytes: int) -> int:
        gang = SampledGangConfig(workers=1, device="cpu", prefetch_bytes=prefetch_bytes)
        run = SampledGangTrainer(_config(3), sampling, gang).fit(cora)
        epochs = run.report["per_trainer"][0]["epochs"]
        return max(int(e["prefetch_peak_bytes"]) for e in epochs)

    assert peak(limit) <= limit
    assert peak(1 << 40) > limit


def test_trainers_that_derive_different_batches_fail_loudly():
    import gang_order_workers as workers

    from strata.engine.gang import GangSpec, run_gang

    spec = GangSpec(workers=2, device="cpu", timeout_s=120)
    same = run_gang(workers.derive, spec, [7, 7])
    assert same[0] == same[1]
    with pytest.raises(GangError, match="epoch schedule in trainer rank"):
        run_gang(workers.derive, spec, [7, 8])


def test_blocks_kept_by_the_schedule_train_the_same_steps(cora: Any):
    """The schedule pass's kept blocks replace sampling again, never the batch."""

    def run(keep: int) -> Any:
        gang = SampledGangConfig(
            workers=1, device="cpu", cache=0.5, keep_blocks_bytes=keep
        )
        return SampledGangTrainer(_config(3), SAMPLING, gang).fit(cora)

    kept, sampled = run(256 << 20), run(0)
    assert kept.step_losses == sampled.step_losses
    reused = kept.report["per_trainer"][0]["epochs"][-1]["reused_blocks"]
    assert reused == 3 * 5  # every batch of every epoch (5 batches of 32 seeds)
    assert sampled.report["per_trainer"][0]["epochs"][-1]["reused_blocks"] == 0
