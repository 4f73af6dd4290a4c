"""NeighborSampler: a pure-Python reference, structure, determinism, distribution."""

import itertools
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.stats import chisquare

from strata.operators.errors import OperatorError
from strata.operators.layers import GAT, GCN, GIN, GraphSAGE
from strata.operators.samplers import (
    Block,
    NeighborSampler,
    SamplerConfig,
    check_fanouts,
)
from strata.operators.samplers.rng import batch_key, bounded, hash3, mix64
from strata.storage import CSRGraph

MASK = (1 << 64) - 1


# ------------------------------------------------------------------ reference
def ref_mix64(z):
    z &= MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def ref_hash3(key, a, b):
    gamma, mul1, mul2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
    h = ref_mix64(key + gamma)
    h = ref_mix64(h ^ ((a * gamma + mul1) & MASK))
    return ref_mix64(h ^ ((b * mul2 + gamma) & MASK))


def ref_draw(key, salt, t, m):
    """Draw t for one vertex, mapped to [0, m) by Lemire's multiply-shift."""
    return ((ref_hash3(key, salt, t) >> 32) * m) >> 32


def ref_sample(graph, fanouts, replace, seed, epoch, batch, seeds):
    """The sampler's specification, written plainly (rapidgnn.md §3.2)."""
    in_adj = graph.csc()
    key = ref_hash3(ref_hash3(seed, epoch, 0), batch, 0)
    n = graph.num_nodes
    dst = [int(s) for s in seeds]
    blocks = []
    for layer in reversed(range(len(fanouts))):
        fanout = fanouts[layer]
        local = {v: i for i, v in enumerate(dst)}
        src = list(dst)
        indptr, indices = [0], []
        for v in dst:
            start, deg = (
                int(in_adj.indptr[v]),
                int(in_adj.indptr[v + 1] - in_adj.indptr[v]),
            )
            salt = layer * n + v
            if fanout == -1 or (deg <= fanout and not replace) or deg == 0:
                offsets = list(range(deg))
            elif replace:
                offsets = [ref_draw(key, salt, t, deg) for t in range(fanout)]
            else:  # Floyd
                offsets = []
                for j in range(deg - fanout, deg):
                    r = ref_draw(key, salt, j, j + 1)
                    offsets.append(j if r in offsets else r)
            for k in offsets:
                u = int(in_adj.indices[start + k])
                if u not in local:
                    local[u] = len(src)
                    src.append(u)
                indices.append(local[u])
            indptr.append(len(indices))
        blocks.append((indptr, indices, src, len(dst)))
        dst = src
    return blocks[::-1]


def star_graph(degree):
    """Node 0 with `degree` in-neighbours 1..degree."""
    return CSRGraph.from_edges(
        np.arange(1, degree + 1), np.zeros(degree, dtype=np.int64)
    )


# ------------------------------------------------------------------ tests
def test_rng_matches_the_reference():
    for key, a, b in [(0, 0, 0), (2**64 - 1, 5, 7), (123456789, 2**40, 3)]:
        assert hash3(np.uint64(key), np.uint64(a), np.uint64(b)) == ref_hash3(key, a, b)
    assert mix64(np.uint64(42)) == ref_mix64(42)
    assert batch_key(3, 4, 5) == ref_hash3(ref_hash3(3, 4, 0), 5, 0)
    assert batch_key(3, 4, 5, rank=1) != batch_key(3, 4, 5)
    assert bounded(np.uint64(2**64 - 1), 10) == 9


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("fanouts", [(3, 2), (-1, 4), (2, 2, 2)])
def test_sampler_matches_the_reference(make_graph, replace, fanouts):
    graph = make_graph(num_nodes=60, num_edges=400, seed=2)
    sampler = NeighborSampler(graph, SamplerConfig(fanouts, replace=replace), seed=7)
    seeds = np.array([5, 0, 33, 12, 59, 41])
    blocks = sampler.sample(seeds, epoch=3, batch_index=11)
    expected = ref_sample(graph, fanouts, replace, 7, 3, 11, seeds)
    for block, (indptr, indices, src, num_dst) in zip(blocks, expected, strict=True):
        assert block.indptr.tolist() == indptr
        assert block.indices.tolist() == indices
        assert block.src_global_ids.tolist() == src
        assert block.num_dst == num_dst


