"""The typed user-item graph of ``e2egrec.md`` §4.1, from train interactions only.

Relations (for domains ``feed`` and ``search``):

* ``user -engaged_feed-> item`` and ``user -engaged_search-> item``: a user's train
  interactions with items of that domain (one relation per domain);
* their reverses ``item -rev_engaged_feed-> user``, ``item -rev_engaged_search->
  user``;
* ``item -co_engaged-> item``: every item's 10 most co-engaged items, by the cosine
  ``c_ij / sqrt(n_i n_j)`` of train co-occurrence counts (``c_ij`` users who
  engaged both, ``n_i`` users who engaged ``i``), across domains; edges run from
  the neighbour to the item (the item aggregates its top 10), weighted by cosine.

Only :func:`strata.operators.recsys.split.train_pairs` is read (pitfall 1).

Examples:
    >>> from strata.operators.recsys.synth import SynthConfig, synth_interactions
    >>> from strata.operators.recsys.split import temporal_split
    >>> split = temporal_split(synth_interactions(SynthConfig.smoke(), seed=0))
    >>> graph = build_typed_graph(split)
    >>> [str(r) for r in graph.relations]  # doctest: +NORMALIZE_WHITESPACE
    ['item-co_engaged->item', 'item-rev_engaged_feed->user',
     'item-rev_engaged_search->user', 'user-engaged_feed->item',
     'user-engaged_search->item']
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from strata.operators.recsys.split import Split, train_pairs
from strata.storage._types import Float32Array, Int64Array
from strata.storage.hetero import Relation, TypedGraph

__all__ = ["CO_ENGAGED", "build_typed_graph", "co_engagement", "engaged"]

CO_ENGAGED = Relation("item", "co_engaged", "item")


def engaged(domain: str) -> Relation:
    """The relation ``user -engaged_<domain>-> item``."""
    return Relation("user", f"engaged_{domain}", "item")


def co_engagement(
    user: Int64Array, item: Int64Array, num_users: int, num_items: int, top: int = 10
) -> tuple[Int64Array, Int64Array, Float32Array]:
    """Each item's ``top`` co-engaged items by cosine, as ``(src, dst, weight)``.

    ``dst`` is the item, ``src`` one of its top neighbours (ties: lower id first);
    self pairs and zero co-occurrence are left out; repeated pairs count once.

    Examples:
        >>> u, i = np.array([0, 0, 1, 1, 2]), np.array([0, 1, 0, 1, 2])
        >>> src, dst, w = co_engagement(u, i, 3, 3, top=1)
        >>> src.tolist(), dst.tolist(), w.round(3).tolist()
        ([1, 0], [0, 1], [1.0, 1.0])
    """
    ones = np.ones(user.shape[0], dtype=np.float64)
    engagement = sp.csr_matrix((ones, (user, item)), shape=(num_users, num_items))
    engagement.data[:] = 1.0  # duplicates were summed: binary again
    counts = np.asarray(engagement.sum(axis=0)).ravel()
    co = (engagement.T @ engagement).tocoo()
    keep = (co.row != co.col) & (co.data > 0)
    dst, src, c = co.row[keep], co.col[keep], co.data[keep]
    cosine = c / np.sqrt(counts[dst] * counts[src])
    order = np.lexsort((src, -cosine, dst))
    dst, src, cosine = dst[order], src[order], cosine[order]
    starts = np.searchsorted(dst, dst, side="left")
    rank = np.arange(dst.shape[0]) - starts
    best = rank < top
    return (
        src[best].astype(np.int64),
        dst[best].astype(np.int64),
        cosine[best].astype(np.float32),
    )


def build_typed_graph(split: Split, co_engaged_top: int = 10) -> TypedGraph:
    """The typed train graph: engaged relations per domain, reverses, co-engaged.

    Args:
        split: the temporal split; only its train interactions are read.
        co_engaged_top: neighbours kept per item in ``co_engaged``.

    Returns:
        The graph with node types ``user`` and ``item``.
    """
    inter = split.inter
    user, item = train_pairs(split)
    num_nodes = {"user": inter.num_users, "item": inter.num_items}
    domain = inter.item_domain[item]
    edges: dict[
        Relation,
        tuple[np.ndarray, np.ndarray] | tuple[np.ndarray, np.ndarray, np.ndarray],
    ] = {}
    for index, name in enumerate(inter.domains):
        mine = domain == index
        edges[engaged(name)] = (user[mine], item[mine])
    edges[CO_ENGAGED] = co_engagement(
        user, item, inter.num_users, inter.num_items, co_engaged_top
    )
    graph = TypedGraph.from_edges(edges, num_nodes)
    for name in inter.domains:
        graph = graph.with_reverse(engaged(name), f"rev_engaged_{name}")
    return graph
