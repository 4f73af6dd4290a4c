"""The training loop: every variant runs, runs are deterministic, and a run
resumed from its state mid-epoch continues on the same trajectory."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from strata.operators.recsys.features import build_features
from strata.operators.recsys.graph import build_typed_graph
from strata.operators.recsys.split import temporal_split
from strata.operators.recsys.step import train_variant
from strata.operators.recsys.synth import SynthConfig, synth_interactions
from strata.operators.recsys.train import (
    RecConfig,
    RecTrainer,
    evaluate_topk,
)
from strata.operators.recsys.variants import Variant

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def data():  # type: ignore[no-untyped-def]
    split = temporal_split(
        synth_interactions(SynthConfig(num_users=160, num_items=80), 0)
    )
    return build_typed_graph(split), build_features(split), split


def _cfg(variant: str, **kw: object) -> RecConfig:
    return RecConfig(variant=variant, epochs=1, batch_size=512, fanouts=(4, 3), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("variant", [v.value for v in Variant])
def test_every_variant_trains_and_ranks(data, variant: str) -> None:  # type: ignore[no-untyped-def]
    graph, feats, split = data
    trained = train_variant(_cfg(variant), graph, feats, split)
    m = evaluate_topk(trained, graph, feats, split, ks=(5, 10))
    assert 0.0 <= m.recall[5] <= m.recall[10] <= 1.0
    assert m.top_items.shape == (split.report.eval_users, 10)
    # Recommended items were never met in train or validation.
    inter = split.inter
    seen = set(
        zip(
            inter.user[np.concatenate([split.train, split.val])].tolist(),
            inter.item[np.concatenate([split.train, split.val])].tolist(),
            strict=True,
        )
    )
    for u, row in zip(m.users.tolist(), m.top_items.tolist(), strict=True):
        assert not any((u, i) in seen for i in row if i >= 0)
    assert trained.tasks[0] == "rank"
    if variant == "B1":
        assert trained.stage_one_seconds > 0
        assert trained.inference_seconds > 0


def test_same_seed_same_metrics(data) -> None:  # type: ignore[no-untyped-def]
    graph, feats, split = data
    a = evaluate_topk(
        train_variant(_cfg("E2E"), graph, feats, split), graph, feats, split
    )
    b = evaluate_topk(
        train_variant(_cfg("E2E"), graph, feats, split), graph, feats, split
    )
    assert a.recall == b.recall
    assert a.ndcg == b.ndcg
    np.testing.assert_array_equal(a.top_items, b.top_items)


def test_resume_mid_epoch_continues_the_same_trajectory(data) -> None:  # type: ignore[no-untyped-def]
    graph, feats, split = data
    cfg = RecConfig(
        variant="E2E", epochs=2, batch_size=512, fanouts=(4, 3), log_every=1
    )
    whole = RecTrainer(cfg, graph, feats, split)
    whole.run()
    first = RecTrainer(cfg, graph, feats, split)
    first.train_step()
    first.train_step()
    state = first.state_dict()
    resumed = RecTrainer(cfg, graph, feats, split)
    resumed.load_state_dict(state)
    resumed.run()
    assert resumed.val_history == whole.val_history
    assert resumed.weight_log == whole.weight_log
    for key, value in whole.model.state_dict().items():
        torch.testing.assert_close(
            resumed.model.state_dict()[key], value, rtol=0, atol=0
        )


def test_gradnorm_weights_stay_in_bounds(data) -> None:  # type: ignore[no-untyped-def]
    graph, feats, split = data
    trained = train_variant(_cfg("E2E", log_every=1), graph, feats, split)
    weights = np.array([row[2:] for row in trained.weight_log])
    assert weights.min() >= trained.cfg.gradnorm.floor - 1e-9
    assert weights.max() <= len(trained.tasks)
    np.testing.assert_allclose(weights.sum(1), len(trained.tasks))


def test_sampled_inference_with_all_neighbours_equals_full_inference(data) -> None:  # type: ignore[no-untyped-def]
    graph, feats, split = data
    trained = train_variant(_cfg("E2E"), graph, feats, split)
    full = evaluate_topk(trained, graph, feats, split, ks=(10,))
    # Fan-out -1 takes every neighbour: the sampled z is the full z.
    everything = replace(trained, cfg=replace(trained.cfg, fanouts=(-1, -1)))
    same = evaluate_topk(everything, graph, feats, split, ks=(10,), sampled=True)
    assert same.recall[10] == pytest.approx(full.recall[10])
    assert same.ndcg[10] == pytest.approx(full.ndcg[10])
    sampled = evaluate_topk(trained, graph, feats, split, ks=(10,), sampled=True)
    assert 0.0 <= sampled.recall[10] <= 1.0


@pytest.mark.parametrize("variant", ["E2E", "F1", "F2", "B0"])
def test_full_catalogue_vectors_give_the_training_score(data, variant: str) -> None:  # type: ignore[no-untyped-def]
    graph, feats, split = data
    model = RecTrainer(_cfg(variant), graph, feats, split).model
    x = feats.tensors()
    with torch.no_grad():
        users, items = model.score_vectors(graph, x)
        z = model.full_z(graph, x)
        t = model.towers_full(x, z)
        u = torch.tensor([0, 3, 5])
        i = torch.tensor([7, 1, 2])
        zu = None if z is None else z["user"][u]
        zi = None if z is None else z["item"][i]
        expected = model.pair_score(t["user"][u], t["item"][i], zu, zi)
    torch.testing.assert_close((users[u] * items[i]).sum(1), expected)
    assert (model.a is not None) == (variant in ("E2E", "F2"))
    assert (model.user_tower.fusion is not None) == (variant in ("E2E", "F1"))


def test_plain_gfae_ablation_trains(data) -> None:  # type: ignore[no-untyped-def]
    graph, feats, split = data
    trainer = RecTrainer(_cfg("E2E", gfae_plain=True), graph, feats, split)
    losses = trainer.train_step()
    assert set(losses) == {"rank", "long_view", "gfae"}
    assert all(np.isfinite(v) for v in losses.values())
