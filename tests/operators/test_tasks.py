"""Tasks (node classification, regression, link prediction), metrics, optimisers."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from strata.engine.params import apply
from strata.operators.errors import OperatorError
from strata.operators.io.datasets import community_dataset, load_dataset
from strata.operators.layers import SAGEConv
from strata.operators.trainers import (
    FullGraphTrainer,
    ModelConfig,
    SampledTrainer,
    SamplingConfig,
    TrainConfig,
    TrainingData,
)
from strata.operators.trainers.link_split import pair_keys, split_edges
from strata.operators.trainers.metrics import hits_at, mrr, ranks, roc_auc
from strata.operators.trainers.optim import (
    SGD,
    AdamW,
    Cosine,
    StepDecay,
    first_layer,
    make_optimizer,
)
from strata.operators.trainers.tasks import (
    LinkPrediction,
    NodeClassification,
    NodeRegression,
)
from strata.storage import (
    CSRGraph,
    GraphDataset,
    InMemoryFeatureStore,
    Key,
    load_graph,
    sbm,
)

FAST = {"device": "cpu", "threads": 1}


# ------------------------------------------------------------------ metrics
def _auc_pairs(pos: list[float], neg: list[float]) -> float:
    won = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    return won / (len(pos) * len(neg))


@pytest.mark.parametrize("seed", range(5))
def test_auc_by_ranks_equals_the_pairwise_count(seed: int) -> None:
    rng = np.random.default_rng(seed)
    pos = rng.integers(0, 6, size=int(rng.integers(1, 30))).astype(float)
    neg = rng.integers(0, 6, size=int(rng.integers(1, 30))).astype(float)  # ties
    got = roc_auc(torch.tensor(pos), torch.tensor(neg))
    assert got == pytest.approx(_auc_pairs(list(pos), list(neg)), abs=1e-12)


def test_auc_extremes_and_empty() -> None:
    assert roc_auc(torch.tensor([2.0, 3.0]), torch.tensor([0.0, 1.0])) == 1.0
    assert roc_auc(torch.tensor([0.0]), torch.tensor([1.0, 2.0])) == 0.0
    assert math.isnan(roc_auc(torch.tensor([]), torch.tensor([1.0])))


@pytest.mark.parametrize("seed", range(3))
def test_mrr_and_hits_equal_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    pos = rng.integers(0, 8, size=20).astype(float)
    neg = rng.integers(0, 8, size=(20, 15)).astype(float)
    want_ranks = []
    for p, row in zip(pos, neg, strict=True):
        better = sum(1 for n in row if n > p)
        tied = sum(1 for n in row if n == p)
        want_ranks.append(1 + better + tied / 2)
    rank = ranks(torch.tensor(pos), torch.tensor(neg))
    assert rank.tolist() == want_ranks
    assert mrr(rank) == pytest.approx(np.mean([1 / r for r in want_ranks]))
    for k in (1, 3, 10):
        assert hits_at(rank, k) == pytest.approx(np.mean([r <= k for r in want_ranks]))


# ------------------------------------------------------------------ edge split
def test_edge_split_holds_out_edges_from_the_message_graph() -> None:
    graph, _ = sbm(200, 4, 6.0, 0.9, seed=1)
    n = graph.num_nodes
    split = split_edges(graph, val_fraction=0.1, test_fraction=0.2, seed=3)
    src, dst = graph.to_coo()
    every = set(pair_keys(np.stack([src, dst])[:, src != dst], n).tolist())
    keys = {s: set(pair_keys(p, n).tolist()) for s, p in split.positives.items()}
    assert keys["train"] | keys["val"] | keys["test"] == every
    for a, b in itertools.combinations(keys.values(), 2):
        assert not a & b
    assert len(keys["test"]) == round(0.2 * len(every))
    msrc, mdst = split.graph.to_coo()
    assert set(pair_keys(np.stack([msrc, mdst]), n).tolist()) == keys["train"]
    assert split.graph.is_symmetric()
    for s in ("train", "val", "test"):  # fixed negatives are non-edges, no loops
        negative = split.negatives[s]
        assert not set(pair_keys(negative, n).tolist()) & every
        assert bool((negative[0] != negative[1]).all())
    again = split_edges(graph, val_fraction=0.1, test_fraction=0.2, seed=3)
    assert np.array_equal(again.positives["test"], split.positives["test"])


def test_link_batches_are_keyed_and_avoid_training_edges() -> None:
    data = TrainingData.from_dataset(load_dataset_sbm())
    state = LinkPrediction(negatives=2).setup(data, seed=0, where="test")
    examples = state.train_examples()[:50]
    a = state.batch(examples, epoch=3, index=1)
    b = state.batch(examples, epoch=3, index=1)
    c = state.batch(examples, epoch=4, index=1)
    assert a.nodes is not None
    assert a.pairs is not None
    assert torch.equal(a.pairs, b.pairs)
    assert not torch.equal(a.pairs, c.pairs)
    assert a.size == 50
    assert a.pairs.shape[1] == 150
    assert a.target.tolist() == [1.0] * 50 + [0.0] * 100
    pairs = a.nodes[a.pairs].numpy()  # back to global ids
    train = set(state.split.train_keys.tolist())
    keys = pair_keys(pairs, data.num_nodes)
    assert set(keys[:50].tolist()) <= train
    assert not set(keys[50:].tolist()) & train


def load_dataset_sbm() -> GraphDataset:
    return load_graph("sbm:n=400,blocks=10,degree=10,intra=0.95,features=8")


# ------------------------------------------------------------------ tasks
def _regression_data() -> TrainingData:
    graph, _ = sbm(300, 3, 8.0, 0.9, seed=0)
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((300, 4)), dtype=torch.float32)
    # the target: the mean of the neighbours' first feature plus its own second
    mean = torch.zeros(300)
    src, dst = graph.to_coo()
    mean.index_add_(0, torch.from_numpy(dst.astype(np.int64)), x[src, 0])
    degree = torch.bincount(torch.from_numpy(dst.astype(np.int64)), minlength=300)
    y = mean / degree.clamp(min=1) + x[:, 1]
    order = rng.permutation(300)
    masks = {s: torch.zeros(300, dtype=torch.bool) for s in ("train", "val", "test")}
    masks["train"][order[:150]] = True
    masks["val"][order[150:200]] = True
    masks["test"][order[200:]] = True
    store = InMemoryFeatureStore({Key("node", "x"): x})
    return TrainingData(graph, store, y, masks, num_classes=1)


@pytest.mark.parametrize("sampled", [False, True])
def test_node_regression_learns_a_neighbourhood_target(sampled: bool) -> None:
    config = TrainConfig(
        ModelConfig("sage", hidden=32, dropout=0.0),
        epochs=60,
        weight_decay=0.0,
        task=NodeRegression(),
        seed=0,
        **FAST,
    )
    trainer = (
        SampledTrainer(config, SamplingConfig(fanouts=(-1, -1), batch_size=64))
        if sampled
        else FullGraphTrainer(config)
    )
    data = _regression_data()
    result = trainer.fit(data)
    assert result.test_accuracy > 0.8  # R^2
    assert result.to_dict()["test_r2"] == result.test_accuracy
    prediction = trainer.predict(data)
    assert prediction.shape == (300,)
    ids = data.ids("test")
    mse = F.mse_loss(prediction[ids], data.y[ids]).item()
    assert mse == pytest.approx(result.metrics["test_mse"], rel=1e-4)


def test_regression_rejects_integer_free_data_shape() -> None:
    data = _regression_data()
    bad = TrainingData(data.graph, data.features, data.y[:10], data.masks, 1)
    config = TrainConfig(ModelConfig("gcn"), epochs=1, task=NodeRegression(), **FAST)
    with pytest.raises(OperatorError, match="300 values"):
        FullGraphTrainer(config).fit(bad)


def test_a_users_loss_is_the_training_loss() -> None:
    calls: list[int] = []

    def smoothed(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        calls.append(int(y.numel()))
        return F.cross_entropy(logits, y, label_smoothing=0.1)

    data = load_dataset("planetoid:cora", normalize_features=True)
    task = NodeClassification(loss=smoothed)
    config = TrainConfig(ModelConfig("gcn"), epochs=3, task=task, **FAST)
    result = FullGraphTrainer(config).fit(data)
    assert calls[0] == 140  # training nodes, then train/val per epoch ...
    assert 140 in calls
    assert 500 in calls
    assert 1000 in calls
    assert result.epochs_run == 3


def test_link_prediction_full_and_sampled_reach_a_high_auc() -> None:
    data = TrainingData.from_dataset(load_dataset_sbm())
    task = LinkPrediction(out_channels=16)
    config = TrainConfig(
        ModelConfig("sage", hidden=32, dropout=0.0),
        epochs=100,
        weight_decay=0.0,
        monitor="val_accuracy",
        task=task,
        **FAST,
    )
    full = FullGraphTrainer(config).fit(data)
    sampling = SamplingConfig(fanouts=(5, 5), batch_size=256)
    sampled = SampledTrainer(config, sampling).fit(data)
    for result in (full, sampled):
        assert result.test_accuracy == result.metrics["test_auc"] > 0.85
        assert set(result.to_dict()) >= {"test_auc", "test_mrr", "test_hits@20"}


# ------------------------------------------------------------------ a user's model
class TwoHop(nn.Module):
    """A user's model: two GraphSAGE layers with a skip connection."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.conv1 = SAGEConv(in_channels, 16)
        self.conv2 = SAGEConv(16, out_channels)
        self.skip = nn.Linear(in_channels, out_channels)

    def forward(self, graph: object, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.conv1(graph, F.dropout(x, 0.5, self.training)))
        return self.conv2(graph, h) + self.skip(x)


