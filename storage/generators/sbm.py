"""Planted-community (stochastic block model style) graphs.

Nodes are split into ``num_blocks`` balanced communities. Each of
``num_nodes * avg_degree / 2`` sampled edges starts at a uniformly random node and ends,
with probability ``intra_fraction``, at a uniform node of the same block, otherwise at
a uniform node of another block. The edges are then symmetrised with loops and
duplicates removed, giving a simple undirected graph whose mean degree is close to
``avg_degree`` (slightly below it when duplicates are drawn) and whose communities are
recoverable when ``intra_fraction`` is well above ``1 / num_blocks``.

This is the planted-partition model sampled by edge count rather than by one Bernoulli
trial per pair, which costs ``O(num_edges)`` instead of ``O(num_nodes**2)``.

References:
    Holland, Laskey and Leinhardt, "Stochastic blockmodels: First steps",
    Social Networks 5(2), 1983. Condon and Karp, "Algorithms for graph partitioning on
    the planted partition model", Random Structures & Algorithms 18(2), 2001.

Examples:
    >>> g, blocks = sbm(1000, 4, avg_degree=10, intra_fraction=0.9, seed=0)
    >>> g.num_nodes, g.is_symmetric(), g.has_self_loops()
    (1000, True, False)
    >>> import numpy as np
    >>> np.bincount(blocks).tolist()
    [250, 250, 250, 250]
    >>> src, dst = g.to_coo()
    >>> bool((blocks[src] == blocks[dst]).mean() > 0.85)
    True
"""

from __future__ import annotations

import numpy as np

from strata.storage._types import Int64Array
from strata.storage.csr import CSRGraph, DuplicatePolicy, SelfLoopPolicy
from strata.storage.errors import GraphError

_WHERE = "sbm"


def _random_member(
    rng: np.random.Generator,
    block: Int64Array,
    members: Int64Array,
    start: Int64Array,
    size: Int64Array,
) -> Int64Array:
    """Pick one uniform member of each requested block."""
    offset = (rng.random(block.shape[0]) * size[block]).astype(np.int64)
    picked: Int64Array = members[start[block] + offset]
    return picked


def sbm(
    num_nodes: int,
    num_blocks: int,
    avg_degree: float = 10.0,
    intra_fraction: float = 0.8,
    *,
    seed: int = 0,
    permute: bool = True,
) -> tuple[CSRGraph, Int64Array]:
    """Generate a simple undirected graph with planted communities.

    Args:
        num_nodes: node count.
        num_blocks: community count, ``1 <= num_blocks <= num_nodes``.
        avg_degree: target mean (undirected) degree.
        intra_fraction: probability that a sampled edge stays inside its block
            (ignored when there is one block).
        seed: random seed.
        permute: assign communities to random node ids; ``False`` makes block ``k``
            the contiguous id range ``[k * n / B, (k + 1) * n / B)``.

    Returns:
        ``(graph, blocks)``: the graph and each node's int64 community in
        ``[0, num_blocks)`` (block sizes differ by at most one).

    Raises:
        GraphError: on out-of-range arguments.
    """
    if num_nodes < 1:
        raise GraphError.build("num_nodes", _WHERE, "num_nodes >= 1", str(num_nodes))
    if not 1 <= num_blocks <= num_nodes:
        raise GraphError.build(
            "num_blocks", _WHERE, f"1 <= num_blocks <= {num_nodes}", str(num_blocks)
        )
    if not avg_degree >= 0:
        raise GraphError.build("avg_degree", _WHERE, "avg_degree >= 0", str(avg_degree))
    if not 0.0 <= intra_fraction <= 1.0:
        raise GraphError.build(
            "intra_fraction", _WHERE, "0 <= intra_fraction <= 1", str(intra_fraction)
        )
    rng = np.random.default_rng(seed)
    blocks = np.arange(num_nodes, dtype=np.int64) * num_blocks // num_nodes
    if permute:
        blocks = rng.permutation(blocks)
    members = np.argsort(blocks, kind="stable").astype(np.int64)
    size = np.bincount(blocks, minlength=num_blocks).astype(np.int64)
    start = np.concatenate([[0], np.cumsum(size)[:-1]]).astype(np.int64)

    num_samples = round(num_nodes * avg_degree / 2)
    src = rng.integers(0, num_nodes, size=num_samples, dtype=np.int64)
    src_block = blocks[src]
    if num_blocks > 1:
        inter = rng.random(num_samples) >= intra_fraction
        # A uniform *other* block: shift by 1..B-1 modulo B.
        shift = rng.integers(1, num_blocks, size=num_samples, dtype=np.int64)
        dst_block = np.where(inter, (src_block + shift) % num_blocks, src_block)
    else:
        dst_block = src_block
    dst = _random_member(rng, dst_block, members, start, size)
    graph = CSRGraph.from_edges(
        src,
        dst,
        num_nodes,
        symmetrize=True,
        self_loops=SelfLoopPolicy.REMOVE,
        duplicates=DuplicatePolicy.REMOVE,
    )
    return graph, blocks
