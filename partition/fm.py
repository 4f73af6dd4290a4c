"""k-way FM local search with rollback (the hill climbing METIS's k-way lacks).

Greedy k-way refinement (``refine.py``) only takes moves that do not raise the
cut, so it stops in the first local minimum: a group of vertices that should
change part together (a friend circle on a social graph) never moves when each
single move costs a little. FM search, as KaHIP's k-way local search does, keeps
moving the best vertex even at a loss, locks each moved vertex for the rest of the
pass, and at the end rolls back to the lowest cut seen:

1. queue every boundary vertex by its best gain ``ned[q] - id`` over the parts
   ``q`` it touches that have room under every cap;
2. pop the best, move it (update the neighbours' gains), remember the move;
3. stop after ``limit`` moves without a new best cut (or an empty queue);
4. undo the moves after the best prefix.

Moves keep every part under its cap (both caps with an edge constraint), so the
best prefix is always balanced. A pass costs O(moves * degree * log n).

References:
    Fiduccia and Mattheyses, "A Linear-Time Heuristic for Improving Network
    Partitions", DAC 1982. Sanders and Schulz, "Engineering Multilevel Graph
    Partitioning Algorithms", ESA 2011 (KaFFPa's k-way FM local search).

Examples:
    >>> import numpy as np
    >>> from strata.storage import CSRGraph
    >>> from strata.partition._graph import prepare
    >>> from strata.partition._rng import new_state
    >>> from strata.partition.refine import level_bounds, new_info
    >>> src = np.arange(40); dst = (src + 1) % 40                # a ring of 40
    >>> _, g = prepare(CSRGraph.from_edges(src, dst), 2, None, "doc")
    >>> where = ((np.arange(40) // 5) % 2).astype(np.int32)     # cut = 8
    >>> info, cut = new_info(g, where, 2)
    >>> bounds = level_bounds(info, 22, 0.1, None)
    >>> fm_refine(g, info, bounds, cut, 4, 50, new_state(0)) < cut
    True
"""

from __future__ import annotations

import numpy as np

from strata.partition._graph import NO_VWGT2, WeightedCSR
from strata.partition._jit import njit
from strata.partition._pq import pq_delete, pq_insert, pq_new, pq_pop, pq_update
from strata.partition._rng import shuffle
from strata.partition.refine import Bounds, KWayInfo, move_vertex


@njit(cache=True)
def _best_move(
    v: int,
    vwgt: np.ndarray,
    vwgt2: np.ndarray,
    idg: np.ndarray,
    nnbrs: np.ndarray,
    nstart: np.ndarray,
    npart: np.ndarray,
    ned: np.ndarray,
    pwgts: np.ndarray,
    pwgts2: np.ndarray,
    maxpw: np.ndarray,
    maxpw2: np.ndarray,
) -> tuple[int, int]:
    """``(slot, gain)`` of v's best move to a part with room (slot -1: none)."""
    two = vwgt2.shape[0] > 0
    base = nstart[v]
    best = -1
    best_gain = 0
    for j in range(nnbrs[v]):
        p = npart[base + j]
        if pwgts[p] + vwgt[v] > maxpw[p]:
            continue
        if two and pwgts2[p] + vwgt2[v] > maxpw2[p]:
            continue
        gain = ned[base + j] - idg[v]
        if (
            best < 0
            or gain > best_gain
            or (gain == best_gain and pwgts[p] < pwgts[npart[base + best]])
        ):
            best = j
            best_gain = gain
    return best, best_gain


@njit(cache=True)
def _excess(
    p: int,
    pwgts: np.ndarray,
    maxpw: np.ndarray,
    pwgts2: np.ndarray,
    maxpw2: np.ndarray,
    two: bool,
) -> int:
    """Weight of part ``p`` above its caps (both constraints added up)."""
    over = max(0, pwgts[p] - maxpw[p])
    if two:
        over += max(0, pwgts2[p] - maxpw2[p])
    return int(over)


