"""Our layers against PyG's: same parameters in, same outputs and gradients out."""

import numpy as np
import pytest
import torch
import torch_geometric.nn as pyg_nn

from strata.operators.errors import OperatorError
from strata.operators.kernels import as_device_graph
from strata.operators.kernels.reuse import reuse_constant_aggregates
from strata.operators.layers import (
    GAT,
    GCN,
    GATConv,
    GCNConv,
    GINConv,
    GraphSAGE,
    SAGEConv,
)
from strata.operators.layers.message_passing import Aggregation
from strata.operators.samplers import NeighborSampler, SamplerConfig

TOL = {"rtol": 1e-5, "atol": 1e-5}


def edge_index_of(graph):
    """PyG's edge_index (row 0 sources, row 1 destinations), in CSR order."""
    src, dst = graph.to_coo()
    return torch.stack([torch.from_numpy(src), torch.from_numpy(dst.astype(np.int64))])


def _compare(ours, theirs, run_ours, run_theirs, x):
    """Copy PyG's parameters into ours; compare outputs and every gradient."""
    ours.load_state_dict(theirs.state_dict())
    x_ours = x.clone().requires_grad_(True)
    x_theirs = x.clone().requires_grad_(True)
    out_ours = run_ours(x_ours)
    out_theirs = run_theirs(x_theirs)
    torch.testing.assert_close(out_ours, out_theirs, **TOL)
    grad = torch.randn_like(out_theirs)
    out_ours.backward(grad)
    out_theirs.backward(grad)
    torch.testing.assert_close(x_ours.grad, x_theirs.grad, **TOL)
    theirs_params = dict(theirs.named_parameters())
    for name, param in ours.named_parameters():
        torch.testing.assert_close(
            param.grad,
            theirs_params[name].grad,
            **TOL,
            msg=lambda m, n=name: f"{n}: {m}",
        )


def _full(graph, ours, theirs, x, **theirs_kwargs):
    edge_index = edge_index_of(graph)
    _compare(
        ours,
        theirs,
        lambda xx: ours(graph, xx),
        lambda xx: theirs(xx, edge_index, **theirs_kwargs),
        x,
    )


def _block(graph, fanouts=(4,), seed_count=12):
    sampler = NeighborSampler(graph, SamplerConfig(fanouts=fanouts), seed=1)
    seeds = np.random.default_rng(0).permutation(graph.num_nodes)[:seed_count]
    (block,) = sampler.sample(seeds, epoch=0, batch_index=0)
    dst = np.repeat(np.arange(block.num_dst), np.diff(block.indptr))
    edge_index = torch.stack([torch.from_numpy(block.indices), torch.from_numpy(dst)])
    return block, edge_index


def _bipartite(block, edge_index, ours, theirs, x):
    size = (block.num_src, block.num_dst)
    _compare(
        ours,
        theirs,
        lambda xx: ours(block, xx),
        lambda xx: theirs((xx, xx[: block.num_dst]), edge_index, size=size),
        x,
    )


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("improved", [False, True])
def test_gcn_matches_pyg(backend, weighted, improved, make_graph):
    # Unweighted + improved: PyG's edge_index path drops the loop weight 2 unless
    # weights are given, and then keeps existing loops at their weight; on a
    # loop-free graph with unit weights it agrees with A + 2I, which we implement.
    graph = make_graph(weighted=weighted, seed=3, loops=weighted or not improved)
    torch.manual_seed(0)
    theirs = pyg_nn.GCNConv(16, 8, improved=improved)
    ours = GCNConv(16, 8, improved=improved)
    if weighted:
        ew = torch.from_numpy(graph.edge_weight)
    else:
        ew = torch.ones(graph.num_edges) if improved else None
    x = torch.randn(graph.num_nodes, 16)
    _full(graph, ours, theirs, x, edge_weight=ew)


@pytest.mark.parametrize(("in_ch", "out_ch"), [(16, 4), (4, 16), (8, 8)])
def test_gcn_both_orders_match_pyg(backend, in_ch, out_ch, make_graph):
    # The widths steer aggregate-first vs transform-first; both must agree.
    graph = make_graph(seed=4)
    torch.manual_seed(1)
    theirs = pyg_nn.GCNConv(in_ch, out_ch)
    _full(graph, GCNConv(in_ch, out_ch), theirs, torch.randn(graph.num_nodes, in_ch))