@pytest.mark.parametrize("sampled", [False, True])
def test_any_module_with_forward_graph_x_trains(sampled: bool) -> None:
    data = community_dataset(600, 4, num_features=8, seed=0)
    config = TrainConfig(ModelConfig("twohop", module=TwoHop), epochs=100, **FAST)
    trainer = (
        SampledTrainer(config, SamplingConfig(fanouts=(5, 5), batch_size=64))
        if sampled
        else FullGraphTrainer(config)
    )
    result = trainer.fit(data)
    assert result.test_accuracy > 0.75
    assert isinstance(trainer.model, TwoHop)
    assert trainer.predict(data).shape == (600,)


def test_a_users_module_cannot_build_a_layer_stack() -> None:
    with pytest.raises(OperatorError, match="module"):
        ModelConfig("twohop", module=TwoHop).build(4, 2)


# ------------------------------------------------------------------ optimisers
def test_optimizers_schedules_and_first_layer_decay() -> None:
    model = TwoHop(4, 2)
    assert first_layer(model) is model.conv1
    sgd = make_optimizer(model, lr=0.1, weight_decay=0.1, optimizer=SGD(0.9, True))
    assert isinstance(sgd, torch.optim.SGD)
    assert sgd.param_groups[0]["nesterov"]
    adamw = make_optimizer(
        model, lr=0.1, weight_decay=0.1, optimizer=AdamW(), first_only=True
    )
    assert isinstance(adamw, torch.optim.AdamW)
    assert [g["weight_decay"] for g in adamw.param_groups] == [0.1, 0.0]
    assert StepDecay(10, 0.1).factor(25, 100) == pytest.approx(0.01)
    cosine = Cosine(min_factor=0.1, warmup=2)
    assert cosine.factor(0, 12) == pytest.approx(1 / 3)
    assert cosine.factor(2, 12) == 1.0
    assert cosine.factor(12, 12) == 0.1


