"""Incremental SAGE embeddings equal PyG's recompute after every batch (issue 15).

The oracle is PyG itself: ``torch_geometric.nn.SAGEConv`` layers carrying the
weights of Strata's model, run over ``edge_index`` built from an independent edge
multiset (a ``Counter``) that the test maintains from the same update batches.
Also: the serial kernels the small flushes use equal their reference formulas.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
from torch import nn

from strata.operators.layers import GraphSAGE, SAGEConv
from strata.operators.layers.message_passing import MessagePassing, Sum
from strata.operators.streaming import _kernels
from strata.operators.streaming.cascade import StreamingGNN
from strata.operators.streaming.generate import UpdateStream
from strata.operators.streaming.model import StreamingModel
from strata.operators.streaming.rules import LayerRule, linear_rows
from strata.storage import UpdateKind, decode_updates
from tests.operators.streaming_helpers import (
    IN_DIM,
    features,
    one_torch_thread,  # noqa: F401 (fixture)
    rmat_graph,
)

pyg = pytest.importorskip("torch_geometric.nn")

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def pyg_copy(model: GraphSAGE) -> nn.ModuleList:
    """PyG SAGEConv layers with the weights of Strata's model."""
    convs = nn.ModuleList()
    for conv in model.convs:  # type: ignore[union-attr]
        layer = pyg.SAGEConv(conv.in_channels, conv.out_channels, aggr="mean")
        layer.lin_l.load_state_dict(conv.lin_l.state_dict())
        layer.lin_r.load_state_dict(conv.lin_r.state_dict())
        convs.append(layer)
    return convs.eval()


def pyg_forward(convs: nn.ModuleList, x: np.ndarray, edges: Counter) -> np.ndarray:
    pairs = [pair for pair, copies in edges.items() for _ in range(copies)]
    edge_index = torch.tensor(pairs, dtype=torch.int64).reshape(-1, 2).t()
    h = torch.from_numpy(x)
    with torch.no_grad():
        for i, conv in enumerate(convs):
            h = conv(h, edge_index)
            if i < len(convs) - 1:
                h = h.relu()
    return h.numpy()


@pytest.mark.parametrize(("dtype", "tol"), [(np.float64, 1e-9), (np.float32, 1e-5)])
def test_incremental_equals_pyg_recompute_after_every_batch(dtype, tol) -> None:
    """30 batches of 40 updates (70% add, 20% delete, 10% features)."""
    graph = rmat_graph(scale=8, edge_factor=8)
    torch.manual_seed(0)
    model = GraphSAGE(IN_DIM, 12, 5, num_layers=2).eval()
    x = features(graph.num_nodes).astype(dtype)
    convs = pyg_copy(model).to(torch.float64 if dtype == np.float64 else torch.float32)
    gnn = StreamingGNN(StreamingModel.from_module(model), dtype=dtype)
    gnn.initialize(graph, x)
    src, dst = graph.to_coo()
    edges = Counter(zip(src.tolist(), dst.tolist(), strict=True))
    stream = UpdateStream(graph, feature_dim=IN_DIM, mix=(0.7, 0.2, 0.1), seed=3)
    worst = 0.0
    for batch in stream.batches(num_updates=1200, batch_size=40):
        gnn.apply_updates(batch)
        u = decode_updates(batch)
        for i in range(len(u)):
            pair = (int(u.src[i]), int(u.dst[i]))
            if u.kind[i] == UpdateKind.ADD_EDGE:
                edges[pair] += 1
            elif u.kind[i] == UpdateKind.REMOVE_EDGE and edges[pair] > 0:
                edges[pair] -= 1
            elif u.kind[i] == UpdateKind.SET_FEATURE:
                x[u.node[i]] = u.feature[i]
        expected = pyg_forward(convs, x, +edges)
        got = gnn.embeddings(np.arange(graph.num_nodes))
        err = float(np.abs(got - expected).max())
        assert err <= tol * (1 + float(np.abs(expected).max())), err
        worst = max(worst, err)
    assert worst > 0 or dtype == np.float64  # float32 paths really differ a little


def test_serial_and_parallel_scatters_agree_bit_for_bit() -> None:
    rng = np.random.default_rng(0)
    target = rng.normal(size=(50, 4))
    dst = rng.integers(0, 50, 500)
    rows = rng.integers(0, 7, 500)
    source = rng.normal(size=(7, 4))
    serial, parallel = target.copy(), target.copy()
    _kernels._scatter_add_serial(serial, dst, source, rows, 1)
    _kernels._scatter_add(parallel, dst, source, rows, 2)
    np.testing.assert_array_equal(serial, parallel)
    expected = target.copy()
    np.add.at(expected, dst, source[rows])
    np.testing.assert_allclose(serial, expected, rtol=1e-12)


@pytest.mark.parametrize("rows", [3, _kernels.SMALL_ROWS + 1])
def test_linear_rows_is_a_matmul(rows: int) -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(rows, 6)).astype(np.float32)
    w_t = rng.normal(size=(6, 5))
    np.testing.assert_allclose(linear_rows(x, w_t), x.astype(np.float64) @ w_t)


class _GatedRoot(MessagePassing):
    """A layer whose root is not affine (``relu``): the rule must call it."""

    aggregation = Sum()

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.in_channels = d_in
        self.lin = nn.Linear(d_in, d_out)
        self.lin_root = nn.Linear(d_in, d_out)

    def message(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def transform(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.lin.weight, self.lin.bias

    def root(self, x: torch.Tensor) -> torch.Tensor | None:
        return torch.relu(self.lin_root(x))


def test_root_fast_path_only_for_affine_roots() -> None:
    torch.manual_seed(0)
    f = np.random.default_rng(2).normal(size=(9, 4))
    sage = LayerRule.from_module(SAGEConv(4, 3))
    assert sage._root_map is not None
    with torch.no_grad():
        direct = sage.layer.root(torch.from_numpy(f))
    assert direct is not None
    np.testing.assert_allclose(sage.root(f), direct.numpy(), rtol=1e-12, atol=1e-14)
    gated = LayerRule.from_module(_GatedRoot(4, 3))
    assert gated._root_map is None
    with torch.no_grad():
        direct = gated.layer.root(torch.from_numpy(f))
    assert direct is not None
    np.testing.assert_array_equal(gated.root(f), direct.numpy())
