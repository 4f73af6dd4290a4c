"""Kernels against scipy, PyG's scatter utilities and brute force; gradcheck."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from torch_geometric.utils import add_remaining_self_loops, scatter
from torch_geometric.utils import softmax as pyg_softmax

from strata.operators.errors import OperatorError
from strata.operators.kernels import (
    AGGREGATORS,
    Backend,
    DeviceGraph,
    aggregate,
    aggregate_first,
    as_device_graph,
    edge_softmax,
    gat_attention,
    get_aggregator,
    sddmm_add,
    sddmm_dot,
    spmm,
    use_backend,
)
from strata.operators.kernels.backend import NUMBA_MIN_WORK, resolve, work_dtype
from strata.operators.samplers import NeighborSampler, SamplerConfig

CPU = torch.device("cpu")


def coo(dg):
    """(src, dst) of every edge of a DeviceGraph, in its edge order."""
    return dg.src_index().numpy(), dg.dst_index().numpy()


def dense_adj(dg, values=None):
    """scipy CSR with A[dst, src] = sum of the edge values."""
    src, dst = coo(dg)
    data = np.ones(len(src)) if values is None else values
    return sp.csr_matrix((data, (dst, src)), shape=(dg.num_dst, dg.num_src))


def a_block(make_graph, seed=0):
    graph = make_graph(seed=seed)
    sampler = NeighborSampler(graph, SamplerConfig(fanouts=(3,)), seed=seed)
    return sampler.sample(np.arange(0, graph.num_nodes, 3), 0, 0)[0]


@pytest.fixture(params=["graph", "block"])
def dg(request, make_graph):
    source = make_graph(seed=1) if request.param == "graph" else a_block(make_graph)
    return as_device_graph(source, CPU)


@pytest.fixture(params=["graph", "block"])
def small(request, make_graph):
    """A graph small enough for gradcheck's one-column-at-a-time Jacobians."""
    graph = make_graph(num_nodes=12, num_edges=30, seed=5)
    if request.param == "block":
        sampler = NeighborSampler(graph, SamplerConfig(fanouts=(3,)), seed=0)
        graph = sampler.sample(np.array([0, 3, 4, 8]), 0, 0)[0]
    return as_device_graph(graph, CPU)


# ------------------------------------------------------------------ structure
def test_device_graph_is_the_in_adjacency_and_cached(make_graph):
    graph = make_graph(seed=2)
    dg = as_device_graph(graph, CPU)
    assert as_device_graph(graph, CPU) is dg
    src, dst = graph.to_coo()
    expected = sp.csr_matrix(
        (np.ones(len(src)), (dst, src)), shape=(graph.num_nodes,) * 2
    )
    assert (dense_adj(dg) != expected).nnz == 0
    assert dg.in_degree().tolist() == graph.in_degree().tolist()
    assert dg.out_degree().tolist() == graph.out_degree().tolist()
    assert dg.transpose() is dg.transpose()


def test_transpose_and_its_permutation(dg):
    t = dg.transpose()
    values = np.random.default_rng(0).random(dg.num_edges)
    rows = np.repeat(np.arange(dg.num_src), np.diff(t.indptr.numpy()))
    transposed = sp.csr_matrix(
        (values[t.perm.numpy()], (rows, t.indices.numpy())),
        shape=(dg.num_src, dg.num_dst),
    )
    assert abs(transposed - dense_adj(dg, values).T).max() < 1e-12


def test_transpose_on_the_torch_path_matches_numba(dg):
    built = dg._transpose_torch()  # what other devices run
    cpu = dg.transpose()  # numba on CPU
    assert torch.equal(built.indptr, cpu.indptr)
    assert torch.equal(built.indices, cpu.indices)
    assert torch.equal(built.perm, cpu.perm)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("fill", [1.0, 2.0])
