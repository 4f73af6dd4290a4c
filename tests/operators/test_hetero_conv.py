"""HeteroConv / bipartite MessagePassing against PyG: outputs and gradients."""

import doctest
import importlib

import numpy as np
import pytest
import torch
import torch_geometric.nn as pyg_nn

from strata.operators.errors import OperatorError
from strata.operators.kernels import DeviceGraph
from strata.operators.layers import (
    GATConv,
    GCNConv,
    HeteroConv,
    HeteroSAGE,
    SAGEConv,
)
from strata.operators.layers.hetero import relation_graph
from strata.operators.samplers import TypedNeighborSampler, full_blocks
from strata.storage.hetero import Relation, RelationCSR, TypedGraph

TOL = {"rtol": 1e-5, "atol": 1e-5}
FEED = Relation("user", "engaged_feed", "item")
SEARCH = Relation("user", "engaged_search", "item")
CO = Relation("item", "co_engaged", "item")
DIMS = {"user": 5, "item": 7}


def random_typed_graph(seed: int = 0) -> TypedGraph:
    """The §4.1 shape in small: 30 users, 20 items, 5 relations, isolated nodes."""
    rng = np.random.default_rng(seed)

    def edges(n, num_src, num_dst):
        return rng.integers(0, num_src, n), rng.integers(0, num_dst - 2, n)

    g = TypedGraph.from_edges(
        {
            FEED: edges(90, 30, 20),
            SEARCH: edges(40, 30, 20),
            CO: (*edges(60, 20, 20), rng.uniform(0.1, 1.0, 60)),
        },
        {"user": 30, "item": 20},
    )
    return g.with_reverse(FEED, "rev_feed").with_reverse(SEARCH, "rev_search")


GRAPH = random_typed_graph()


def edge_index(csr: RelationCSR) -> torch.Tensor:
    return torch.stack(
        [torch.from_numpy(csr.indices), torch.from_numpy(csr.dst_index())]
    )


def pyg_twin(ours: HeteroConv, aggr: str = "sum", **sage) -> pyg_nn.HeteroConv:
    """PyG's HeteroConv of SAGEConvs with our weights copied in."""
    convs = {}
    for rel in ours.relations:
        conv = ours.conv(rel)
        twin = pyg_nn.SAGEConv(
            (conv.lin_l.in_features, conv.lin_r.in_features),
            conv.out_channels,
            aggr=conv.aggr,
            **sage,
        )
        with torch.no_grad():
            twin.lin_l.weight.copy_(conv.lin_l.weight)
            twin.lin_l.bias.copy_(conv.lin_l.bias)
            twin.lin_r.weight.copy_(conv.lin_r.weight)
        convs[tuple(rel)] = twin
    return pyg_nn.HeteroConv(convs, aggr=aggr)


def features(num: dict, seed: int = 1, grad: bool = False) -> dict:
    gen = torch.Generator().manual_seed(seed)
    return {
        t: torch.randn(n, DIMS[t], generator=gen).requires_grad_(grad)
        for t, n in num.items()
    }


def clone(x: dict) -> dict:
    return {t: v.detach().clone().requires_grad_(True) for t, v in x.items()}


@pytest.mark.parametrize(
    ("sage_aggr", "combine"), [("mean", "sum"), ("sum", "mean"), ("max", "max")]
)
def test_full_graph_equals_pyg_with_gradients(sage_aggr, combine):
    torch.manual_seed(0)
    ours = HeteroSAGE(DIMS, 8, GRAPH.relations, aggr=sage_aggr, combine=combine)
    theirs = pyg_twin(ours, aggr=combine)
    x = features(dict(GRAPH.num_nodes))
    x_ours, x_theirs = clone(x), clone(x)
    out = ours.forward_full(GRAPH, x_ours)
    ref = theirs(
        x_theirs, {tuple(r): edge_index(c) for r, c in GRAPH.relations.items()}
    )
    assert sorted(out) == sorted(ref) == ["item", "user"]
    upstream = {t: torch.randn_like(v) for t, v in ref.items()}
    for t in out:
        torch.testing.assert_close(out[t], ref[t], **TOL)
    sum((out[t] * upstream[t]).sum() for t in out).backward()
    sum((ref[t] * upstream[t]).sum() for t in ref).backward()
    for t in x:
        torch.testing.assert_close(x_ours[t].grad, x_theirs[t].grad, **TOL)
    for rel in ours.relations:
        mine, twin = ours.conv(rel), theirs.convs[tuple(rel)]
        for a, b in ((mine.lin_l, twin.lin_l), (mine.lin_r, twin.lin_r)):
            torch.testing.assert_close(a.weight.grad, b.weight.grad, **TOL)
        torch.testing.assert_close(mine.lin_l.bias.grad, twin.lin_l.bias.grad, **TOL)


