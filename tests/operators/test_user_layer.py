"""A layer written outside the package gets every execution from its definition.

``GatedSum`` below is a user's layer: nothing in ``strata`` knows it. Declared once
(``message``, ``aggregation``, ``transform``, ``root``), it

* trains full-graph (and its forward equals a dense brute-force formula);
* trains on a 2-worker gang, exact and HongTu, equal to single-device training
  (10 epochs: every loss and weight within 1e-5; float32 sums of up to 168
  gated messages per node drift further over longer runs, 6e-5 at 20 epochs);
* streams: its incremental outputs equal a full recompute after every flush, and
  it crosses the wire as plain data (import path, arguments, parameters).
"""

from __future__ import annotations

import functools

import distributed_workers as dw
import numpy as np
import pytest
import torch
from torch import nn

from strata.operators.layers import LayerStack, MessagePassing
from strata.operators.layers.message_passing import Sum
from strata.operators.streaming.cascade import StreamingGNN
from strata.operators.streaming.generate import UpdateStream
from strata.operators.streaming.model import StreamingModel
from strata.operators.trainers import FullGraphTrainer, ModelConfig, TrainConfig
from strata.operators.trainers.data import TrainingData
from strata.operators.trainers.distributed import DistributedConfig, DistributedTrainer
from strata.storage import CSRGraph, load_planetoid
from tests.operators.streaming_helpers import (
    IN_DIM,
    Oracle,
    features,
    one_torch_thread,  # noqa: F401 (fixture)
    rmat_graph,
)


class GatedSum(MessagePassing):
    """``out_i = W . sum_j sigmoid(g . x_j) x_j + b + R x_i``: a gated sum."""

    aggregation = Sum()

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.gate = nn.Linear(in_channels, 1)
        self.lin = nn.Linear(in_channels, out_channels)
        self.lin_root = nn.Linear(in_channels, out_channels, bias=False)

    def message(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.gate(x)) * x

    def transform(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.lin.weight, self.lin.bias

    def root(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin_root(x)

    def reset_parameters(self) -> None:
        for lin in (self.gate, self.lin, self.lin_root):
            lin.reset_parameters()


def brute_force(layer: GatedSum, graph: CSRGraph, x: torch.Tensor) -> torch.Tensor:
    """The layer's formula with a dense adjacency matrix."""
    src, dst = graph.to_coo()
    adj = torch.zeros(graph.num_nodes, graph.num_nodes, dtype=x.dtype)
    adj.index_put_(
        (torch.from_numpy(dst), torch.from_numpy(src)),
        torch.ones(src.shape[0], dtype=x.dtype),
        accumulate=True,
    )
    gated = torch.sigmoid(x @ layer.gate.weight.T + layer.gate.bias) * x
    out = (adj @ gated) @ layer.lin.weight.T + layer.lin.bias
    return out + x @ layer.lin_root.weight.T


def test_forward_equals_the_formula_in_either_order() -> None:
    torch.manual_seed(0)
    graph = rmat_graph(scale=6, edge_factor=4)
    x = torch.randn(graph.num_nodes, 12, dtype=torch.float64)
    for width in (3, 40):  # transform first (narrowing) and aggregate first
        layer = GatedSum(12, width).double()
        torch.testing.assert_close(layer(graph, x), brute_force(layer, graph, x))


@functools.cache
def cora() -> TrainingData:
    return TrainingData.from_dataset(load_planetoid("cora"))


def config(dropout: float = 0.0, epochs: int = 10) -> TrainConfig:
    return TrainConfig(
        ModelConfig("gated-sum", hidden=16, dropout=dropout, layer=GatedSum),
        epochs=epochs,
        patience=0,
        restore_best=False,
        device="cpu",
        threads=1,
        seed=7,
    )


def test_trains_full_graph_on_cora() -> None:
    trainer = FullGraphTrainer(config(dropout=0.5, epochs=100))
    result = trainer.fit(cora())
    assert result.test_accuracy > 0.6  # chance is 1/7; GCN reaches 0.81


@pytest.mark.multiprocess
def test_a_two_worker_gang_equals_single_device_exact_and_hongtu() -> None:
    oracle = FullGraphTrainer(config())
    losses: list[float] = []
    oracle.fit(cora(), on_epoch=lambda r: losses.append(r.loss))
    state = oracle.trained_state
    assert state is not None
    modes = [
        DistributedConfig(workers=2, timeout_s=600),
        DistributedConfig(workers=2, mode="hongtu", chunks=3, timeout_s=600),
    ]
    trainers = [DistributedTrainer(config(), mode) for mode in modes]
    for run in dw.fit_on_one_gang(cora(), trainers):
        got = [r.loss for r in run.history]
        assert max(abs(a - b) for a, b in zip(got, losses, strict=True)) <= 1e-5
        for name, value in state.items():
            assert float((run.state[name] - value).abs().max()) <= 1e-5, name


@pytest.mark.usefixtures("one_torch_thread")
def test_streaming_updates_equal_a_full_recompute_after_every_flush() -> None:
    graph = rmat_graph(scale=8, edge_factor=4)
    x = features(graph.num_nodes)
    live = np.ones(graph.num_nodes, bool)
    live[::17] = False
    torch.manual_seed(1)
    model = LayerStack(IN_DIM, 12, 5, num_layers=2, layer=GatedSum)
    streaming = StreamingModel.from_module(model)
    wired = StreamingModel.from_arrays(streaming.to_arrays())  # plain data
    gnn = StreamingGNN(wired, dtype=np.float64)
    gnn.initialize(graph, x, live)
    oracle = Oracle(graph, x, live)
    stream = UpdateStream(graph, feature_dim=IN_DIM, mix=(0.7, 0.2, 0.1), new_nodes=0.3)
    for batch in stream.batches(num_updates=1000, batch_size=100):
        gnn.apply_updates(batch)
        oracle.apply(batch)
        nodes, expected = oracle.embeddings(model)
        got = gnn.embeddings(nodes)
        np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)
