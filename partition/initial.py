"""Initial k-way partition of the coarsest graph by recursive multilevel bisection.

As METIS 5.2.1 does for its k-way scheme (``InitKWayPartitioning``), the coarsest
graph is split by recursive bisection, each bisection being itself multilevel:

1. coarsen the (sub)graph to about 20 vertices (same matchings as ``coarsen.py``);
2. grow a region by BFS from a random vertex until part 1 is light enough, then
   balance and run 4 FM passes; keep the best of 5 (small graphs) or 7 tries;
3. project back level by level, balancing and running up to 10 FM passes at each;
4. repeat steps 1-3 ``tries`` times (4 or 5; 3 on graphs of at most
   ``CoarsenConfig.small_graph`` vertices) and keep the lowest cut that is
   balanced within the per-bisection tolerance ``(1 + eps) ** (1 / ln k)``.

FM is the classic two-queue Fiduccia-Mattheyses pass: always move from the side
that is heavier relative to its target, allow negative gains, stop after ``limit``
moves without improvement and roll back to the best prefix.

References:
    Karypis and Kumar, "A Fast and High Quality Multilevel Scheme for Partitioning
    Irregular Graphs", SIAM J. Sci. Comput. 20(1), 1998. Fiduccia and Mattheyses,
    "A Linear-Time Heuristic for Improving Network Partitions", DAC 1982.
    METIS 5.2.1 (``libmetis/pmetis.c``, ``initpart.c``, ``fm.c``, ``balance.c``).

Examples:
    >>> import numpy as np
    >>> from strata.storage import CSRGraph
    >>> from strata.partition._graph import prepare
    >>> from strata.partition._rng import new_state
    >>> src = np.arange(40); dst = (src + 1) % 40          # a ring of 40
    >>> _, g = prepare(CSRGraph.from_edges(src, dst), 4, None, "doc")
    >>> where = recursive_bisection(g, 4, InitialConfig(), 0.03, new_state(0))
    >>> np.bincount(where).tolist(), int((where[src] != where[dst]).sum())
    ([10, 10, 10, 10], 4)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from strata.partition._graph import WeightedCSR
from strata.partition._jit import njit
from strata.partition._pq import (
    pq_clear,
    pq_delete,
    pq_insert,
    pq_new,
    pq_pop,
    pq_update,
)
from strata.partition._rng import rand_below, shuffle
from strata.partition._types import Int32Array
from strata.partition.coarsen import coarsen_once


@dataclass(frozen=True, slots=True)
class InitialConfig:
    """Constants of the initial partitioning (METIS 5.2.1 defaults).

    Attributes:
        tries: multilevel bisections per split, best kept (``None``: 4 when the
            coarsest graph is at ``30 k`` vertices, else 5, as METIS).
        grow_tries_small: region-growing tries on a coarsest graph <= ``coarsen_to``.
        grow_tries_large: region-growing tries otherwise.
        coarsen_to: target size of each bisection's own coarsening.
        fm_passes: FM passes per level while uncoarsening a bisection.
        grow_fm_passes: FM passes after each region-growing try.
        small_tries: ``tries`` when the graph has at most
            ``CoarsenConfig.small_graph`` vertices; its coarsest graph is then
            twice as large, so each try costs more (on Cora: 3 tries keep the
            time near pymetis's at the same cut as 5).
    """

    tries: int | None = None
    grow_tries_small: int = 5
    grow_tries_large: int = 7
    coarsen_to: int = 20
    fm_passes: int = 10
    grow_fm_passes: int = 4
    small_tries: int = 3


@njit(cache=True)
def _two_way_params(
    xadj: np.ndarray,
    adjncy: np.ndarray,
    adjwgt: np.ndarray,
    vwgt: np.ndarray,
    where: np.ndarray,
    idg: np.ndarray,
    edg: np.ndarray,
    pwgts: np.ndarray,
) -> int:
    """Internal/external degrees and part weights; return the cut."""
    n = xadj.shape[0] - 1
    pwgts[0] = 0
    pwgts[1] = 0
    cut = 0
    for v in range(n):
        me = where[v]
        pwgts[me] += vwgt[v]
        i = 0
        x = 0
        for e in range(xadj[v], xadj[v + 1]):
            if where[adjncy[e]] == me:
                i += adjwgt[e]
            else:
                x += adjwgt[e]
        idg[v] = i
        edg[v] = x
        cut += x
    return cut // 2


@njit(cache=True)
def _move_2way(
    xadj: np.ndarray,
    adjncy: np.ndarray,
    adjwgt: np.ndarray,
    where: np.ndarray,
    idg: np.ndarray,
    edg: np.ndarray,
    v: int,
    to: int,
) -> None:
    """Move ``v`` to side ``to`` and update the degrees of its neighbours."""
    where[v] = to
    tmp = idg[v]
    idg[v] = edg[v]
    edg[v] = tmp
    for e in range(xadj[v], xadj[v + 1]):
        u = adjncy[e]
        w = adjwgt[e]
        if where[u] == to:
            idg[u] += w
            edg[u] -= w
        else:
            idg[u] -= w
            edg[u] += w


@njit(cache=True)
def _balance_2way(
    xadj: np.ndarray,
    adjncy: np.ndarray,
    adjwgt: np.ndarray,
    vwgt: np.ndarray,
    where: np.ndarray,
    idg: np.ndarray,
    edg: np.ndarray,
    pwgts: np.ndarray,
    target0: int,
    frac0: float,
    ub: float,
    cut: int,
    state: np.ndarray,
) -> int:
    """Move the best-gain vertices off the heavy side until it meets its target."""
    n = xadj.shape[0] - 1
    tvwgt = pwgts[0] + pwgts[1]
    if pwgts[0] <= ub * tvwgt * frac0 and pwgts[1] <= ub * tvwgt * (1.0 - frac0):
        return cut
    if abs(target0 - pwgts[0]) < 3 * tvwgt / n:
        return cut
    targets = (target0, tvwgt - target0)
    src = 1 if pwgts[0] < target0 else 0
    dst = 1 - src
    boundary_only = False
    for v in range(n):
        if edg[v] > 0:
            boundary_only = True
            break
    cand = np.empty(n, dtype=np.int64)
    count = 0
    for v in range(n):
        if where[v] == src and (edg[v] > 0 or not boundary_only):
            cand[count] = v
            count += 1
    cand = cand[:count]
    shuffle(state, cand)
    heap, keys, pos, size = pq_new(n)
    for v in cand:
        pq_insert(heap, keys, pos, size, v, float(edg[v] - idg[v]))
    while size[0] > 0:
        v = pq_pop(heap, keys, pos, size)
        if pwgts[dst] + vwgt[v] > targets[dst]:
            break
        cut -= edg[v] - idg[v]
        pwgts[dst] += vwgt[v]
        pwgts[src] -= vwgt[v]
        _move_2way(xadj, adjncy, adjwgt, where, idg, edg, v, dst)
        for e in range(xadj[v], xadj[v + 1]):
            u = adjncy[e]
            if where[u] != src:
                continue
            if pos[u] >= 0:
                if boundary_only and edg[u] == 0:
                    pq_delete(heap, keys, pos, size, u)
                else:
                    pq_update(heap, keys, pos, size, u, float(edg[u] - idg[u]))
            elif boundary_only and edg[u] > 0:
                pq_insert(heap, keys, pos, size, u, float(edg[u] - idg[u]))
    return cut


@njit(cache=True)
def _fm_2way(
    xadj: np.ndarray,
    adjncy: np.ndarray,
    adjwgt: np.ndarray,
    vwgt: np.ndarray,
    where: np.ndarray,
    idg: np.ndarray,
    edg: np.ndarray,
    pwgts: np.ndarray,
    target0: int,
    passes: int,
    cut: int,
    state: np.ndarray,
) -> int:
    """Two-queue FM with rollback to the best prefix; return the new cut."""
    n = xadj.shape[0] - 1
    tvwgt = pwgts[0] + pwgts[1]
    limit = min(max(int(0.01 * n), 15), 100)
    avgvwgt = min(tvwgt // 20, 2 * tvwgt // n)
    t0 = target0
    origdiff = abs(t0 - pwgts[0])
    h0, k0, p0, s0 = pq_new(n)
    h1, k1, p1, s1 = pq_new(n)
    moved = np.full(n, -1, dtype=np.int64)
    swaps = np.empty(n, dtype=np.int64)
    bnd = np.empty(n, dtype=np.int64)
    for _ in range(passes):
        pq_clear(h0, p0, s0)
        pq_clear(h1, p1, s1)
        mincutorder = -1
        newcut = cut
        mincut = cut
        initcut = cut
        mindiff = abs(t0 - pwgts[0])
        nb = 0
        for v in range(n):
            if edg[v] > 0:
                bnd[nb] = v
                nb += 1
        order = bnd[:nb].copy()
        shuffle(state, order)
        for v in order:
            if where[v] == 0:
                pq_insert(h0, k0, p0, s0, v, float(edg[v] - idg[v]))
            else:
                pq_insert(h1, k1, p1, s1, v, float(edg[v] - idg[v]))
        nswaps = 0
        while nswaps < n:
            src = 0 if (t0 - pwgts[0]) < (tvwgt - t0 - pwgts[1]) else 1
            dst = 1 - src
            v = pq_pop(h0, k0, p0, s0) if src == 0 else pq_pop(h1, k1, p1, s1)
            if v < 0:
                break
            gain = edg[v] - idg[v]
            newcut -= gain
            pwgts[dst] += vwgt[v]
            pwgts[src] -= vwgt[v]
            diff = abs(t0 - pwgts[0])
            if (newcut < mincut and diff <= origdiff + avgvwgt) or (
                newcut == mincut and diff < mindiff
            ):
                mincut = newcut
                mindiff = diff
                mincutorder = nswaps
            elif nswaps - mincutorder > limit:
                newcut += gain
                pwgts[src] += vwgt[v]
                pwgts[dst] -= vwgt[v]
                break
            moved[v] = nswaps
            swaps[nswaps] = v
            _move_2way(xadj, adjncy, adjwgt, where, idg, edg, v, dst)
            for e in range(xadj[v], xadj[v + 1]):
                u = adjncy[e]
                if moved[u] >= 0:
                    continue
                key = float(edg[u] - idg[u])
                if where[u] == 0:
                    if p0[u] >= 0:
                        if edg[u] == 0:
                            pq_delete(h0, k0, p0, s0, u)
                        else:
                            pq_update(h0, k0, p0, s0, u, key)
                    elif edg[u] > 0:
                        pq_insert(h0, k0, p0, s0, u, key)
                else:
                    if p1[u] >= 0:
                        if edg[u] == 0:
                            pq_delete(h1, k1, p1, s1, u)
                        else:
                            pq_update(h1, k1, p1, s1, u, key)
                    elif edg[u] > 0:
                        pq_insert(h1, k1, p1, s1, u, key)
            nswaps += 1
        for i in range(nswaps):
            moved[swaps[i]] = -1
        for i in range(nswaps - 1, mincutorder, -1):
            v = swaps[i]
            dst = 1 - where[v]
            pwgts[dst] += vwgt[v]
            pwgts[1 - dst] -= vwgt[v]
            _move_2way(xadj, adjncy, adjwgt, where, idg, edg, v, dst)
        cut = mincut
        if mincutorder <= 0 or mincut == initcut:
            break
    return cut


@njit(cache=True)
def _grow_bisection(
    xadj: np.ndarray,
    adjncy: np.ndarray,
    adjwgt: np.ndarray,
    vwgt: np.ndarray,
    frac0: float,
    ub: float,
    tries: int,
    fm_passes: int,
    state: np.ndarray,
) -> tuple[np.ndarray, int]:
    """Best of ``tries`` BFS region growings (+ balance + FM); ``(where, cut)``."""
    n = xadj.shape[0] - 1
    tvwgt = 0
    for v in range(n):
        tvwgt += vwgt[v]
    target0 = int(tvwgt * frac0)
    one_max = ub * tvwgt * (1.0 - frac0)
    one_min = (1.0 / ub) * tvwgt * (1.0 - frac0)
    where = np.empty(n, dtype=np.int32)
    best = np.empty(n, dtype=np.int32)
    best_cut = -1
    idg = np.empty(n, dtype=np.int64)
    edg = np.empty(n, dtype=np.int64)
    pwgts = np.zeros(2, dtype=np.int64)
    queue = np.empty(n, dtype=np.int64)
    touched = np.zeros(n, dtype=np.bool_)
    for _ in range(tries):
        where[:] = 1
        touched[:] = False
        pw0 = 0
        pw1 = tvwgt
        queue[0] = rand_below(state, n)
        touched[queue[0]] = True
        first = 0
        last = 1
        nleft = n - 1
        drain = False
        while True:
            if first == last:
                if nleft == 0 or drain:
                    break
                pick = rand_below(state, nleft)
                i = 0
                for i in range(n):
                    if not touched[i]:
                        if pick == 0:
                            break
                        pick -= 1
                queue[0] = i
                touched[i] = True
                first = 0
                last = 1
                nleft -= 1
            v = queue[first]
            first += 1
            if pw0 > 0 and pw1 - vwgt[v] < one_min:
                drain = True
                continue
            where[v] = 0
            pw0 += vwgt[v]
            pw1 -= vwgt[v]
            if pw1 <= one_max:
                break
            drain = False
            for e in range(xadj[v], xadj[v + 1]):
                u = adjncy[e]
                if not touched[u]:
                    queue[last] = u
                    last += 1
                    touched[u] = True
                    nleft -= 1
        if pw1 == 0:
            where[rand_below(state, n)] = 1
        if pw0 == 0:
            where[rand_below(state, n)] = 0
        cut = _two_way_params(xadj, adjncy, adjwgt, vwgt, where, idg, edg, pwgts)
        cut = _balance_2way(
            xadj,
            adjncy,
            adjwgt,
            vwgt,
            where,
            idg,
            edg,
            pwgts,
            target0,
            frac0,
            ub,
            cut,
            state,
        )
        cut = _fm_2way(
            xadj,
            adjncy,
            adjwgt,
            vwgt,
            where,
            idg,
            edg,
            pwgts,
            target0,
            fm_passes,
            cut,
            state,
        )
        if best_cut < 0 or cut < best_cut:
            best_cut = cut
            best[:] = where
            if best_cut == 0:
                break
    return best, best_cut


@njit(cache=True)
def _imbalance_excess(pwgts: np.ndarray, frac0: float, ub: float) -> float:
    """``max_i pwgts[i] / (W * frac_i) - ub`` (<= 0 when balanced)."""
    tvwgt = pwgts[0] + pwgts[1]
    a = pwgts[0] / (tvwgt * frac0) - ub
    b = pwgts[1] / (tvwgt * (1.0 - frac0)) - ub
    return float(max(a, b))


@njit(cache=True)
def multilevel_bisect(
    xadj: np.ndarray,
    adjncy: np.ndarray,
    adjwgt: np.ndarray,
    vwgt: np.ndarray,
    frac0: float,
    ub: float,
    tries: int,
    coarsen_to: int,
    grow_small: int,
    grow_large: int,
    fm_passes: int,
    grow_fm_passes: int,
    state: np.ndarray,
) -> tuple[np.ndarray, int]:
    """Best of ``tries`` multilevel bisections aiming part 0 at ``frac0`` of W."""
    n = xadj.shape[0] - 1
    tvwgt = 0
    for v in range(n):
        tvwgt += vwgt[v]
    target0 = int(tvwgt * frac0)
    max_vwgt = int(1.5 * tvwgt / coarsen_to)
    heavy0 = False
    for e in range(1, adjwgt.shape[0]):
        if adjwgt[e] != adjwgt[0]:
            heavy0 = True
            break
    best = np.empty(n, dtype=np.int32)
    best_cut = -1
    best_bal = 0.0
    pwgts = np.zeros(2, dtype=np.int64)
    two_hop = True
    trigger = 0.1
    no_second = np.zeros(0, dtype=np.int64)
    no_keep = np.zeros(0, dtype=np.int32)
    for t in range(tries):
        gx = [xadj]
        ga = [adjncy.astype(np.int32)]
        gw = [adjwgt]
        gv = [vwgt]
        cmaps = [np.empty(0, dtype=np.int64)]
        heavy = heavy0
        while True:
            cx = gx[-1]
            cnv = cx.shape[0] - 1
            if cnv <= coarsen_to or cx[cnv] <= cnv // 2:
                break
            cmap, nx, na, nw, nv, _ = coarsen_once(
                cx,
                ga[-1],
                gw[-1],
                gv[-1],
                max_vwgt,
                heavy,
                two_hop,
                trigger,
                state,
                no_second,
                0,
                no_keep,
            )
            cmaps.append(cmap)
            gx.append(nx)
            ga.append(na)
            gw.append(nw)
            gv.append(nv)
            heavy = True
            if nx.shape[0] - 1 >= 0.85 * cnv:
                break
        top = len(gx) - 1
        small = gx[top].shape[0] - 1 <= coarsen_to
        where, _ = _grow_bisection(
            gx[top],
            ga[top],
            gw[top],
            gv[top],
            frac0,
            ub,
            grow_small if small else grow_large,
            grow_fm_passes,
            state,
        )
        for lvl in range(top, -1, -1):
            if lvl < top:
                where = where[cmaps[lvl + 1]]
            lx = gx[lvl]
            ln = lx.shape[0] - 1
            idg = np.empty(ln, dtype=np.int64)
            edg = np.empty(ln, dtype=np.int64)
            cut = _two_way_params(lx, ga[lvl], gw[lvl], gv[lvl], where, idg, edg, pwgts)
            cut = _balance_2way(
                lx,
                ga[lvl],
                gw[lvl],
                gv[lvl],
                where,
                idg,
                edg,
                pwgts,
                target0,
                frac0,
                ub,
                cut,
                state,
            )
            cut = _fm_2way(
                lx,
                ga[lvl],
                gw[lvl],
                gv[lvl],
                where,
                idg,
                edg,
                pwgts,
                target0,
                fm_passes,
                cut,
                state,
            )
        bal = _imbalance_excess(pwgts, frac0, ub)
        if (
            t == 0
            or (bal <= 0.0005 and cut < best_cut)
            or (best_bal > 0.0005 and bal < best_bal)
        ):
            best_cut = cut
            best_bal = bal
            best[:] = where
        if best_cut == 0:
            break
    return best, best_cut


@njit(cache=True)
def split_graph(
    xadj: np.ndarray,
    adjncy: np.ndarray,
    adjwgt: np.ndarray,
    vwgt: np.ndarray,
    where: np.ndarray,
    side: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Induced subgraph of the vertices on ``side``; ``(xadj, ..., vwgt, ids)``."""
    n = xadj.shape[0] - 1
    rename = np.full(n, -1, dtype=np.int64)
    sn = 0
    for v in range(n):
        if where[v] == side:
            rename[v] = sn
            sn += 1
    ids = np.empty(sn, dtype=np.int64)
    sx = np.zeros(sn + 1, dtype=np.int64)
    sv = np.empty(sn, dtype=np.int64)
    nnz = 0
    for v in range(n):
        if where[v] == side:
            for e in range(xadj[v], xadj[v + 1]):
                if where[adjncy[e]] == side:
                    nnz += 1
    sa = np.empty(nnz, dtype=np.int32)
    sw = np.empty(nnz, dtype=adjwgt.dtype)
    pos = 0
    for v in range(n):
        r = rename[v]
        if r < 0:
            continue
        ids[r] = v
        sv[r] = vwgt[v]
        for e in range(xadj[v], xadj[v + 1]):
            u = adjncy[e]
            if where[u] == side:
                sa[pos] = rename[u]
                sw[pos] = adjwgt[e]
                pos += 1
        sx[r + 1] = pos
    return sx, sa, sw, sv, ids


def recursive_bisection(
    graph: WeightedCSR,
    k: int,
    config: InitialConfig,
    imbalance: float,
    state: np.ndarray,
    tries: int | None = None,
) -> Int32Array:
    """Split ``graph`` into ``k`` parts by recursive multilevel bisection.

    Args:
        graph: the (coarsest) graph.
        k: number of parts.
        config: constants.
        imbalance: the k-way tolerance eps; each bisection gets
            ``(1 + eps) ** (1 / ln k)`` (METIS's ``InitKWayPartitioning`` rule).
        state: random stream (advanced).
        tries: multilevel bisections per split (default: ``config.tries`` or 5).

    Returns:
        ``(n,)`` int32 part of every vertex.
    """
    n = graph.num_nodes
    out = np.zeros(n, dtype=np.int32)
    if k == 1:
        return out
    ub = (1.0 + imbalance) ** (1.0 / math.log(k)) if k > 2 else 1.0 + imbalance
    ntries = tries if tries is not None else (config.tries or 5)
    stack: list[
        tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int]
    ]
    stack = [(graph.xadj, graph.adjncy, graph.adjwgt, graph.vwgt, np.arange(n), k, 0)]
    while stack:
        xadj, adjncy, adjwgt, vwgt, ids, nparts, first = stack.pop()
        sn = xadj.shape[0] - 1
        if nparts == 1:
            out[ids] = first
            continue
        if sn <= nparts:  # too few vertices to bisect: one per part
            out[ids] = first + np.arange(sn) % nparts
            continue
        left = nparts >> 1
        where, _ = multilevel_bisect(
            xadj,
            adjncy,
            adjwgt,
            vwgt,
            left / nparts,
            ub,
            ntries,
            config.coarsen_to,
            config.grow_tries_small,
            config.grow_tries_large,
            config.fm_passes,
            config.grow_fm_passes,
            state,
        )
        for side, (parts, offset) in enumerate(
            ((left, first), (nparts - left, first + left))
        ):
            sx, sa, sw, sv, sids = split_graph(xadj, adjncy, adjwgt, vwgt, where, side)
            stack.append((sx, sa, sw, sv, ids[sids], parts, offset))
    return out