def test_two_layers_on_sampled_blocks_equal_pyg():
    torch.manual_seed(1)
    layers = [
        HeteroSAGE(DIMS, 6, GRAPH.relations),
        HeteroSAGE({"user": 6, "item": 6}, 4, GRAPH.relations),
    ]
    twins = [pyg_twin(layer) for layer in layers]
    seeds = {"user": np.array([1, 4, 7]), "item": np.array([0, 19])}
    blocks = TypedNeighborSampler(GRAPH, [3, 2], seed=5).sample(seeds, 0, 3)
    x_all = features(dict(GRAPH.num_nodes))
    x = {
        t: x_all[t][torch.from_numpy(ids)]
        for t, ids in blocks[0].src_global_ids.items()
    }
    h_ours, h_theirs = clone(x), clone(x)
    inputs_ours, inputs_theirs = h_ours, h_theirs
    for i, (block, layer, twin) in enumerate(zip(blocks, layers, twins, strict=True)):
        h_ours = layer(block, h_ours)
        ei = {tuple(r): edge_index(c) for r, c in block.relations.items()}
        # PyG outputs every row of x[dst]; the block's destinations come first
        h_theirs = {t: v[: block.num_dst[t]] for t, v in twin(h_theirs, ei).items()}
        if i == 0:
            h_ours = {t: torch.relu(v) for t, v in h_ours.items()}
            h_theirs = {t: torch.relu(v) for t, v in h_theirs.items()}
    for t, ids in seeds.items():
        assert h_ours[t].shape == (len(ids), 4)
        torch.testing.assert_close(h_ours[t], h_theirs[t], **TOL)
    loss_ours = sum(v.square().sum() for v in h_ours.values())
    loss_theirs = sum(v.square().sum() for v in h_theirs.values())
    loss_ours.backward()
    loss_theirs.backward()
    for t in x:
        assert inputs_ours[t].grad.abs().sum() > 0  # gradients reach the inputs
        torch.testing.assert_close(inputs_ours[t].grad, inputs_theirs[t].grad, **TOL)
    for layer in layers:
        assert all(p.grad is not None for p in layer.parameters())


def test_layerwise_full_inference_equals_full_blocks():
    torch.manual_seed(2)
    layers = [
        HeteroSAGE(DIMS, 6, GRAPH.relations),
        HeteroSAGE({"user": 6, "item": 6}, 3, GRAPH.relations),
    ]
    x = features(dict(GRAPH.num_nodes))
    with torch.no_grad():
        h = x
        for layer in layers:
            h = layer.forward_full(GRAPH, h)
        seeds = {"user": np.array([0, 29, 12]), "item": np.array([18, 3])}
        blocks = full_blocks(GRAPH, seeds, 2)
        hb = {t: x[t][torch.from_numpy(i)] for t, i in blocks[0].src_global_ids.items()}
        for block, layer in zip(blocks, layers, strict=True):
            hb = layer(block, hb)
    for t, ids in seeds.items():
        torch.testing.assert_close(hb[t], h[t][torch.from_numpy(ids)], **TOL)