def test_with_self_loops_matches_pyg(make_graph, weighted, fill):
    graph = make_graph(seed=3, weighted=weighted)
    dg = as_device_graph(graph, CPU)
    looped = dg.with_self_loops(fill)
    assert dg.with_self_loops(fill) is looped
    src, dst = graph.to_coo()
    weight = None if graph.edge_weight is None else torch.from_numpy(graph.edge_weight)
    if weight is None and fill != 1.0:
        weight = torch.ones(graph.num_edges)
    edge_index = torch.stack(
        [torch.from_numpy(src), torch.from_numpy(dst.astype(np.int64))]
    )
    ref_index, ref_weight = add_remaining_self_loops(
        edge_index, weight, fill, graph.num_nodes
    )
    ref_values = (
        np.ones(ref_index.shape[1]) if ref_weight is None else ref_weight.numpy()
    )
    expected = sp.csr_matrix(
        (ref_values, (ref_index[1].numpy(), ref_index[0].numpy())),
        shape=(graph.num_nodes,) * 2,
    )
    ours_w = None if looped.edge_weight is None else looped.edge_weight.numpy()
    if ours_w is None:
        assert fill == 1.0
    # PyG keeps existing loops at their weight even when it invents unit weights;
    # an unweighted graph here has every loop at `fill` (A + fill * I).
    if not weighted and fill != 1.0:
        expected.setdiag(fill)
    assert abs(dense_adj(looped, ours_w) - expected).max() < 1e-6
    assert torch.all(looped.in_degree() >= 1)


# ------------------------------------------------------------------ spmm
def test_spmm_matches_scipy(backend, dg):
    x = torch.randn(dg.num_src, 5, dtype=torch.float64)
    values = torch.rand(dg.num_edges, dtype=torch.float64)
    expected = dense_adj(dg, values.numpy()) @ x.numpy()
    torch.testing.assert_close(spmm(dg, x, values), torch.from_numpy(expected))
    torch.testing.assert_close(spmm(dg, x), torch.from_numpy(dense_adj(dg) @ x.numpy()))


def test_spmm_per_head_values(backend, dg):
    x = torch.randn(dg.num_src, 3, 4, dtype=torch.float64)
    values = torch.rand(dg.num_edges, 3, dtype=torch.float64)
    out = spmm(dg, x, values)
    for h in range(3):
        expected = dense_adj(dg, values[:, h].numpy()) @ x[:, h].numpy()
        torch.testing.assert_close(out[:, h], torch.from_numpy(expected))


@pytest.mark.parametrize("heads", [0, 2])
def test_spmm_gradcheck(backend, small, heads):
    shape = (small.num_src, heads, 3) if heads else (small.num_src, 3)
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    vshape = (small.num_edges, heads) if heads else (small.num_edges,)
    values = torch.rand(*vshape, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda v, xx: spmm(small, xx, v), (values, x), fast_mode=True
    )


def test_spmm_float32_matches_float64(backend, dg):
    x = torch.randn(dg.num_src, 64, dtype=torch.float64)
    torch.testing.assert_close(
        spmm(dg, x.float()), spmm(dg, x).float(), rtol=1e-5, atol=1e-5
    )


