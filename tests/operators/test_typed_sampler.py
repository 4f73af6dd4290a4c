"""TypedNeighborSampler against brute force from the edge lists."""

import doctest
import importlib
import itertools
from collections import Counter

import numpy as np
import pytest

from strata.operators.errors import OperatorError
from strata.operators.samplers import (
    TypedBlock,
    TypedNeighborSampler,
    full_blocks,
    full_graph_block,
)
from strata.storage.hetero import Relation, TypedGraph

FEED = Relation("user", "engaged_feed", "item")
SEARCH = Relation("user", "engaged_search", "item")
CO = Relation("item", "co_engaged", "item")
NUM_NODES = {"user": 60, "item": 40}


def random_typed_graph(seed: int = 0) -> tuple[TypedGraph, dict]:
    """Users and items with 5 relations, parallel edges, weights, isolated nodes."""
    rng = np.random.default_rng(seed)

    def edges(n, num_src, num_dst):
        # the last 2 destinations have no in-edges of this relation
        return rng.integers(0, num_src, n), rng.integers(0, num_dst - 2, n)

    lists = {
        FEED: edges(500, 60, 40),
        SEARCH: edges(150, 60, 40),
        CO: (*edges(200, 40, 40), rng.uniform(0.1, 1.0, 200)),
    }
    lists[Relation("item", "rev_feed", "user")] = (lists[FEED][1], lists[FEED][0])
    lists[Relation("item", "rev_search", "user")] = (lists[SEARCH][1], lists[SEARCH][0])
    return TypedGraph.from_edges(lists, NUM_NODES), lists


GRAPH, LISTS = random_typed_graph()
SEEDS = {"user": np.array([3, 0, 17, 59]), "item": np.array([5, 38, 39])}


def global_edges(block: TypedBlock, rel: Relation) -> list[list[tuple]]:
    """Per destination row, the sampled (global src, global dst[, weight]) edges."""
    csr = block.relations[rel]
    src_ids = block.src_global_ids[rel.src]
    rows = []
    for i in range(csr.num_dst):
        lo, hi = csr.indptr[i], csr.indptr[i + 1]
        dst = int(block.src_global_ids[rel.dst][i])
        row = [(int(src_ids[j]), dst) for j in csr.indices[lo:hi]]
        if csr.weights is not None:
            row = [(*e, float(w)) for e, w in zip(row, csr.weights[lo:hi], strict=True)]
        rows.append(row)
    return rows


def true_in_edges(rel: Relation, v: int) -> Counter:
    src, dst, *w = LISTS[rel]
    keep = dst == v
    if w:
        return Counter(
            zip(
                src[keep].tolist(),
                dst[keep].tolist(),
                np.float32(w[0][keep]).tolist(),
                strict=True,
            )
        )
    return Counter(zip(src[keep].tolist(), dst[keep].tolist(), strict=True))


