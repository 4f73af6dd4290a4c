"""The F-ary fan-out / merge tree for keys pulled by many ranks (tdorch.md §4).

When R ranks pull key k and ``R > F``, the owner sends the copy to F ranks
only; each forwards it to at most F more. The requesters are ordered by
``hash(k, rank)`` (different hot keys get different trees, so the interior work
spreads out) and laid out as a heap: node 0 is the owner, node ``j >= 1`` is
the j-th requester in that order, and node n's children are nodes
``n F + 1 .. n F + F``. Deltas travel back up the same tree, folded at every hop.

All functions are vectorised over many (key, requester) pairs at once.

>>> members = tree_members(np.array([9, 9, 9, 9]), np.array([0, 1, 2, 3]))
>>> sorted(members.tolist()) == [0, 1, 2, 3]
True
>>> children(np.array([0, 1, 2]), n_nodes=np.array([5, 5, 5]), fanout=2)
(array([0, 0, 1, 1]), array([1, 2, 3, 4]))
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from strata.operators.orchestration.plan import IntArray, mix64


def tree_members(keys: npt.ArrayLike, requesters: npt.ArrayLike) -> IntArray:
    """Order ``(key, requester)`` pairs by key, then by ``hash(key, requester)``.

    Returns the permutation that sorts the pairs so; within one key the
    requesters then come in tree order (node 1, 2, ...).
    """
    k = np.asarray(keys, dtype=np.int64)
    r = np.asarray(requesters, dtype=np.int64)
    h = mix64(mix64(k) ^ r.astype(np.uint64))
    return np.lexsort((r, h, k)).astype(np.int64)


def depth_of(node: npt.ArrayLike, fanout: int) -> IntArray:
    """Depth of heap node(s): the owner (node 0) is at depth 0.

    >>> depth_of(np.array([0, 1, 2, 3, 6, 7]), 2).tolist()
    [0, 1, 1, 2, 2, 3]
    """
    n = np.asarray(node, dtype=np.int64)
    d = np.zeros_like(n)
    first = np.zeros_like(n)  # first node of the current depth
    width = np.ones_like(n)
    while True:
        below = n >= first + width
        if not below.any():
            return d
        first = np.where(below, first + width, first)
        width = np.where(below, width * fanout, width)
        d = d + below


def parent(node: npt.ArrayLike, fanout: int) -> IntArray:
    """Parent heap node of node(s) ``>= 1``.

    >>> parent(np.array([1, 2, 3, 4, 5]), 2).tolist()
    [0, 0, 1, 1, 2]
    """
    return (np.asarray(node, dtype=np.int64) - 1) // fanout


def children(
    nodes: npt.ArrayLike, n_nodes: npt.ArrayLike, fanout: int
) -> tuple[IntArray, IntArray]:
    """Children of each heap node in trees of ``n_nodes`` nodes (owner included).

    Returns ``(which, child)``: ``child[i]`` is a child of ``nodes[which[i]]``.
    """
    n = np.asarray(nodes, dtype=np.int64)
    total = np.asarray(n_nodes, dtype=np.int64)
    first = n * fanout + 1
    count = np.clip(total - first, 0, fanout)
    which = np.repeat(np.arange(n.shape[0], dtype=np.int64), count)
    offsets = np.cumsum(count) - count
    within = np.arange(which.shape[0], dtype=np.int64) - offsets[which]
    return which, first[which] + within


def max_depth(size: int, fanout: int | None) -> int:
    """Deepest requester depth any key can reach on ``size`` ranks (1: no tree).

    >>> max_depth(4, 2), max_depth(16, 16), max_depth(256, 16)
    (2, 1, 2)
    """
    if fanout is None or size - 1 <= fanout:
        return 1
    return int(depth_of(np.array([size - 1]), fanout)[0])