# ------------------------------------------------------------------ aggregate
@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
def test_aggregate_matches_pyg_scatter(backend, dg, reduce):
    x = torch.randn(dg.num_src, 6, dtype=torch.float64, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_(True)
    src, dst = dg.src_index(), dg.dst_index()
    expected = scatter(x_ref[src], dst, 0, dim_size=dg.num_dst, reduce=reduce)
    out = aggregate(dg, x, reduce)
    torch.testing.assert_close(out, expected)
    grad = torch.randn_like(out)
    out.backward(grad)
    expected.backward(grad)
    torch.testing.assert_close(x.grad, x_ref.grad)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
def test_aggregate_gradcheck(backend, small, reduce):
    x = torch.randn(small.num_src, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda xx: aggregate(small, xx, reduce), (x,), fast_mode=True
    )


def test_max_routes_gradient_of_parallel_edges_to_their_one_source(backend):
    # Two parallel edges 0 -> 1 tie exactly; the gradient reaches node 0 once.
    dg = DeviceGraph(torch.tensor([0, 0, 2]), torch.tensor([0, 0]), 2, 2)
    x = torch.tensor([[3.0], [1.0]], requires_grad=True)
    aggregate(dg, x, "max").sum().backward()
    assert x.grad.tolist() == [[1.0], [0.0]]


def test_aggregator_registry():
    assert sorted(AGGREGATORS) == ["max", "mean", "sum"]
    assert get_aggregator("max").linear is False
    with pytest.raises(OperatorError, match=r"aggr in SAGEConv: expected one of"):
        get_aggregator("lstm", "SAGEConv")


# ------------------------------------------------------------------ attention
def test_edge_softmax_matches_pyg(backend, dg):
    scores = torch.randn(dg.num_edges, 3, dtype=torch.float64, requires_grad=True)
    ref_scores = scores.detach().clone().requires_grad_(True)
    expected = pyg_softmax(ref_scores, dg.dst_index(), num_nodes=dg.num_dst)
    out = edge_softmax(dg, scores)
    torch.testing.assert_close(out, expected)
    grad = torch.randn_like(out)
    out.backward(grad)
    expected.backward(grad)
    torch.testing.assert_close(scores.grad, ref_scores.grad)
    flat = torch.randn(dg.num_edges, dtype=torch.float64)
    torch.testing.assert_close(
        edge_softmax(dg, flat), pyg_softmax(flat, dg.dst_index(), num_nodes=dg.num_dst)
    )


def test_edge_softmax_is_stable_for_large_scores(backend, dg):
    scores = torch.full((dg.num_edges, 1), 1e4)
    out = edge_softmax(dg, scores)
    assert torch.isfinite(out).all()
    sums = torch.zeros(dg.num_dst, 1).index_add_(0, dg.dst_index(), out)
    has_edges = dg.in_degree() > 0
    torch.testing.assert_close(sums[has_edges], torch.ones_like(sums[has_edges]))


def test_edge_softmax_gradcheck(backend, small):
    scores = torch.randn(small.num_edges, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda s: edge_softmax(small, s), (scores,), fast_mode=True
    )


def test_sddmm_against_brute_force(backend, dg):
    src, dst = coo(dg)
    a_src = torch.randn(dg.num_src, 2, dtype=torch.float64)
    a_dst = torch.randn(dg.num_dst, 2, dtype=torch.float64)
    expected = a_src.numpy()[src] + a_dst.numpy()[dst]
    torch.testing.assert_close(sddmm_add(dg, a_src, a_dst), torch.from_numpy(expected))
    x_src = torch.randn(dg.num_src, 2, 4, dtype=torch.float64)
    y_dst = torch.randn(dg.num_dst, 2, 4, dtype=torch.float64)
    dots = (x_src.numpy()[src] * y_dst.numpy()[dst]).sum(-1)
    torch.testing.assert_close(sddmm_dot(dg, x_src, y_dst), torch.from_numpy(dots))
    flat = sddmm_dot(dg, x_src[:, 0], y_dst[:, 0])
    torch.testing.assert_close(flat, torch.from_numpy(dots[:, 0]))


@pytest.mark.parametrize("heads", [0, 3])
def test_sddmm_gradcheck(backend, small, heads):
    tail = (heads, 2) if heads else (2,)
    x_src = torch.randn(small.num_src, *tail, dtype=torch.float64, requires_grad=True)
    y_dst = torch.randn(small.num_dst, *tail, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda a, b: sddmm_dot(small, a, b), (x_src, y_dst), fast_mode=True
    )
    a_src = torch.randn(small.num_src, 2, dtype=torch.float64, requires_grad=True)
    a_dst = torch.randn(small.num_dst, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda a, b: sddmm_add(small, a, b), (a_src, a_dst), fast_mode=True
    )


# ------------------------------------------------------------------ choices, errors
def test_backend_selection():
    big = NUMBA_MIN_WORK
    assert resolve(torch.empty(1), big) is Backend.NUMBA
    assert resolve(torch.empty(1), big - 1) is Backend.TORCH  # small: torch
    with use_backend(Backend.NUMBA):
        assert resolve(torch.empty(1), 1) is Backend.NUMBA  # forced: any size
    assert resolve(torch.empty(1, dtype=torch.float16)) is Backend.NUMBA
    assert work_dtype(torch.bfloat16) is torch.float32
    assert resolve(torch.empty(1, device="meta")) is Backend.TORCH
    with use_backend(Backend.TORCH):
        assert resolve(torch.empty(1)) is Backend.TORCH
    assert resolve(torch.empty(1)) is Backend.NUMBA


def test_half_precision_is_computed_in_float32(backend, dg):
    x = torch.randn(dg.num_src, 4)
    out = spmm(dg, x.to(torch.bfloat16))
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), spmm(dg, x), rtol=2e-2, atol=5e-2)