@njit(cache=True)
def fm_kway(
    xadj: np.ndarray,
    adjncy: np.ndarray,
    adjwgt: np.ndarray,
    vwgt: np.ndarray,
    where: np.ndarray,
    idg: np.ndarray,
    edg: np.ndarray,
    nnbrs: np.ndarray,
    nstart: np.ndarray,
    npart: np.ndarray,
    ned: np.ndarray,
    pwgts: np.ndarray,
    maxpw: np.ndarray,
    vwgt2: np.ndarray,
    pwgts2: np.ndarray,
    maxpw2: np.ndarray,
    passes: int,
    limit: int,
    cut: int,
    state: np.ndarray,
) -> int:
    """Run up to ``passes`` FM passes (module doc); return the cut.

    A pass may start with a part over its cap (a coarse level's refinement may
    overshoot by its fudge); a prefix counts as a new best only if it is no
    further over the caps than the start.
    """
    k = pwgts.shape[0]
    two = vwgt2.shape[0] > 0
    graph = (xadj, adjncy, adjwgt, vwgt, vwgt2)
    info = (where, idg, edg, nnbrs, nstart, npart, ned, pwgts, pwgts2)
    n = xadj.shape[0] - 1
    heap, keys, pos, size = pq_new(n)
    locked = np.zeros(n, dtype=np.bool_)
    moved = np.empty(n, dtype=np.int64)
    origin = np.empty(n, dtype=np.int32)
    bnd = np.empty(n, dtype=np.int64)
    for _ in range(passes):
        nb = 0
        for v in range(n):
            if edg[v] > 0:
                bnd[nb] = v
                nb += 1
        order = bnd[:nb].copy()
        shuffle(state, order)
        for v in order:
            _, g = _best_move(
                v, vwgt, vwgt2, idg, nnbrs, nstart, npart, ned,
                pwgts, pwgts2, maxpw, maxpw2,
            )  # fmt: skip
            pq_insert(heap, keys, pos, size, v, float(g))
        over = 0
        for p in range(k):
            over += _excess(p, pwgts, maxpw, pwgts2, maxpw2, two)
        start_over = over
        start_cut = cut
        best_cut = cut
        best_len = 0
        count = 0
        while size[0] > 0 and count - best_len <= limit:
            v = pq_pop(heap, keys, pos, size)
            slot, _ = _best_move(
                v, vwgt, vwgt2, idg, nnbrs, nstart, npart, ned,
                pwgts, pwgts2, maxpw, maxpw2,
            )  # fmt: skip
            if slot < 0:
                continue
            src = where[v]
            dst = npart[nstart[v] + slot]
            origin[count] = src
            moved[count] = v
            count += 1
            locked[v] = True
            for p in (src, dst):
                over -= _excess(p, pwgts, maxpw, pwgts2, maxpw2, two)
            cut -= move_vertex(graph, info, v, slot)
            for p in (src, dst):
                over += _excess(p, pwgts, maxpw, pwgts2, maxpw2, two)
            if over <= start_over and cut < best_cut:
                best_cut = cut
                best_len = count
            for e in range(xadj[v], xadj[v + 1]):
                u = adjncy[e]
                if locked[u]:
                    continue
                if edg[u] > 0:
                    _, g = _best_move(
                        u, vwgt, vwgt2, idg, nnbrs, nstart, npart, ned,
                        pwgts, pwgts2, maxpw, maxpw2,
                    )  # fmt: skip
                    if pos[u] >= 0:
                        pq_update(heap, keys, pos, size, u, float(g))
                    else:
                        pq_insert(heap, keys, pos, size, u, float(g))
                elif pos[u] >= 0:
                    pq_delete(heap, keys, pos, size, u)
        while size[0] > 0:
            pq_pop(heap, keys, pos, size)
        for i in range(count - 1, best_len - 1, -1):  # roll back past the best
            v = moved[i]
            back = origin[i]
            base = nstart[v]
            slot = -1
            for j in range(nnbrs[v]):
                if npart[base + j] == back:
                    slot = j
                    break
            if slot < 0:  # no neighbour left in its old part: a zero entry
                slot = nnbrs[v]
                npart[base + slot] = back
                ned[base + slot] = 0
                nnbrs[v] = slot + 1
            cut -= move_vertex(graph, info, v, slot)
        for i in range(count):
            locked[moved[i]] = False
        if cut >= start_cut:
            break
    return cut


def fm_refine(
    graph: WeightedCSR,
    info: KWayInfo,
    bounds: Bounds,
    cut: int,
    passes: int,
    limit: int,
    state: np.ndarray,
) -> int:
    """FM passes on one level's state (updated in place); return the cut."""
    two = bounds.maxpw2.shape[0] > 0
    return int(
        fm_kway(
            graph.xadj,
            graph.adjncy,
            graph.adjwgt,
            graph.vwgt,
            info.where,
            info.idg,
            info.edg,
            info.nnbrs,
            info.nstart,
            info.npart,
            info.ned,
            info.pwgts,
            bounds.maxpw,
            graph.vwgt2 if two else NO_VWGT2,
            info.pwgts2 if two else NO_VWGT2,
            bounds.maxpw2,
            passes,
            limit,
            cut,
            state,
        )
    )