def test_gcn_without_normalisation_matches_pyg(backend, make_graph):
    graph = make_graph(weighted=True, seed=5)
    theirs = pyg_nn.GCNConv(6, 5, normalize=False)
    ew = torch.from_numpy(graph.edge_weight)
    x = torch.randn(graph.num_nodes, 6)
    _full(graph, GCNConv(6, 5, normalize=False), theirs, x, edge_weight=ew)


@pytest.mark.parametrize(
    ("aggr", "project", "normalize", "root_weight"),
    [
        ("mean", False, False, True),
        ("mean", False, True, False),
        ("sum", False, False, True),
        ("max", False, False, True),
        ("max", True, False, True),  # the max-pool aggregator
    ],
)
def test_sage_matches_pyg(backend, aggr, project, normalize, root_weight, make_graph):
    graph = make_graph(seed=6)
    torch.manual_seed(2)
    kwargs = {
        "aggr": aggr,
        "project": project,
        "normalize": normalize,
        "root_weight": root_weight,
    }
    theirs = pyg_nn.SAGEConv(12, 7, **kwargs)
    _full(graph, SAGEConv(12, 7, **kwargs), theirs, torch.randn(graph.num_nodes, 12))


@pytest.mark.parametrize(("in_ch", "out_ch"), [(32, 4), (4, 32)])
def test_sage_both_orders_match_pyg(backend, in_ch, out_ch, make_graph):
    graph = make_graph(seed=7)
    theirs = pyg_nn.SAGEConv(in_ch, out_ch)
    x = torch.randn(graph.num_nodes, in_ch)
    _full(graph, SAGEConv(in_ch, out_ch), theirs, x)


@pytest.mark.parametrize(
    ("heads", "concat", "residual"),
    [(1, True, False), (3, True, True), (4, False, False)],
)
def test_gat_matches_pyg(backend, heads, concat, residual, make_graph):
    graph = make_graph(seed=8)
    torch.manual_seed(3)
    kwargs = {"heads": heads, "concat": concat, "residual": residual}
    theirs = pyg_nn.GATConv(10, 6, **kwargs)
    _full(graph, GATConv(10, 6, **kwargs), theirs, torch.randn(graph.num_nodes, 10))


def test_gat_without_self_loops_matches_pyg(backend, make_graph):
    graph = make_graph(seed=9, loops=False)
    theirs = pyg_nn.GATConv(5, 4, heads=2, add_self_loops=False)
    ours = GATConv(5, 4, heads=2, add_self_loops=False)
    _full(graph, ours, theirs, torch.randn(graph.num_nodes, 5))


@pytest.mark.parametrize("train_eps", [False, True])
def test_gin_matches_pyg(backend, train_eps, make_graph):
    graph = make_graph(seed=10)
    torch.manual_seed(4)

    def mlp():
        return torch.nn.Sequential(
            torch.nn.Linear(9, 16), torch.nn.ReLU(), torch.nn.Linear(16, 5)
        )

    theirs = pyg_nn.GINConv(mlp(), eps=0.3, train_eps=train_eps)
    ours = GINConv(mlp(), eps=0.3, train_eps=train_eps)
    _full(graph, ours, theirs, torch.randn(graph.num_nodes, 9))


# ------------------------------------------------------------------ sampled blocks
def test_sage_on_block_matches_pyg_bipartite(backend, make_graph):
    block, edge_index = _block(make_graph(seed=11))
    for aggr, project in (("mean", False), ("max", True)):
        theirs = pyg_nn.SAGEConv(8, 5, aggr=aggr, project=project)
        ours = SAGEConv(8, 5, aggr=aggr, project=project)
        _bipartite(block, edge_index, ours, theirs, torch.randn(block.num_src, 8))


def test_gat_on_block_matches_pyg_bipartite(backend, make_graph):
    block, edge_index = _block(make_graph(seed=12))
    theirs = pyg_nn.GATConv(8, 3, heads=2)
    ours = GATConv(8, 3, heads=2)
    _bipartite(block, edge_index, ours, theirs, torch.randn(block.num_src, 8))