def _check_structure(graph, blocks, seeds, fanouts, replace):
    in_adj = graph.csc()
    in_degree = np.diff(in_adj.indptr)
    assert blocks[-1].dst_global_ids.tolist() == list(seeds)
    for lower, upper in itertools.pairwise(blocks):
        assert lower.dst_global_ids.tolist() == upper.src_global_ids.tolist()
    edges = set(zip(*graph.to_coo(), strict=True))
    for block, fanout in zip(blocks, fanouts, strict=True):
        assert len(set(block.src_global_ids.tolist())) == block.num_src  # local ids
        for i, v in enumerate(block.dst_global_ids):
            row = block.indices[block.indptr[i] : block.indptr[i + 1]]
            srcs = block.src_global_ids[row]
            assert all((int(u), int(v)) in edges for u in srcs)  # real in-neighbours
            deg = in_degree[v]
            if fanout == -1:
                assert len(row) == deg
            elif replace:
                assert len(row) == (fanout if deg else 0)
            else:
                assert len(row) == min(deg, fanout)


@pytest.mark.parametrize("replace", [False, True])
def test_blocks_are_well_formed(make_graph, replace):
    graph = make_graph(num_nodes=200, num_edges=2000, seed=4, loops=False)
    fanouts = (5, 3)
    sampler = NeighborSampler(graph, SamplerConfig(fanouts, replace=replace), seed=0)
    seeds = np.random.default_rng(1).permutation(200)[:32]
    _check_structure(graph, sampler.sample(seeds, 0, 0), seeds, fanouts, replace)


def test_without_replacement_never_repeats_an_edge():
    # A simple graph: repeated sources in a row would mean a repeated edge.
    graph = CSRGraph.from_edges(np.arange(1, 31), np.zeros(30, dtype=np.int64))
    sampler = NeighborSampler(graph, SamplerConfig((10,)), seed=0)
    for batch in range(200):
        (block,) = sampler.sample([0], 0, batch)
        assert len(set(block.indices.tolist())) == 10


def test_deterministic_per_batch_and_independent_of_order_and_threads(make_graph):
    graph = make_graph(num_nodes=300, num_edges=3000, seed=5)
    sampler = NeighborSampler(graph, SamplerConfig((4, 4)), seed=9)
    batches = [np.arange(b * 20, b * 20 + 20) for b in range(8)]

    def run(b):
        return [
            (blk.indptr.tolist(), blk.indices.tolist(), blk.src_global_ids.tolist())
            for blk in sampler.sample(batches[b], epoch=2, batch_index=b)
        ]

    forward = [run(b) for b in range(8)]
    backward = [run(b) for b in reversed(range(8))][::-1]
    with ThreadPoolExecutor(4) as pool:
        threaded = list(pool.map(run, range(8)))
    fresh = NeighborSampler(graph, SamplerConfig((4, 4)), seed=9)
    again = [
        [
            (k.indptr.tolist(), k.indices.tolist(), k.src_global_ids.tolist())
            for k in fresh.sample(batches[b], epoch=2, batch_index=b)
        ]
        for b in range(8)
    ]
    assert forward == backward == threaded == again
    other_epoch = sampler.sample(batches[0], epoch=3, batch_index=0)
    assert other_epoch[0].src_global_ids.tolist() != forward[0][0][2]


def test_neighbour_frequencies_are_uniform():
    degree, fanout, draws = 12, 4, 3000
    sampler = NeighborSampler(star_graph(degree), SamplerConfig((fanout,)), seed=1)
    counts = np.zeros(degree + 1)
    for batch in range(draws):
        (block,) = sampler.sample([0], 0, batch)
        np.add.at(counts, block.src_global_ids[block.indices], 1)
    expected = np.full(degree, draws * fanout / degree)
    assert chisquare(counts[1:], expected).pvalue > 1e-3


def test_subsets_without_replacement_are_uniform():
    # Floyd's algorithm: every 2-subset of 5 neighbours is equally likely.
    sampler = NeighborSampler(star_graph(5), SamplerConfig((2,)), seed=2)
    subsets = dict.fromkeys(itertools.combinations(range(1, 6), 2), 0)
    for batch in range(4000):
        (block,) = sampler.sample([0], 0, batch)
        subsets[tuple(sorted(block.src_global_ids[block.indices].tolist()))] += 1
    assert chisquare(list(subsets.values())).pvalue > 1e-3