def test_schedule_and_clipping_set_the_rates_and_norms() -> None:
    data = load_dataset("planetoid:cora", normalize_features=True)
    config = TrainConfig(
        ModelConfig("gcn"),
        epochs=4,
        schedule=StepDecay(step=2, gamma=0.5),
        clip_grad_norm=1e-3,
        optimizer=SGD(),
        weight_decay=0.0,
        **FAST,
    )
    rates: list[float] = []
    norms: list[float] = []

    class Spy(FullGraphTrainer):
        def train_epoch(self, model, optimizer, epoch):  # type: ignore[no-untyped-def]
            rates.append(optimizer.param_groups[0]["lr"])
            before = [p.detach().clone() for p in model.parameters()]
            stats = super().train_epoch(model, optimizer, epoch)
            step = torch.cat(
                [
                    (p.detach() - b).flatten()
                    for p, b in zip(model.parameters(), before, strict=True)
                ]
            )
            norms.append(step.norm().item() / optimizer.param_groups[0]["lr"])
            return stats

    Spy(config).fit(data)
    assert rates == [0.01, 0.01, 0.005, 0.005]
    # plain SGD without decay moves by lr * grad: lr times the clipped norm
    assert norms == pytest.approx([1e-3] * 4, rel=1e-3)


def test_tagged_unions_from_the_command_line() -> None:
    config = apply(
        TrainConfig(),
        {
            "task": "linkprediction",
            "task.val_fraction": "0.2",
            "optimizer": "adamw",
            "schedule": "cosine",
            "schedule.warmup": "3",
            "clip_grad_norm": "2.0",
        },
    )
    assert config.task == LinkPrediction(val_fraction=0.2)
    assert isinstance(config.optimizer, AdamW)
    assert config.schedule == Cosine(warmup=3)
    assert config.clip_grad_norm == 2.0
    with pytest.raises(OperatorError, match="val \\+ test"):
        LinkPrediction(val_fraction=0.5, test_fraction=0.5)


def test_trajectory_names_a_users_code() -> None:
    def my_loss(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(a, b)

    config = TrainConfig(
        ModelConfig("twohop", module=TwoHop), task=NodeRegression(loss=my_loss)
    )
    trajectory = config.trajectory()
    assert trajectory["model"]["module"].endswith(":TwoHop")
    assert "my_loss" in trajectory["task"]["loss"]
    assert trajectory["task"]["kind"] == "NodeRegression"


def test_graph_type_for_a_featureless_link_split() -> None:
    ring = np.arange(10)
    graph = CSRGraph.from_edges(ring, (ring + 1) % 10)  # directed: taken undirected
    split = split_edges(graph, val_fraction=0.0, test_fraction=0.3, seed=0)
    assert split.graph.num_edges == 2 * 7
    assert split.positives["val"].shape == (2, 0)
