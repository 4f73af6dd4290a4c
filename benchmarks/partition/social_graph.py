"""A generated stand-in for SNAP's ego-Facebook (offline machines cannot download it).

ego-Facebook (McAuley and Leskovec, NIPS 2012; snap.stanford.edu/data/ego-Facebook)
has 4,039 vertices and 88,234 undirected edges: the union of 10 ego networks, each
an *ego* (connected to every member of its network) plus friend *circles*
(dense, overlapping groups), average degree 43.7, heavy-tailed degrees, and few
edges between ego networks. The generator keeps those traits:

* 10 ego networks with sizes drawn log-normally (largest about 1,000 members),
  each split into circles of 15-150 members (log-normal sizes);
* each vertex has a degree propensity ``theta`` from a Pareto law (exponent 2.5);
* every ego is joined to all members of its network;
* the other edges start at a vertex drawn by ``theta``; the other end is drawn
  by ``theta`` inside the same circle (``p_circle``), the same ego network
  (``p_ego``) or anywhere (the rest, 0.2%);
* loops and duplicates are dropped and the edge set trimmed to ``num_edges``.

The defaults were calibrated against the two published statistics we know:
average clustering 0.619 (ego-Facebook: 0.606) and KaHIP ECOSOCIAL's k = 8 cut
of 0.032-0.035 over seeds 1-3 (0.0345 on ego-Facebook, issue 15). It is a
substitute, not the dataset: cut figures on it compare partitioners with
each other, not with numbers published for ego-Facebook.

Examples:
    >>> g = social_graph(seed=0)
    >>> g.num_nodes, g.num_edges // 2
    (4039, 88234)
"""

from __future__ import annotations

import numpy as np

from strata.storage import CSRGraph, DuplicatePolicy, SelfLoopPolicy

#: ego-Facebook's size.
NUM_NODES = 4039
NUM_EDGES = 88234


def _split(total: int, count: int, sigma: float, rng: np.random.Generator) -> list[int]:
    """``count`` positive log-normal sizes that sum to ``total``."""
    raw = rng.lognormal(0.0, sigma, count)
    sizes = np.maximum(1, np.floor(raw / raw.sum() * total)).astype(np.int64)
    sizes[np.argmax(sizes)] += total - int(sizes.sum())
    return [int(s) for s in sizes]


def _draw_within(
    cum: np.ndarray, start: np.ndarray, stop: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Per row, a position in ``[start, stop)`` drawn by the weights behind ``cum``."""
    low = np.where(start > 0, cum[np.maximum(start - 1, 0)], 0.0)
    high = cum[stop - 1]
    target = low + rng.random(start.shape[0]) * (high - low)
    pos = np.searchsorted(cum, target, side="right")
    return np.clip(pos, start, stop - 1)


def social_graph(
    num_nodes: int = NUM_NODES,
    num_edges: int = NUM_EDGES,
    *,
    egos: int = 10,
    p_circle: float = 0.97,
    p_ego: float = 0.028,
    seed: int = 0,
) -> CSRGraph:
    """The ego-network graph described in the module doc (undirected, simple)."""
    rng = np.random.default_rng(seed)
    ego_sizes = _split(num_nodes, egos, 0.8, rng)
    ego_of = np.repeat(np.arange(egos), ego_sizes)
    circle_of = np.empty(num_nodes, dtype=np.int64)
    start = 0
    circles = 0
    for size in ego_sizes:
        count = max(1, round(size / 60))
        for c in _split(size, count, 0.6, rng):
            circle_of[start : start + c] = circles
            start += c
            circles += 1
    theta = (rng.pareto(1.5, num_nodes) + 1.0).clip(max=200.0)
    cum = np.cumsum(theta)
    ego_start = np.concatenate([[0], np.cumsum(ego_sizes)[:-1]])
    ego_stop = np.cumsum(ego_sizes)
    circle_sizes = np.bincount(circle_of, minlength=circles)
    circle_stop = np.cumsum(circle_sizes)
    circle_start = circle_stop - circle_sizes
    # Each ego (its network's first vertex) knows every member.
    star_src = np.repeat(ego_start, ego_sizes)
    star_dst = np.arange(num_nodes)
    star = np.unique(np.minimum(star_src, star_dst) * num_nodes
                     + np.maximum(star_src, star_dst))  # fmt: skip
    star = star[star // num_nodes != star % num_nodes]
    key = star
    while key.shape[0] < num_edges:  # draw until enough distinct edges
        draws = 2 * (num_edges - key.shape[0]) + 1000
        src = np.searchsorted(cum, rng.random(draws) * cum[-1], side="right")
        src = np.minimum(src, num_nodes - 1)
        scope = rng.random(draws)
        lo = np.zeros(draws, dtype=np.int64)
        hi = np.full(draws, num_nodes, dtype=np.int64)
        in_circle = scope < p_circle
        in_ego = (scope >= p_circle) & (scope < p_circle + p_ego)
        lo[in_circle] = circle_start[circle_of[src[in_circle]]]
        hi[in_circle] = circle_stop[circle_of[src[in_circle]]]
        lo[in_ego] = ego_start[ego_of[src[in_ego]]]
        hi[in_ego] = ego_stop[ego_of[src[in_ego]]]
        dst = _draw_within(cum, lo, hi, rng)
        keep = src != dst
        a = np.minimum(src[keep], dst[keep])
        b = np.maximum(src[keep], dst[keep])
        key = np.union1d(key, a * num_nodes + b)
    if key.shape[0] > num_edges:  # trim at random, keeping the ego stars
        rest = np.setdiff1d(key, star)
        pick = rng.choice(rest.shape[0], num_edges - star.shape[0], replace=False)
        key = np.concatenate([star, rest[pick]])
    perm = rng.permutation(num_nodes)  # ids carry no community information
    a = perm[key // num_nodes]
    b = perm[key % num_nodes]
    return CSRGraph.from_edges(
        a,
        b,
        num_nodes,
        symmetrize=True,
        self_loops=SelfLoopPolicy.REMOVE,
        duplicates=DuplicatePolicy.REMOVE,
    )