def assert_same_blocks(a: list[TypedBlock], b: list[TypedBlock]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert dict(x.num_dst) == dict(y.num_dst)
        for t in x.src_global_ids:
            np.testing.assert_array_equal(x.src_global_ids[t], y.src_global_ids[t])
        for rel, csr in x.relations.items():
            np.testing.assert_array_equal(csr.indptr, y.relations[rel].indptr)
            np.testing.assert_array_equal(csr.indices, y.relations[rel].indices)


def test_blocks_chain_and_destinations_come_first():
    blocks = TypedNeighborSampler(GRAPH, [4, 3], seed=1).sample(SEEDS, 0, 0)
    assert len(blocks) == 2
    for t, ids in SEEDS.items():
        np.testing.assert_array_equal(blocks[-1].dst_global_ids(t), ids)
    for lower, upper in itertools.pairwise(blocks):
        for t in GRAPH.node_types:
            np.testing.assert_array_equal(
                lower.dst_global_ids(t), upper.src_global_ids[t]
            )
    for block in blocks:
        for ids in block.src_global_ids.values():
            assert np.unique(ids).size == ids.size  # each node once per type
        assert set(block.relations) == set(GRAPH.relations)


def test_deterministic_per_seed_epoch_batch():
    sampler = TypedNeighborSampler(GRAPH, [3, 2], seed=7)
    first = sampler.sample(SEEDS, epoch=2, batch=5)
    sampler.sample(SEEDS, epoch=0, batch=0)  # no state carried between calls
    assert_same_blocks(first, sampler.sample(SEEDS, epoch=2, batch=5))
    assert_same_blocks(
        first, TypedNeighborSampler(GRAPH, [3, 2], seed=7).sample(SEEDS, 2, 5)
    )
    for other in (
        sampler.sample(SEEDS, epoch=2, batch=6),
        sampler.sample(SEEDS, epoch=3, batch=5),
        TypedNeighborSampler(GRAPH, [3, 2], seed=8).sample(SEEDS, 2, 5),
        TypedNeighborSampler(GRAPH, [3, 2], seed=7, rank=1).sample(SEEDS, 2, 5),
    ):
        with pytest.raises(AssertionError):
            assert_same_blocks(first, other)


@pytest.mark.parametrize("replace", [False, True])
def test_fanout_respected_and_edges_are_real(replace):
    fanouts = {r: [5, 2] for r in GRAPH.relations}
    fanouts[CO] = [1, 3]
    blocks = TypedNeighborSampler(GRAPH, fanouts, seed=3, replace=replace).sample(
        SEEDS, 1, 4
    )
    for layer, block in enumerate(blocks):
        for rel in GRAPH.relations:
            fanout = fanouts[rel][layer]
            for row in global_edges(block, rel):
                if not row:
                    continue
                truth = true_in_edges(rel, row[0][1])
                deg = sum(truth.values())
                assert len(row) == (fanout if replace else min(deg, fanout))
                assert set(row) <= set(truth)  # real edges, weights included
                if not replace:  # distinct in-edges: no edge more often than it is
                    assert not Counter(row) - truth


def test_full_fanout_equals_the_whole_neighbourhood():
    blocks = TypedNeighborSampler(GRAPH, [-1, -1], seed=0).sample(SEEDS, 0, 0)
    for block in blocks:
        for rel in GRAPH.relations:
            rows = global_edges(block, rel)
            assert len(rows) == block.num_dst[rel.dst]
            for i, row in enumerate(rows):
                v = int(block.src_global_ids[rel.dst][i])
                assert Counter(row) == true_in_edges(rel, v)
    # the 2-hop node sets equal a brute-force BFS over in-edges
    reached = {t: set(ids.tolist()) for t, ids in SEEDS.items()}
    for _ in range(2):
        grown = {t: set(s) for t, s in reached.items()}
        for rel, (src, dst, *_) in LISTS.items():
            grown[rel.src] |= set(src[np.isin(dst, list(reached[rel.dst]))].tolist())
        reached = grown
    assert {t: set(ids.tolist()) for t, ids in blocks[0].src_global_ids.items()} == (
        reached
    )
    assert_same_blocks(blocks, full_blocks(GRAPH, SEEDS, 2))


def test_full_graph_block_is_the_graph():
    block = full_graph_block(GRAPH)
    for t, n in NUM_NODES.items():
        assert block.num_dst[t] == n
        np.testing.assert_array_equal(block.src_global_ids[t], np.arange(n))
    assert block.relations[FEED] is GRAPH.relations[FEED]
    assert block.num_edges == GRAPH.num_edges()


def test_seeds_of_one_type_and_empty_types():
    blocks = TypedNeighborSampler(GRAPH, [2], seed=0).sample(
        {"user": np.array([1, 2])}, 0, 0
    )
    assert blocks[0].num_dst == {"item": 0, "user": 2}
    assert blocks[0].relations[FEED].num_edges == 0  # no item destinations
    assert blocks[0].num_src("item") > 0


@pytest.mark.parametrize(
    ("seeds", "match"),
    [
        ({"shop": np.array([0])}, "node types among"),
        ({"user": np.array([60])}, r"ids in \[0, 60\)"),
        ({"item": np.array([1.0])}, "integer node ids"),
        ({"user": np.array([[1]])}, "1-D"),
        ({"user": np.array([4, 2, 4])}, "node 4 repeated at position 2"),
    ],
)
def test_bad_seeds(seeds, match):
    sampler = TypedNeighborSampler(GRAPH, [2, 2], seed=0)
    with pytest.raises(OperatorError, match=match):
        sampler.sample(seeds, 0, 0)
    # a failed call leaves the scratch maps clean: the next batch is unaffected
    assert_same_blocks(
        sampler.sample(SEEDS, 0, 0),
        TypedNeighborSampler(GRAPH, [2, 2], seed=0).sample(SEEDS, 0, 0),
    )


def test_bad_fanouts():
    with pytest.raises(OperatorError, match="missing"):
        TypedNeighborSampler(GRAPH, {FEED: [2]})
    with pytest.raises(OperatorError, match="same number of layers"):
        TypedNeighborSampler(GRAPH, {r: [2] * (1 + (r == CO)) for r in GRAPH.relations})
    with pytest.raises(OperatorError, match="fan-outs >= 1"):
        TypedNeighborSampler(GRAPH, [0, 2])
    with pytest.raises(OperatorError, match="TypedGraph"):
        TypedNeighborSampler(object(), [2])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "name", ["strata.operators.samplers.typed", "strata.operators.samplers.typed_block"]
)
def test_doctests(name):
    result = doctest.testmod(
        importlib.import_module(name), optionflags=doctest.ELLIPSIS
    )
    assert result.failed == 0
    assert result.attempted > 0


@pytest.mark.parametrize("replace", [False, True])
def test_one_relation_draws_exactly_what_neighbor_sampler_draws(replace):
    """The same kernel, key and salts: a 1-type graph gives identical blocks."""
    from strata.operators.samplers import NeighborSampler, SamplerConfig
    from strata.storage import CSRGraph

    rng = np.random.default_rng(5)
    src, dst = rng.integers(0, 80, 900), rng.integers(0, 80, 900)
    rel = Relation("node", "to", "node")
    typed = TypedNeighborSampler(
        TypedGraph.from_edges({rel: (src, dst)}, {"node": 80}),
        [4, 3],
        seed=11,
        replace=replace,
    )
    flat = NeighborSampler(
        CSRGraph.from_edges(src, dst, 80),
        SamplerConfig(fanouts=(4, 3), replace=replace),
        seed=11,
    )
    seeds = np.array([5, 0, 77, 31])
    for a, b in zip(
        typed.sample({"node": seeds}, 3, 2), flat.sample(seeds, 3, 2), strict=True
    ):
        np.testing.assert_array_equal(a.src_global_ids["node"], b.src_global_ids)
        np.testing.assert_array_equal(a.relations[rel].indptr, b.indptr)
        np.testing.assert_array_equal(a.relations[rel].indices, b.indices)
        assert a.num_dst["node"] == b.num_dst