def test_gin_on_block_matches_pyg_bipartite(backend, make_graph):
    block, edge_index = _block(make_graph(seed=13))
    theirs = pyg_nn.GINConv(torch.nn.Linear(8, 4), eps=0.1, train_eps=True)
    ours = GINConv(torch.nn.Linear(8, 4), eps=0.1, train_eps=True)
    _bipartite(block, edge_index, ours, theirs, torch.randn(block.num_src, 8))


def test_gcn_on_block_matches_dense_reference(backend, make_graph):
    # PyG has no bipartite GCN; a block follows DGL's GraphConv(norm="both"):
    # D_dst^-1/2 (A + I) D_src^-1/2 X W + b with degrees counted in the block.
    block, _ = _block(make_graph(seed=14))
    conv = GCNConv(6, 3).double()
    with torch.no_grad():
        conv.bias.uniform_()
    x = torch.randn(block.num_src, 6, dtype=torch.float64)
    adj = np.zeros((block.num_dst, block.num_src))
    for i in range(block.num_dst):
        for e in range(block.indptr[i], block.indptr[i + 1]):
            if block.indices[e] != i:  # existing loops are replaced
                adj[i, block.indices[e]] += 1
        adj[i, i] = 1
    d_dst, d_src = adj.sum(1), adj.sum(0)
    inv_src = np.where(d_src > 0, d_src**-0.5, 0)
    norm = torch.from_numpy(d_dst[:, None] ** -0.5 * adj * inv_src[None, :])
    expected = norm @ x @ conv.lin.weight.T + conv.bias
    torch.testing.assert_close(conv(block, x), expected)


# ------------------------------------------------------------------ behaviour
def test_gat_attention_dropout_only_in_training(make_graph):
    graph = make_graph(seed=15)
    conv = GATConv(4, 4, heads=2, dropout=0.5)
    x = torch.randn(graph.num_nodes, 4)
    conv.eval()
    torch.testing.assert_close(conv(graph, x), conv(graph, x))
    conv.train()
    torch.manual_seed(0)
    first = conv(graph, x)
    torch.manual_seed(0)
    torch.testing.assert_close(conv(graph, x), first)  # seeded: reproducible
    conv.eval()
    assert not torch.allclose(conv(graph, x), first)


@pytest.mark.parametrize(
    "make",
    [
        lambda: GCNConv(4, 2),
        lambda: SAGEConv(4, 2),
        lambda: GATConv(4, 2, heads=2),
        lambda: GINConv(torch.nn.Linear(4, 2)),
    ],
    ids=["gcn", "sage", "gat", "gin"],
)
def test_feature_rows_must_match_the_graph(make, make_graph):
    graph = make_graph(num_nodes=10, num_edges=20)
    layer = make()
    with pytest.raises(OperatorError) as err:
        layer(graph, torch.randn(9, 4))
    message = str(err.value)
    assert message.startswith(f"x in {type(layer).__name__}.forward: expected 10 rows")
    assert "got 9 rows. Hint:" in message
    block, _ = _block(make_graph(seed=16))
    with pytest.raises(OperatorError, match="block's num_src"):
        layer(block, torch.randn(block.num_dst, 4))


def test_reprs_follow_pyg():
    assert repr(GCNConv(3, 4)) == repr(pyg_nn.GCNConv(3, 4))
    assert repr(SAGEConv(3, 4, aggr="max")) == repr(pyg_nn.SAGEConv(3, 4, aggr="max"))
    assert repr(GATConv(3, 4, heads=2)) == repr(pyg_nn.GATConv(3, 4, heads=2))
    assert repr(GINConv(torch.nn.Identity())) == "GINConv(nn=Identity())"


def test_reset_parameters_matches_pyg_distributions():
    torch.manual_seed(0)
    conv = GATConv(64, 64, heads=4)
    bound = (6 / (4 + 64)) ** 0.5
    assert conv.att_src.abs().max() <= bound
    assert conv.att_src.abs().max() > 0.8 * bound
    assert torch.count_nonzero(conv.bias) == 0
    gin = GINConv(torch.nn.Linear(3, 3), eps=0.5)
    gin.eps.data.fill_(0.0)
    gin.reset_parameters()
    assert float(gin.eps) == 0.5


