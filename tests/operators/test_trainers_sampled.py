"""SampledTrainer, its prefetcher, epoch schedule and layer-wise inference."""

from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np
import pytest
import torch

from strata.operators.io.datasets import community_dataset, save_dataset_dir
from strata.operators.trainers import (
    TIMING_KEYS,
    EvalMode,
    ModelConfig,
    Prefetcher,
    SampledTrainer,
    SamplingConfig,
    TrainConfig,
    epoch_order,
    layerwise_inference,
)
from strata.storage import InMemoryFeatureStore, Key, sbm

SAMPLING = SamplingConfig(fanouts=(5, 5), batch_size=128, eval_batch_size=500)


@pytest.fixture(scope="module")
def data() -> dict:
    # 2000 nodes in 4 communities; features alone are a weak classifier.
    return community_dataset(2000, 4, avg_degree=8, num_features=16, seed=2)


def config(**changes) -> TrainConfig:
    base = TrainConfig(
        ModelConfig("sage", hidden=32, dropout=0.2),
        lr=0.01,
        weight_decay=0.0,
        epochs=3,
        device="cpu",
        threads=1,
    )
    return dataclasses.replace(base, **changes)


def run(config: TrainConfig, data, sampling: SamplingConfig = SAMPLING):
    records = []
    trainer = SampledTrainer(config, sampling)
    result = trainer.fit(data, lambda r: records.append(r.to_dict()))
    return [untimed(r) for r in records], untimed(result.to_dict())


def untimed(values: dict) -> dict:
    return {k: v for k, v in values.items() if k not in TIMING_KEYS}


def test_accuracy_is_well_above_chance(data) -> None:
    records, result = run(config(epochs=10), data)
    # Chance is 0.25; logistic regression on the features alone reaches about 0.5.
    assert result["test_accuracy"] > 0.75
    assert records[-1]["seeds"] == 1000  # half the nodes train
    assert records[-1]["batches"] == 8


def test_same_seed_gives_identical_losses(data) -> None:
    first = run(config(), data)
    assert run(config(), data) == first
    assert run(config(seed=1), data)[0][0]["loss"] != first[0][0]["loss"]


def test_prefetch_depth_does_not_change_the_run(data) -> None:
    # Sampling and shuffles are keyed by (seed, epoch, batch) and dropout draws
    # only on the training thread, so how far the prefetch thread runs ahead
    # (its one concurrency setting) leaves every loss and accuracy as it was.
    one = run(config(epochs=2), data, dataclasses.replace(SAMPLING, prefetch=1))
    assert run(config(epochs=2), data, dataclasses.replace(SAMPLING, prefetch=8)) == one


def test_resume_continues_the_uninterrupted_trajectory(data, tmp_path) -> None:
    straight_records, straight = run(config(epochs=4), data)
    run(config(epochs=2, checkpoint_dir=str(tmp_path)), data)
    resumed_records, resumed = run(
        config(epochs=4, checkpoint_dir=str(tmp_path), resume=True), data
    )
    assert resumed_records == straight_records  # the whole run's epochs
    assert resumed.pop("resumed_from") == 2
    straight.pop("resumed_from")
    assert resumed == straight


def test_arrow_store_trains_exactly_like_the_in_memory_store(data, tmp_path) -> None:
    directory = save_dataset_dir(data, str(tmp_path / "community"))
    assert run(config(epochs=2), directory) == run(config(epochs=2), data)


def test_sampled_evaluation(data) -> None:
    sampled = dataclasses.replace(SAMPLING, eval_mode=EvalMode.SAMPLED)
    records, result = run(config(epochs=4), data, sampled)
    assert result["test_accuracy"] > 0.65
    # The evaluation key is fixed: evaluating twice gives the same metrics.
    assert run(config(epochs=4), data, sampled) == (records, result)


def test_early_stopping(data) -> None:
    records, result = run(config(lr=0.0, epochs=20, patience=2), data)
    assert len(records) == 3
    assert result["stopped_early"]


def test_epoch_order_is_keyed_by_seed_and_epoch() -> None:
    ids = np.arange(100, 200)
    order = epoch_order(ids, seed=3, epoch=5)
    assert sorted(order.tolist()) == ids.tolist()
    assert np.array_equal(order, epoch_order(ids, seed=3, epoch=5))
    assert not np.array_equal(order, epoch_order(ids, seed=3, epoch=6))
    assert not np.array_equal(order, epoch_order(ids, seed=4, epoch=5))


def test_prefetcher_stays_at_most_depth_batches_ahead() -> None:
    produced: list[int] = []

    def produce(index: int) -> int:
        produced.append(index)
        return index

    prefetcher = Prefetcher(produce, num_batches=50, depth=3)
    seen = []
    with prefetcher:
        for item in prefetcher:
            time.sleep(0.005)
            # queued (<= depth) + the one being put + the one being consumed
            assert len(produced) - len(seen) <= 3 + 2
            seen.append(item)
    assert seen == list(range(50))


def test_prefetcher_reraises_a_producer_error_at_its_batch() -> None:
    def produce(index: int) -> int:
        if index == 3:
            raise ValueError("bad batch 3")
        return index

    seen = []
    with pytest.raises(ValueError, match="bad batch 3"), Prefetcher(produce, 10) as p:
        seen.extend(p)
    assert seen == [0, 1, 2]


def test_prefetcher_closed_early_ends_its_thread() -> None:
    before = threading.active_count()
    with Prefetcher(lambda i: i, num_batches=10_000, depth=2) as p:
        assert next(iter(p)) == 0
    assert threading.active_count() == before


@pytest.mark.parametrize("name", ["sage", "gat", "gin"])
def test_layerwise_inference_equals_the_full_graph_forward(name) -> None:
    graph, _ = sbm(300, 3, avg_degree=6, seed=0)
    torch.manual_seed(0)
    x = torch.randn(300, 8)
    store = InMemoryFeatureStore({Key("node", "x"): x})
    model = ModelConfig(name, hidden=8, heads=2).build(8, 3).eval()
    out = layerwise_inference(model, graph, store, Key("node", "x"), batch_size=64)
    with torch.no_grad():
        expected = model(graph, x)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
