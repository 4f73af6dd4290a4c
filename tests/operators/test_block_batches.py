"""Fused first-layer batches: the kernel against numpy, training against plain."""

import copy
from functools import partial

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from strata.operators.errors import OperatorError
from strata.operators.kernels.gather_aggregate import gather_aggregate
from strata.operators.layers import GAT, GCN, GIN, GraphSAGE, LayerStack, SAGEConv
from strata.operators.samplers import NeighborSampler, SamplerConfig
from strata.operators.trainers.block_batches import BlockBatches, fusable_first_layer
from strata.storage import CSRGraph, InMemoryFeatureStore, Key
from strata.storage.generators import rmat

KEY = Key("node", "x")


def _graph() -> CSRGraph:
    return rmat(9, 8, seed=3, symmetrize=True)


def _brute(table, indptr, indices, src_ids, mean):
    agg = np.zeros((indptr.size - 1, table.shape[1]), dtype=np.float64)
    for i in range(indptr.size - 1):
        rows = table[src_ids[indices[indptr[i] : indptr[i + 1]]]].astype(np.float64)
        if rows.shape[0]:
            agg[i] = rows.mean(0) if mean else rows.sum(0)
    return agg, table[src_ids[: indptr.size - 1]]


@pytest.mark.parametrize("mean", [True, False])
def test_gather_aggregate_matches_numpy(mean):
    graph = _graph()
    rng = np.random.default_rng(0)
    table = rng.standard_normal((graph.num_nodes, 7), dtype=np.float32)
    seeds = rng.choice(graph.num_nodes, 40, replace=False)
    block = NeighborSampler(graph, SamplerConfig((4, 3)), seed=1).sample(seeds)[0]
    sources = block.src_global_ids[block.indices]
    agg, root = gather_aggregate(
        table, block.indptr, sources, block.dst_global_ids, mean=mean
    )
    want_agg, want_root = _brute(
        table, block.indptr, block.indices, block.src_global_ids, mean
    )
    assert (np.diff(block.indptr) == 0).any()  # rows without edges are zeros
    np.testing.assert_allclose(agg, want_agg, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(root, want_root)
    no_root = gather_aggregate(
        table, block.indptr, sources, block.dst_global_ids, mean=mean, with_root=False
    )
    assert no_root[1].shape == (0, 7)
    np.testing.assert_array_equal(no_root[0], agg)


def test_gather_aggregate_rejects_other_dtypes():
    with pytest.raises(OperatorError, match="float32"):
        gather_aggregate(
            np.zeros((3, 2)), np.zeros(1, np.int64), np.zeros(0, np.int64),
            np.zeros(0, np.int64), mean=True,
        )  # fmt: skip


def test_fusable_first_layer():
    assert fusable_first_layer(GraphSAGE(4, 8, 2)) is not None
    assert fusable_first_layer(GraphSAGE(4, 8, 2, aggr="sum")) is not None
    assert fusable_first_layer(GIN(4, 8, 2)) is not None
    assert fusable_first_layer(GraphSAGE(4, 8, 2, dropout=0.5)) is None
    assert fusable_first_layer(GraphSAGE(4, 8, 2, aggr="max")) is None
    assert fusable_first_layer(GraphSAGE(4, 8, 2, aggr="max", project=True)) is None
    assert fusable_first_layer(GCN(4, 8, 2)) is None  # per-edge coefficients
    assert fusable_first_layer(GAT(4, 8, 2)) is None
    assert fusable_first_layer(torch.nn.Linear(4, 2)) is None


def _train(model, batches, graph, y, steps, fused):
    """Adam steps on the same batches; the plain path runs model(blocks, x)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    order = np.random.default_rng(5).permutation(graph.num_nodes)
    losses = []
    for step in range(steps):
        seeds = order[step * 64 : (step + 1) * 64]
        batch = batches.prepare(seeds, epoch=0, index=step)
        assert batch.fused is fused
        optimizer.zero_grad()
        out = batches.forward(model, batch)
        loss = F.cross_entropy(out, y[torch.from_numpy(seeds)])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize(
    "make",
    [
        lambda: GraphSAGE(12, 16, 5),
        lambda: GraphSAGE(12, 16, 5, num_layers=3, aggr="sum"),
        lambda: LayerStack(12, 16, 5, layer=partial(SAGEConv, normalize=True)),
        lambda: GIN(12, 16, 5),
    ],
    ids=["sage-mean", "sage-sum-3", "sage-normalize", "gin"],
)
def test_fused_training_equals_plain(make):
    graph = _graph()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((graph.num_nodes, 12), dtype=np.float32)
    y = torch.from_numpy(rng.integers(0, 5, graph.num_nodes))
    torch.manual_seed(0)
    model = make()
    fanouts = (5,) * (model.num_layers - 1) + (3,)
    sampler = NeighborSampler(graph, SamplerConfig(fanouts), seed=2)
    fused = BlockBatches(sampler, InMemoryFeatureStore({KEY: x}), model)
    assert fused.fused
    twin = copy.deepcopy(model)
    # A table in another dtype is not fused: the plain gather + model(blocks, x).
    plain = BlockBatches(sampler, torch.from_numpy(x).double(), twin)
    assert not plain.fused
    got = _train(model, fused, graph, y, 8, fused=True)
    want = _train(twin, plain, graph, y, 8, fused=False)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    for p, q in zip(model.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-5)


def test_unfused_models_train_through_the_plain_path():
    graph = _graph()
    x = torch.randn(graph.num_nodes, 6)
    sampler = NeighborSampler(graph, SamplerConfig((4, 4)), seed=0)
    for model in (GCN(6, 8, 3), GraphSAGE(6, 8, 3, dropout=0.5)):
        batches = BlockBatches(sampler, InMemoryFeatureStore({KEY: x}), model)
        batch = batches.prepare(np.arange(10), 0, 0)
        assert not batches.fused
        assert batch.x is not None
        assert batches.forward(model, batch).shape == (10, 3)