# ------------------------------------------------------------------ reuse of A.X
def _pyg_stack(kind, ours):
    """PyG's 2-layer model with our parameters (same forward as BasicGNN)."""
    if kind == "gcn":
        convs = [pyg_nn.GCNConv(6, 8), pyg_nn.GCNConv(8, 3)]
    else:
        convs = [pyg_nn.SAGEConv(6, 8), pyg_nn.SAGEConv(8, 3)]
    model = torch.nn.ModuleList(convs)
    model.load_state_dict(ours.convs.state_dict())
    return model


def _run_pyg(model, edge_index, x):
    return model[1](model[0](x, edge_index).relu(), edge_index)


@pytest.mark.parametrize("kind", ["gcn", "sage"])
def test_constant_input_aggregate_is_reused_exactly(
    backend, kind, make_graph, monkeypatch
):
    graph = make_graph(seed=21)
    torch.manual_seed(5)
    ours = GCN(6, 8, 3) if kind == "gcn" else GraphSAGE(6, 8, 3)
    theirs = _pyg_stack(kind, ours)
    edge_index = edge_index_of(graph)
    x = torch.randn(graph.num_nodes, 6)  # input features: no gradient
    reduces = []
    original = Aggregation.reduce

    def counting(self, prop, messages):
        reduces.append(messages.shape[1])
        return original(self, prop, messages)

    monkeypatch.setattr(Aggregation, "reduce", counting)
    for step in range(3):
        out = ours(graph, x)
        expected = _run_pyg(theirs, edge_index, x)
        torch.testing.assert_close(out, expected, **TOL)
        grad = torch.randn_like(out)
        out.backward(grad)
        expected.backward(grad)
        for (name, p), q in zip(
            ours.named_parameters(), theirs.parameters(), strict=True
        ):
            torch.testing.assert_close(p.grad, q.grad, **TOL, msg=name)
            p.grad = q.grad = None
        if step == 0:
            x.mul_(-0.5)  # in place: the next step must see the new features
    # Layer 1 aggregated at width 6 twice (x changed once), layer 2 every step.
    assert reduces.count(6) == 2
    assert len(reduces) == 5


def test_reuse_follows_a_new_graph_and_is_off_on_request(backend, make_graph):
    torch.manual_seed(6)
    model = GCN(6, 8, 3)
    x = torch.randn(40, 6)
    first, second = make_graph(seed=22), make_graph(seed=23)
    with reuse_constant_aggregates(False):
        expected = [model(g, x) for g in (first, second)]
    for _ in range(2):
        for g, e in zip((first, second), expected, strict=True):
            torch.testing.assert_close(model(g, x), e, rtol=0, atol=0)
    dg = as_device_graph(first, x.device)
    assert any(
        k[0] == "constant_aggregate"
        for k in dg.with_self_loops()._cache
        if isinstance(k, tuple)
    )


def test_no_reuse_when_the_input_needs_a_gradient_or_gets_dropout(make_graph):
    graph = make_graph(seed=24)
    torch.manual_seed(7)
    model = GCN(6, 8, 3, dropout=0.5)
    x = torch.randn(graph.num_nodes, 6)
    torch.manual_seed(0)
    a = model(graph, x)
    torch.manual_seed(1)
    b = model(graph, x)  # a new dropout mask, a new aggregate
    assert not torch.allclose(a, b)
    model.eval()
    x_grad = x.clone().requires_grad_(True)
    model(graph, x_grad).sum().backward()
    assert x_grad.grad is not None
    assert x_grad.grad.abs().sum() > 0


def test_gat_stack_trains_identically_fused_and_unfused(make_graph):
    graph = make_graph(seed=25)
    torch.manual_seed(8)
    model = GAT(6, 4, 3, heads=2)
    x = torch.randn(graph.num_nodes, 6)
    out = model(graph, x)
    grads = torch.autograd.grad(out.square().sum(), list(model.parameters()))
    for conv in model.convs:
        conv.dropout = 1e-12  # forces the unfused path, same result
    out_unfused = model(graph, x)
    torch.testing.assert_close(out, out_unfused, **TOL)
    grads_unfused = torch.autograd.grad(
        out_unfused.square().sum(), list(model.parameters())
    )
    for a, b in zip(grads, grads_unfused, strict=True):
        torch.testing.assert_close(a, b, **TOL)