@pytest.mark.parametrize(
    ("aggr", "project", "root_weight"),
    [
        ("mean", False, True),
        ("sum", False, True),
        ("max", True, True),
        ("mean", False, False),
    ],
)
def test_bipartite_pair_equals_pyg_sageconv(aggr, project, root_weight):
    """One relation with distinct source and destination sets of other widths."""
    rng = np.random.default_rng(4)
    csr = RelationCSR.from_edges(
        rng.integers(0, 12, 50), rng.integers(0, 7, 50), num_src=12, num_dst=9
    )
    ours = SAGEConv((5, 3), 4, aggr=aggr, project=project, root_weight=root_weight)
    theirs = pyg_nn.SAGEConv(
        (5, 3), 4, aggr=aggr, project=project, root_weight=root_weight
    )
    theirs.load_state_dict(ours.state_dict())
    x_src = torch.randn(12, 5, requires_grad=True)
    x_dst = torch.randn(9, 3, requires_grad=True)
    src2, dst2 = (
        x_src.detach().clone().requires_grad_(),
        x_dst.detach().clone().requires_grad_(),
    )
    out = ours(relation_graph(csr, 12, x_src.device), (x_src, x_dst))
    ref = theirs((src2, dst2), edge_index(csr))
    torch.testing.assert_close(out, ref, **TOL)
    out.sum().backward()
    ref.sum().backward()
    torch.testing.assert_close(x_src.grad, src2.grad, **TOL)
    if root_weight:
        torch.testing.assert_close(x_dst.grad, dst2.grad, **TOL)


def test_pair_and_single_tensor_agree_on_a_homogeneous_block():
    """(x, x[:num_dst]) is what a single tensor means on a block."""
    from strata.operators.samplers import Block

    block = Block(
        indptr=np.array([0, 2, 3]),
        indices=np.array([1, 2, 0]),
        src_global_ids=np.array([7, 3, 9]),
        num_dst=2,
    )
    conv = SAGEConv(4, 2)
    x = torch.randn(3, 4)
    torch.testing.assert_close(conv(block, x), conv(block, (x, x[:2])))


def test_bad_inputs_get_clear_errors():
    dg = DeviceGraph(
        torch.tensor([0, 1, 2]), torch.tensor([0, 3]), 4, 2, bipartite=True
    )
    conv = SAGEConv((3, 5), 2)
    with pytest.raises(OperatorError, match=r"x_dst .*\[2, features\]"):
        conv(dg, (torch.randn(4, 3), torch.randn(3, 5)))
    with pytest.raises(OperatorError, match="4 rows"):
        conv(dg, (torch.randn(5, 3), torch.randn(2, 5)))
    with pytest.raises(OperatorError, match="self-loop"):
        GCNConv(3, 2)(dg, (torch.randn(4, 3), torch.randn(2, 3)))
    with pytest.raises(OperatorError, match="pair"):
        GATConv(3, 2)(dg, (torch.randn(4, 3), torch.randn(2, 3)))
    with pytest.raises(OperatorError, match="attention"):
        HeteroConv({FEED: GATConv(3, 2)})
    with pytest.raises(OperatorError, match="aggr"):
        HeteroConv({FEED: SAGEConv(3, 2)}, aggr="cat")
    layer = HeteroSAGE(DIMS, 2, GRAPH.relations)
    with pytest.raises(OperatorError, match=r"x\['user'\]"):
        layer.forward_full(GRAPH, {"item": torch.randn(20, 7)})
    other = TypedGraph.from_edges(
        {FEED: (np.array([0]), np.array([0]))}, {"user": 30, "item": 20}
    )
    with pytest.raises(OperatorError, match="relation item-co_engaged->item"):
        layer.forward_full(other, features(dict(GRAPH.num_nodes)))
    with pytest.raises(OperatorError, match="in_dims"):
        HeteroSAGE({"user": 3}, 2, [FEED])


def test_doctests():
    module = importlib.import_module("strata.operators.layers.hetero")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0