def test_with_replacement_draws_are_uniform_and_independent():
    sampler = NeighborSampler(star_graph(3), SamplerConfig((2,), replace=True), seed=3)
    pairs = dict.fromkeys(itertools.product(range(1, 4), repeat=2), 0)
    for batch in range(3600):
        (block,) = sampler.sample([0], 0, batch)
        pairs[tuple(block.src_global_ids[block.indices].tolist())] += 1
    assert chisquare(list(pairs.values())).pvalue > 1e-3


def test_empty_batch_and_isolated_seeds(make_graph):
    graph = make_graph(num_nodes=30, num_edges=50, seed=6)
    sampler = NeighborSampler(graph, SamplerConfig((3, 3)), seed=0)
    empty = sampler.sample(np.array([], dtype=np.int64))
    assert [b.num_dst for b in empty] == [0, 0]
    isolated = np.flatnonzero(graph.in_degree() == 0)[:2]
    blocks = sampler.sample(isolated)
    assert blocks[-1].num_edges == 0
    assert blocks[0].num_src == len(isolated)


def test_full_fanout_blocks_reproduce_full_graph_outputs(make_graph):
    # With every neighbour sampled, a model on blocks equals the full-graph model
    # at the seeds (GCN differs by design: block degrees, see GCNConv).
    graph = make_graph(num_nodes=50, num_edges=300, seed=7)
    x = torch.randn(50, 6)
    sampler = NeighborSampler(graph, SamplerConfig((-1, -1)), seed=0)
    seeds = np.array([3, 17, 8, 44])
    blocks = sampler.sample(seeds)
    x_in = x[torch.from_numpy(blocks[0].src_global_ids)]
    torch.manual_seed(0)
    for model in (
        GraphSAGE(6, 8, 3),
        GraphSAGE(6, 8, 3, aggr="max", project=True),
        GAT(6, 4, 3, heads=2),
        GIN(6, 8, 3),
    ):
        model.eval()
        torch.testing.assert_close(
            model(blocks, x_in),
            model(graph, x)[torch.from_numpy(seeds)],
            rtol=1e-5,
            atol=1e-5,
        )


def test_models_train_on_blocks(make_graph):
    graph = make_graph(num_nodes=50, num_edges=300, seed=8)
    sampler = NeighborSampler(graph, SamplerConfig((3, 2)), seed=0)
    blocks = sampler.sample(np.arange(10), 0, 0)
    x = torch.randn(blocks[0].num_src, 5)
    for model in (
        GCN(5, 8, 3, dropout=0.5),
        GraphSAGE(5, 8, 3),
        GAT(5, 4, 3),
        GIN(5, 8, 3),
    ):
        model(blocks, x).sum().backward()
        assert all(p.grad is not None for p in model.parameters())


# ------------------------------------------------------------------ errors
def test_bad_seeds_are_rejected(make_graph):
    sampler = NeighborSampler(
        make_graph(num_nodes=20, num_edges=40), SamplerConfig((2,))
    )
    with pytest.raises(
        OperatorError,
        match=r"^seeds in NeighborSampler.sample: "
        r"expected distinct node ids, got node 4 repeated at "
        r"position 2\. Hint: deduplicate",
    ):
        sampler.sample([4, 1, 4])
    with pytest.raises(OperatorError, match=r"expected ids in \[0, 20\), got ids in"):
        sampler.sample([0, 20])
    with pytest.raises(OperatorError, match=r"expected integer node ids"):
        sampler.sample(np.array([0.5]))
    with pytest.raises(OperatorError, match=r"expected a 1-D id array"):
        sampler.sample(np.zeros((2, 2), dtype=np.int64))
    # A failed call leaves the scratch clean: the next batch still works.
    assert sampler.sample([4, 1])[0].num_dst >= 2


def test_bad_configs_are_rejected(make_graph):
    with pytest.raises(OperatorError, match=r"^fanouts in SamplerConfig"):
        SamplerConfig(())
    with pytest.raises(OperatorError, match=r"fan-outs >= 1, or -1"):
        SamplerConfig((5, 0))
    with pytest.raises(OperatorError, match=r"^graph in NeighborSampler"):
        NeighborSampler(np.zeros(3), SamplerConfig((1,)))  # type: ignore[arg-type]