def test_aggregate_first_prefers_the_cheaper_order():
    common = {"num_src": 1000, "num_dst": 1000, "num_edges": 10_000}
    # First layer (no input gradient), equal widths: one SpMM instead of two.
    assert aggregate_first(
        **common, in_width=128, out_width=128, x_requires_grad=False, training=True
    )
    # Narrowing layer inside the model: aggregate at the narrow width.
    assert not aggregate_first(
        **common, in_width=128, out_width=16, x_requires_grad=True, training=True
    )
    # Widening layer: aggregate at the narrow input width.
    assert aggregate_first(
        **common, in_width=16, out_width=128, x_requires_grad=True, training=True
    )
    # A block shrinks rows: the dense product is cheaper after aggregation.
    assert aggregate_first(
        num_src=10_000,
        num_dst=100,
        num_edges=1_000,
        in_width=64,
        out_width=64,
        x_requires_grad=True,
        training=False,
    )


def test_errors_follow_the_template(dg):
    with pytest.raises(OperatorError, match=r"^x in spmm: expected \d+ rows"):
        spmm(dg, torch.randn(dg.num_src + 1, 2))
    with pytest.raises(OperatorError, match=r"^values in spmm: expected shape"):
        spmm(dg, torch.randn(dg.num_src, 2), torch.ones(dg.num_edges + 1))
    with pytest.raises(OperatorError, match=r"^reduce in aggregate: expected one of"):
        aggregate(dg, torch.randn(dg.num_src, 2), "median")
    with pytest.raises(OperatorError, match=r"^scores in edge_softmax"):
        edge_softmax(dg, torch.randn(dg.num_edges + 2))
    with pytest.raises(OperatorError, match=r"^y_dst in sddmm_dot"):
        sddmm_dot(dg, torch.randn(dg.num_src, 2), torch.randn(dg.num_dst + 1, 2))
    with pytest.raises(OperatorError, match=r"^graph in as_device_graph"):
        as_device_graph("not a graph", CPU)  # type: ignore[arg-type]
    with pytest.raises(OperatorError, match=r"^x in aggregate: expected a \[num_nodes"):
        aggregate(dg, torch.randn(dg.num_src), "sum")


def test_cached_transposed_values_follow_in_place_changes(backend, dg):
    values = torch.rand(dg.num_edges, dtype=torch.float64)
    x = torch.randn(dg.num_src, 3, dtype=torch.float64, requires_grad=True)
    spmm(dg, x, values).sum().backward()
    first = x.grad.clone()
    x.grad = None
    spmm(dg, x, values).sum().backward()  # served from the cache
    torch.testing.assert_close(x.grad, first)
    x.grad = None
    values.mul_(2.0)  # same tensor, new contents
    spmm(dg, x, values).sum().backward()
    torch.testing.assert_close(x.grad, 2.0 * first)


# ------------------------------------------------------------------ fused GAT attention
def _gat_unfused(dg, h, el, er, slope):
    logits = torch.nn.functional.leaky_relu(sddmm_add(dg, el, er), slope)
    return spmm(dg, h, edge_softmax(dg, logits))


def _gat_reference(dg, h, el, er, slope):
    """Brute force over the COO edges with PyG's softmax."""
    src, dst = coo(dg)
    src, dst = torch.from_numpy(src), torch.from_numpy(dst)
    logits = torch.nn.functional.leaky_relu(el[src] + er[dst], slope)
    alpha = pyg_softmax(logits, dst, num_nodes=dg.num_dst)
    out = torch.zeros(dg.num_dst, *h.shape[1:], dtype=h.dtype)
    return out.index_add_(0, dst, alpha.unsqueeze(-1) * h[src])