def test_any_declared_layer_runs_per_relation_with_edge_weights():
    """A user layer (weighted sum, no root) per relation, against brute force."""
    from strata.operators.layers import MessagePassing
    from strata.operators.layers.message_passing import WeightedSum

    class WeightedLinear(MessagePassing):
        aggregation = WeightedSum()

        def __init__(self, d_in: int, d_out: int) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(d_in, d_out)

        def transform(self):
            return self.lin.weight, self.lin.bias

    layer = HeteroConv({CO: WeightedLinear(7, 3), FEED: WeightedLinear(5, 3)})
    x = features(dict(GRAPH.num_nodes))
    out = layer.forward_full(GRAPH, x)
    expected = torch.zeros(20, 3, dtype=torch.float64)
    for rel in (CO, FEED):
        csr, lin = GRAPH.relations[rel], layer.conv(rel).lin
        w = np.ones(csr.num_edges) if csr.weights is None else csr.weights
        agg = np.zeros((20, DIMS[rel.src]))
        np.add.at(agg, csr.dst_index(), w[:, None] * x[rel.src].numpy()[csr.indices])
        expected += torch.from_numpy(agg) @ lin.weight.double().T + lin.bias.double()
    assert list(out) == ["item"]
    torch.testing.assert_close(out["item"], expected.float(), **TOL)


def test_graph_and_blocks_pickle_after_use_on_a_device():
    """Cached device graphs (locks, tensors) stay behind; results are the same."""
    import pickle

    layer = HeteroSAGE(DIMS, 4, GRAPH.relations)
    x = features(dict(GRAPH.num_nodes))
    blocks = TypedNeighborSampler(GRAPH, [2], seed=0).sample({"user": [3]}, 0, 0)
    xb = {t: x[t][torch.from_numpy(i)] for t, i in blocks[0].src_global_ids.items()}
    with torch.no_grad():
        full, sampled = layer.forward_full(GRAPH, x), layer(blocks[0], xb)
        graph_back = pickle.loads(pickle.dumps(GRAPH))
        block_back = pickle.loads(pickle.dumps(blocks))[0]
        for t, v in layer.forward_full(graph_back, x).items():
            torch.testing.assert_close(v, full[t], rtol=0, atol=0)
        for t, v in layer(block_back, xb).items():
            torch.testing.assert_close(v, sampled[t], rtol=0, atol=0)


def test_a_type_without_destinations_gets_zero_rows():
    layer = HeteroSAGE(DIMS, 4, GRAPH.relations)
    blocks = TypedNeighborSampler(GRAPH, [3], seed=0).sample({"user": [1, 2]}, 0, 0)
    x = features({t: blocks[0].num_src(t) for t in DIMS}, grad=True)
    out = layer(blocks[0], x)
    assert out["item"].shape == (0, 4)
    assert out["user"].shape == (2, 4)
    sum(v.sum() for v in out.values()).backward()
    assert x["item"].grad.abs().sum() > 0  # items reached the users


@pytest.mark.parametrize("backend", ["numba", "torch"])
@pytest.mark.parametrize("aggr", ["mean", "sum", "max"])
def test_empty_destinations_and_sources_on_every_kernel(backend, aggr):
    """A relation into (or out of) a type with no rows: zeros, no errors."""
    from strata.operators.kernels import Backend, use_backend

    conv = SAGEConv((3, 5), 2, aggr=aggr)
    empty_dst = DeviceGraph(
        torch.zeros(1, dtype=torch.int64),
        torch.zeros(0, dtype=torch.int64),
        4,
        0,
        bipartite=True,
    )
    empty_src = DeviceGraph(
        torch.zeros(3, dtype=torch.int64),
        torch.zeros(0, dtype=torch.int64),
        0,
        2,
        bipartite=True,
    )
    with use_backend(Backend(backend)):
        x_src, x_dst = torch.randn(4, 3, requires_grad=True), torch.randn(0, 5)
        out = conv(empty_dst, (x_src, x_dst))
        assert out.shape == (0, 2)
        out.sum().backward()
        assert torch.equal(x_src.grad, torch.zeros(4, 3))
        x_dst = torch.randn(2, 5)
        out = conv(empty_src, (torch.randn(0, 3, requires_grad=True), x_dst))
        # no in-edges: the aggregate is 0, so W_l 0 + b + W_r x_dst (as PyG)
        expected = conv.lin_l.bias + conv.lin_r(x_dst)
        torch.testing.assert_close(out, expected, **TOL)
        out.sum().backward()