def test_fanouts_longer_than_the_model_are_rejected(make_graph):
    graph = make_graph(num_nodes=30, num_edges=90)
    config = SamplerConfig((5, 5, 5))
    model = GraphSAGE(4, 8, 2, num_layers=2)
    with pytest.raises(OperatorError) as err:
        check_fanouts(config, model.num_layers, "SampledTrainer")
    assert str(err.value) == (
        "fanouts in SampledTrainer: expected 2 fan-outs (one per model layer), "
        "got 3: [5, 5, 5]. Hint: give SamplerConfig one fan-out per "
        "message-passing layer"
    )
    blocks = NeighborSampler(graph, config).sample([0, 1])
    x = torch.randn(blocks[0].num_src, 4)
    with pytest.raises(
        OperatorError,
        match=r"^blocks in GraphSAGE.forward: expected 2 "
        r"blocks \(one per layer\), got 3 blocks",
    ):
        model(blocks, x)


def test_hand_made_blocks_are_validated():
    with pytest.raises(OperatorError, match=r"^indices in Block: expected local ids"):
        Block(np.array([0, 1]), np.array([5]), np.array([0, 1]), num_dst=1)
    with pytest.raises(OperatorError, match=r"^num_dst in Block"):
        Block(
            np.array([0, 0, 0, 0]),
            np.array([], dtype=np.int64),
            np.array([0, 1]),
            num_dst=3,
        )


def test_in_place_relu_changes_no_gradient(make_graph):
    # BasicGNN applies F.relu in place; a non-identical ReLU takes the plain path.
    graph = make_graph(num_nodes=40, num_edges=200, seed=9)
    x = torch.randn(40, 6)
    for cls in (GCN, GraphSAGE, GAT, GIN):
        torch.manual_seed(0)
        fast = cls(6, 8, 3, num_layers=3, act=F.relu)
        torch.manual_seed(0)
        plain = cls(6, 8, 3, num_layers=3, act=lambda t: torch.relu(t))
        plain.load_state_dict(fast.state_dict())
        out_fast, out_plain = fast(graph, x), plain(graph, x)
        torch.testing.assert_close(out_fast, out_plain)
        out_fast.square().sum().backward()
        out_plain.square().sum().backward()
        grads = dict(plain.named_parameters())
        for name, p in fast.named_parameters():
            torch.testing.assert_close(p.grad, grads[name].grad)


# ------------------------------------------------------------------ sample_hop
@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("fanouts", [(3,), (4, 2), (-1, 3, 2)])
def test_sample_hop_draws_what_sample_draws(fanouts, replace):
    """The hop is blocks[0] in global ids, edge for edge; the rest are the blocks."""
    graph = CSRGraph.from_edges(*np.random.default_rng(4).integers(0, 300, (2, 3000)))
    sampler = NeighborSampler(graph, SamplerConfig(fanouts, replace), seed=9)
    seeds = np.random.default_rng(1).choice(graph.num_nodes, 25, replace=False)
    blocks = sampler.sample(seeds, epoch=2, batch_index=5)
    hop, later = sampler.sample_hop(seeds, epoch=2, batch_index=5)
    first = blocks[0]
    np.testing.assert_array_equal(hop.indptr, first.indptr)
    np.testing.assert_array_equal(hop.sources, first.src_global_ids[first.indices])
    np.testing.assert_array_equal(hop.dst_global_ids, first.dst_global_ids)
    assert len(later) == len(blocks) - 1
    for got, want in zip(later, blocks[1:], strict=True):
        np.testing.assert_array_equal(got.indptr, want.indptr)
        np.testing.assert_array_equal(got.indices, want.indices)
        np.testing.assert_array_equal(got.src_global_ids, want.src_global_ids)


def test_sample_hop_rejects_repeated_seeds():
    graph = CSRGraph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]))
    for fanouts in ((2,), (2, 2)):
        sampler = NeighborSampler(graph, SamplerConfig(fanouts))
        with pytest.raises(OperatorError, match="repeated"):
            sampler.sample_hop([1, 2, 1])