@pytest.mark.parametrize("heads", [1, 3])
def test_gat_attention_matches_brute_force(backend, dg, heads):
    gen = torch.Generator().manual_seed(heads)
    looped = dg.with_self_loops()
    h = torch.randn(dg.num_src, heads, 4, dtype=torch.float64, generator=gen)
    el = torch.randn(dg.num_src, heads, dtype=torch.float64, generator=gen)
    er = torch.randn(dg.num_dst, heads, dtype=torch.float64, generator=gen)
    for g in (dg, looped):  # rows without in-edges give zeros
        ours = [t.clone().requires_grad_(True) for t in (h, el, er)]
        ref = [t.clone().requires_grad_(True) for t in (h, el, er)]
        out = gat_attention(g, *ours, 0.2)
        expected = _gat_reference(g, *ref, 0.2)
        torch.testing.assert_close(out, expected)
        grad = torch.randn(out.shape, dtype=out.dtype, generator=gen)
        out.backward(grad)
        expected.backward(grad)
        for a, b in zip(ours, ref, strict=True):
            torch.testing.assert_close(a.grad, b.grad)


def test_gat_attention_float32_matches_the_unfused_kernels(make_graph):
    dg = as_device_graph(make_graph(seed=4), CPU).with_self_loops()
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(dg.num_src, 2, 8, generator=gen)
    el = torch.randn(dg.num_src, 2, generator=gen) * 5  # some negative scores
    er = torch.randn(dg.num_dst, 2, generator=gen) * 5
    grad = torch.randn(dg.num_dst, 2, 8, generator=gen)
    results = []
    for fused in (True, False):
        inputs = [t.clone().requires_grad_(True) for t in (h, el, er)]
        with use_backend(Backend.NUMBA):
            out = (gat_attention if fused else _gat_unfused)(dg, *inputs, 0.2)
        out.backward(grad)
        results.append([out, *(t.grad for t in inputs)])
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_gat_attention_gradcheck(backend, small):
    looped = small.with_self_loops()
    gen = torch.Generator().manual_seed(1)
    inputs = (
        torch.randn(small.num_src, 2, 3, dtype=torch.float64, generator=gen),
        torch.randn(small.num_src, 2, dtype=torch.float64, generator=gen),
        torch.randn(small.num_dst, 2, dtype=torch.float64, generator=gen),
    )
    inputs = tuple(t.requires_grad_(True) for t in inputs)
    assert torch.autograd.gradcheck(
        lambda h, el, er: gat_attention(looped, h, el, er, 0.2), inputs
    )


def test_gat_attention_checks_shapes(dg):
    h = torch.randn(dg.num_src, 2, 3)
    with pytest.raises(OperatorError, match=r"^h, el, er in gat_attention"):
        gat_attention(dg, h, torch.randn(dg.num_src, 3), torch.randn(dg.num_dst, 2))


# ------------------------------------------------------------------ derived-value cache
def test_cached_for_follows_identity_version_and_writes(dg):
    calls = []

    def build(t):
        calls.append(1)
        return t * 2

    x = torch.randn(4, 3)
    first = dg.cached_for("k", x, lambda: build(x))
    assert dg.cached_for("k", x, lambda: build(x)) is first
    assert len(calls) == 1
    x.add_(1)  # in-place change of the source
    torch.testing.assert_close(dg.cached_for("k", x, lambda: build(x)), x * 2)
    value = dg.cached_for("k", x, lambda: build(x))
    value.zero_()  # someone wrote into the cached value
    torch.testing.assert_close(dg.cached_for("k", x, lambda: build(x)), x * 2)
    y = x.clone()  # same contents, another tensor
    dg.cached_for("k", y, lambda y=y: build(y))
    assert len(calls) == 4
    del y  # the entry goes with its source
    assert "k" not in dg._cache
