"""Greedy k-way boundary refinement under a balance cap (METIS 5.x rules).

Every vertex keeps its internal degree ``id``, external degree ``ed`` and, when it
has neighbours elsewhere, the list of its neighbour parts with the edge weight to
each (METIS's ``ckrinfo``); moves update these lists incrementally.

Per pass, boundary vertices (refine mode: ``ed > 0`` and ``ed >= id``; balance mode:
``ed > 0``) enter a max-queue keyed by ``ed / sqrt(#neighbour parts) - id``, in a
seeded random order. Each extracted vertex may move:

* **refine mode**: to the neighbour part with the largest connectivity among those
  with gain ``ed_to - id >= 0`` whose weight stays under ``cap + fudge * gain``
  (ties: lighter part). Positive gains move; zero gains move when ``from`` is at its
  cap, the move improves balance, or on every other extraction (diffusion).
  ``fudge`` is 5 while uncoarsening and 0 in the final round, so refinement may
  overshoot the cap on coarse levels and the balance passes pull it back.
* **balance mode** (run first on the finer half of the levels when a part is more
  than 2% over the cap, and at the end until the cap holds): the lightest
  neighbour part that has room or is lighter than ``from``; a negative-gain move
  needs ``from`` over its cap or the target under its floor.

A pass ends when the queue is empty; refinement stops after ``passes`` passes or a
pass that moved nothing or left the cut unchanged. :func:`enforce_cap` is Strata's
addition: whatever is still over the cap (a part with no boundary to the parts
that have room) moves its cheapest vertices to the best parts with room, so the cap
always holds for unit weights.

References:
    Karypis and Kumar, "Multilevel k-way Partitioning Scheme for Irregular Graphs",
    JPDC 48(1), 1998. METIS 5.x (``libmetis/kwayfm.c``, ``kwayrefine.c``).

Examples:
    >>> import numpy as np
    >>> from strata.storage import CSRGraph
    >>> from strata.partition._graph import prepare
    >>> from strata.partition._rng import new_state
    >>> src = np.arange(20); dst = (src + 1) % 20              # a ring of 20
    >>> _, g = prepare(CSRGraph.from_edges(src, dst), 2, None, "doc")
    >>> where = np.array([0, 1] * 10, dtype=np.int32)        # cut = 20
    >>> refiner = GreedyKWayRefiner(k=2, imbalance=0.1)
    >>> cut = refiner.refine_arrays(g, where, new_state(0))
    >>> cut < 20, bool(np.bincount(where).max() <= 11)
    (True, True)
    >>> from strata.partition.streaming import LDGPartitioner  # LDG, then refinement
    >>> ring = CSRGraph.from_edges(np.arange(200), (np.arange(200) + 1) % 200)
    >>> ldg = LDGPartitioner(k=4).partition(ring)
    >>> better = GreedyKWayRefiner(k=4).refine(ring, ldg)
    >>> better.report.method, better.report.edge_cut <= ldg.report.edge_cut
    ('ldg+refine', True)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from strata.partition._graph import (
    NO_CAP,
    NO_VWGT2,
    WeightedCSR,
    edge_cut_partition,
    part_cap,
    prepare,
)
from strata.partition._jit import njit
from strata.partition._params import check_settings
from strata.partition._pq import pq_delete, pq_insert, pq_new, pq_pop, pq_update
from strata.partition._rng import new_state, shuffle
from strata.partition._types import Int32Array
from strata.partition.errors import PartitionError
from strata.partition.types import Partition
from strata.storage import CSRGraph

_NOT_PRESENT = 0
_PRESENT = 1
_EXTRACTED = 2


@dataclass(frozen=True, slots=True, eq=False)
class KWayInfo:
    """Refinement state of one level (arrays are updated in place).

    Attributes:
        where: part of every vertex.
        idg: weight of edges to the own part.
        edg: weight of edges to other parts.
        nnbrs: number of neighbour parts (other than the own).
        nstart: start of each vertex's slice of ``npart``/``ned`` (capacity
            ``min(degree, k)``).
        npart: neighbour part ids.
        ned: edge weight to each neighbour part.
        pwgts: part weights.
        pwgts2: part weights of the second constraint (empty without one).
    """

    where: np.ndarray
    idg: np.ndarray
    edg: np.ndarray
    nnbrs: np.ndarray
    nstart: np.ndarray
    npart: np.ndarray
    ned: np.ndarray
    pwgts: np.ndarray
    pwgts2: np.ndarray


@njit(cache=True)
def _capacities(xadj: np.ndarray, k: int) -> np.ndarray:
    n = xadj.shape[0] - 1
    nstart = np.empty(n + 1, dtype=np.int64)
    nstart[0] = 0
    for v in range(n):
        nstart[v + 1] = nstart[v] + min(xadj[v + 1] - xadj[v], k)
    return nstart


@njit(cache=True)
def build_info(
    xadj: np.ndarray,
    adjncy: np.ndarray,
    adjwgt: np.ndarray,
    vwgt: np.ndarray,
    where: np.ndarray,
    k: int,
    interior: np.ndarray,
    vwgt2: np.ndarray,
) -> tuple[
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    int,
]:
    """Degrees, neighbour-part lists and part weights; returns them and the cut.

    ``interior[v]`` (may be empty) marks vertices known to have no outside
    neighbour (projected from an interior coarse vertex), which skips their scan.
    ``vwgt2`` (may be empty) gives the second constraint's part weights.
    """
    n = xadj.shape[0] - 1
    two = vwgt2.shape[0] > 0
    pwgts2 = np.zeros(k if two else 0, dtype=np.int64)
    nstart = _capacities(xadj, k)
    npart = np.empty(nstart[n], dtype=np.int32)
    ned = np.empty(nstart[n], dtype=np.int64)
    idg = np.zeros(n, dtype=np.int64)
    edg = np.zeros(n, dtype=np.int64)
    nnbrs = np.zeros(n, dtype=np.int32)
    pwgts = np.zeros(k, dtype=np.int64)
    slot = np.full(k, -1, dtype=np.int64)
    known = interior.shape[0] == n
    cut = 0
    for v in range(n):
        me = where[v]
        pwgts[me] += vwgt[v]
        if two:
            pwgts2[me] += vwgt2[v]
        if known and interior[v]:
            total = 0
            for e in range(xadj[v], xadj[v + 1]):
                total += adjwgt[e]
            idg[v] = total
            continue
        base = nstart[v]
        count = 0
        for e in range(xadj[v], xadj[v + 1]):
            p = where[adjncy[e]]
            w = adjwgt[e]
            if p == me:
                idg[v] += w
            else:
                edg[v] += w
                s = slot[p]
                if s < 0:
                    slot[p] = count
                    npart[base + count] = p
                    ned[base + count] = w
                    count += 1
                else:
                    ned[base + s] += w
        for j in range(count):
            slot[npart[base + j]] = -1
        nnbrs[v] = count
        cut += edg[v]
    return idg, edg, nnbrs, nstart, npart, ned, pwgts, pwgts2, cut // 2


@njit(cache=True)
def _key(edg: int, idg: int, nparts: int) -> float:
    if nparts > 0:
        return edg / math.sqrt(nparts) - idg
    return -float(idg)


@njit(cache=True)
def _add_to_list(
    nstart: np.ndarray,
    nnbrs: np.ndarray,
    npart: np.ndarray,
    ned: np.ndarray,
    u: int,
    p: int,
    w: int,
) -> None:
    """Add ``w`` to u's entry for part ``p`` (creating it), or subtract if w < 0."""
    base = nstart[u]
    c = nnbrs[u]
    for j in range(c):
        if npart[base + j] == p:
            ned[base + j] += w
            if ned[base + j] == 0:  # drop the entry: swap in the last one
                npart[base + j] = npart[base + c - 1]
                ned[base + j] = ned[base + c - 1]
                nnbrs[u] = c - 1
            return
    npart[base + c] = p
    ned[base + c] = w
    nnbrs[u] = c + 1


@njit(cache=True)
def move_vertex(
    graph: tuple[np.ndarray, ...], info: tuple[np.ndarray, ...], v: int, slot: int
) -> int:
    """Move ``v`` to the part of its list entry ``slot``; return the gain.

    ``graph`` is ``(xadj, adjncy, adjwgt, vwgt, vwgt2)`` and ``info`` the arrays
    of :class:`KWayInfo` in field order, both updated in place.
    """
    xadj, adjncy, adjwgt, vwgt, vwgt2 = graph
    where, idg, edg, nnbrs, nstart, npart, ned, pwgts, pwgts2 = info
    base = nstart[v]
    src = where[v]
    dst = npart[base + slot]
    gain = ned[base + slot] - idg[v]
    pwgts[dst] += vwgt[v]
    pwgts[src] -= vwgt[v]
    if vwgt2.shape[0] > 0:
        pwgts2[dst] += vwgt2[v]
        pwgts2[src] -= vwgt2[v]
    where[v] = dst
    edg[v] += idg[v] - ned[base + slot]
    old_id = idg[v]
    idg[v] = ned[base + slot]
    if old_id == 0:  # the entry for dst becomes the (empty) entry for src: drop it
        c = nnbrs[v]
        npart[base + slot] = npart[base + c - 1]
        ned[base + slot] = ned[base + c - 1]
        nnbrs[v] = c - 1
    else:
        npart[base + slot] = src
        ned[base + slot] = old_id
    for e in range(xadj[v], xadj[v + 1]):
        u = adjncy[e]
        w = adjwgt[e]
        me = where[u]
        if me == src:
            idg[u] -= w
            edg[u] += w
            _add_to_list(nstart, nnbrs, npart, ned, u, dst, w)
        elif me == dst:
            idg[u] += w
            edg[u] -= w
            _add_to_list(nstart, nnbrs, npart, ned, u, src, -w)
        else:
            _add_to_list(nstart, nnbrs, npart, ned, u, src, -w)
            _add_to_list(nstart, nnbrs, npart, ned, u, dst, w)
    return int(gain)


@njit(cache=True)
def _load(pw: int, cap: int, pw2: int, cap2: int, two: bool) -> float:
    """Normalised load of a part: its weight over the cap, the larger of both."""
    a = pw / max(cap, 1)
    if two:
        return max(a, pw2 / max(cap2, 1))
    return a


@njit(cache=True)
def greedy_kway(
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
    minpw: np.ndarray,
    passes: int,
    balance_mode: bool,
    fudge: float,
    cut: int,
    state: np.ndarray,
    vwgt2: np.ndarray,
    pwgts2: np.ndarray,
    maxpw2: np.ndarray,
    minpw2: np.ndarray,
) -> int:
    """Run up to ``passes`` greedy passes (refine or balance mode); return the cut.

    With a second constraint (``vwgt2`` not empty) a move must keep the target
    under both caps (each with its own fudge), and balance mode serves parts over
    either cap: targets are ranked by their normalised load after the move.
    """
    two = vwgt2.shape[0] > 0
    graph = (xadj, adjncy, adjwgt, vwgt, vwgt2)
    info = (where, idg, edg, nnbrs, nstart, npart, ned, pwgts, pwgts2)
    n = xadj.shape[0] - 1
    k = pwgts.shape[0]
    fudge2 = 0.0
    if two:  # the fudge in the second constraint's units
        total = 0
        total2 = 0
        for p in range(k):
            total += pwgts[p]
            total2 += pwgts2[p]
        fudge2 = fudge * total2 / max(total, 1)
    heap, keys, pos, size = pq_new(n)
    status = np.zeros(n, dtype=np.int8)
    bnd = np.empty(n, dtype=np.int64)
    for _ in range(passes):
        if balance_mode:
            balanced = True
            for p in range(k):
                if pwgts[p] > maxpw[p] or pwgts[p] < minpw[p]:
                    balanced = False
                if two and (pwgts2[p] > maxpw2[p] or pwgts2[p] < minpw2[p]):
                    balanced = False
            if balanced:
                break
        oldcut = cut
        nb = 0
        for v in range(n):
            if edg[v] > 0 and (balance_mode or edg[v] >= idg[v]):
                bnd[nb] = v
                nb += 1
        order = bnd[:nb].copy()
        shuffle(state, order)
        for v in order:
            pq_insert(heap, keys, pos, size, v, _key(edg[v], idg[v], nnbrs[v]))
            status[v] = _PRESENT
        nmoved = 0
        while size[0] > 0:
            v = pq_pop(heap, keys, pos, size)
            status[v] = _EXTRACTED
            src = where[v]
            vw = vwgt[v]
            vw2 = vwgt2[v] if two else 0
            over = pwgts[src] > maxpw[src] or (two and pwgts2[src] > maxpw2[src])
            if (balance_mode and not over) or (not balance_mode and idg[v] > 0):
                if pwgts[src] - vw < minpw[src]:
                    continue
                if two and pwgts2[src] - vw2 < minpw2[src]:
                    continue
            base = nstart[v]
            c = nnbrs[v]
            best = -1
            if balance_mode:
                src_load = _load(
                    pwgts[src], maxpw[src], pwgts2[src] if two else 0,
                    maxpw2[src] if two else 1, two,
                )  # fmt: skip
                best_load = 0.0
                for j in range(c):
                    p = npart[base + j]
                    after = _load(
                        pwgts[p] + vw, maxpw[p], pwgts2[p] + vw2 if two else 0,
                        maxpw2[p] if two else 1, two,
                    )  # fmt: skip
                    if after > 1.0 and after > src_load:
                        continue
                    if best < 0 or after < best_load:
                        best = j
                        best_load = after
                if best < 0:
                    continue
                to = npart[base + best]
                under = pwgts[to] < minpw[to] or (two and pwgts2[to] < minpw2[to])
                if not over and not under and ned[base + best] < idg[v]:
                    continue
            else:
                for j in range(c - 1, -1, -1):
                    p = npart[base + j]
                    gain = ned[base + j] - idg[v]
                    fits = gain >= 0 and pwgts[p] + vw <= maxpw[p] + fudge * gain
                    if two and fits:
                        fits = pwgts2[p] + vw2 <= maxpw2[p] + fudge2 * gain
                    if fits and (best < 0 or ned[base + j] > ned[base + best]):
                        best = j
                        continue
                    if (
                        fits
                        and best >= 0
                        and ned[base + j] == ned[base + best]
                        and pwgts[p] < pwgts[npart[base + best]]
                    ):
                        best = j
                if best < 0:
                    continue
                to = npart[base + best]
                gain = ned[base + best] - idg[v]
                if gain == 0:
                    lighter = pwgts[src] > pwgts[to] + vw
                    if two:
                        lighter = lighter and pwgts2[src] > pwgts2[to] + vw2
                    if not (over or pwgts[src] >= maxpw[src] or lighter):
                        continue
                elif gain < 0:
                    continue
            cut -= move_vertex(graph, info, v, best)
            nmoved += 1
            for e in range(xadj[v], xadj[v + 1]):
                u = adjncy[e]
                if status[u] == _EXTRACTED:
                    continue
                inside = edg[u] > 0 and (balance_mode or edg[u] >= idg[u])
                if status[u] == _PRESENT:
                    if inside:
                        pq_update(
                            heap, keys, pos, size, u, _key(edg[u], idg[u], nnbrs[u])
                        )
                    else:
                        pq_delete(heap, keys, pos, size, u)
                        status[u] = _NOT_PRESENT
                elif inside:
                    pq_insert(heap, keys, pos, size, u, _key(edg[u], idg[u], nnbrs[u]))
                    status[u] = _PRESENT
        status[:] = _NOT_PRESENT
        if nmoved == 0 or (not balance_mode and cut == oldcut):
            break
    return cut


@njit(cache=True)
def _move_detached(
    graph: tuple[np.ndarray, ...], info: tuple[np.ndarray, ...], v: int, target: int
) -> None:
    """Move ``v`` (no neighbour in its part) to ``target`` (no neighbour there)."""
    xadj, adjncy, adjwgt, vwgt, vwgt2 = graph
    where, _, _, nnbrs, nstart, npart, ned, pwgts, pwgts2 = info
    src = where[v]
    where[v] = target
    pwgts[src] -= vwgt[v]
    pwgts[target] += vwgt[v]
    if vwgt2.shape[0] > 0:
        pwgts2[src] -= vwgt2[v]
        pwgts2[target] += vwgt2[v]
    for e in range(xadj[v], xadj[v + 1]):
        u = adjncy[e]
        _add_to_list(nstart, nnbrs, npart, ned, u, src, -adjwgt[e])
        _add_to_list(nstart, nnbrs, npart, ned, u, target, adjwgt[e])


@njit(cache=True)
def enforce_cap(
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
    cap: int,
    cut: int,
    vwgt2: np.ndarray,
    pwgts2: np.ndarray,
    cap2: int,
) -> int:
    """Move the cheapest vertices out of parts above a cap; return the cut.

    A vertex leaves a part over either cap for the best part with room under
    both; its cost is the cut it adds per unit of the overfull constraint.
    """
    two = vwgt2.shape[0] > 0
    graph = (xadj, adjncy, adjwgt, vwgt, vwgt2)
    info = (where, idg, edg, nnbrs, nstart, npart, ned, pwgts, pwgts2)
    n = xadj.shape[0] - 1
    k = pwgts.shape[0]
    for _ in range(6):
        over = False
        for p in range(k):
            if pwgts[p] > cap or (two and pwgts2[p] > cap2):
                over = True
        if not over:
            break
        cand = np.empty(n, dtype=np.int64)
        loss = np.empty(n, dtype=np.float64)
        count = 0
        for v in range(n):
            p = where[v]
            over1 = pwgts[p] > cap
            over2 = two and pwgts2[p] > cap2
            if not (over1 or over2):
                continue
            share = 0.0
            if over1:
                share += vwgt[v] / max(cap, 1)
            if over2:
                share += vwgt2[v] / max(cap2, 1)
            if share <= 0:
                continue
            best = 0
            for j in range(nnbrs[v]):
                best = max(best, ned[nstart[v] + j])
            cand[count] = v
            loss[count] = (idg[v] - best) / share
            count += 1
        order = np.argsort(loss[:count], kind="mergesort")
        for i in order:
            v = cand[i]
            src = where[v]
            vw = vwgt[v]
            vw2 = vwgt2[v] if two else 0
            if pwgts[src] <= cap and (not two or pwgts2[src] <= cap2):
                continue
            base = nstart[v]
            best = -1
            for j in range(nnbrs[v]):
                p = npart[base + j]
                if (
                    pwgts[p] + vw <= cap
                    and (not two or pwgts2[p] + vw2 <= cap2)
                    and (best < 0 or ned[base + j] > ned[base + best])
                ):
                    best = j
            if best >= 0:
                cut -= move_vertex(graph, info, v, best)
                continue
            # No adjacent part has room: the lightest part anywhere (a new entry).
            target = -1
            target_load = 0.0
            for p in range(k):
                if p == src or pwgts[p] + vw > cap:
                    continue
                if two and pwgts2[p] + vw2 > cap2:
                    continue
                load = _load(pwgts[p], cap, pwgts2[p] if two else 0, cap2, two)
                if target < 0 or load < target_load:
                    target = p
                    target_load = load
            if target < 0:
                continue
            if xadj[v] == xadj[v + 1]:  # isolated: no degrees to update
                where[v] = target
                pwgts[target] += vw
                pwgts[src] -= vw
                if two:
                    pwgts2[target] += vw2
                    pwgts2[src] -= vw2
                continue
            c = nnbrs[v]
            if c == min(xadj[v + 1] - xadj[v], k):
                # No free slot, so v has no neighbour in its own part (else a
                # slot would be free): moving it to a part it does not touch
                # leaves its own degrees and the cut unchanged.
                _move_detached(graph, info, v, target)
                continue
            npart[base + c] = target
            ned[base + c] = 0
            nnbrs[v] = c + 1
            cut -= move_vertex(graph, info, v, c)
    return cut


def _bounds(
    total: int, k: int, cap: int, imbalance: float, floor: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """Per-part max (the cap) and min (default ``W / k / (1 + eps)``) weights."""
    maxpw = np.full(k, cap, dtype=np.int64)
    low = int(total / k / (1.0 + imbalance)) if floor is None else floor
    minpw = np.full(k, low, dtype=np.int64)
    return maxpw, minpw


def new_info(
    graph: WeightedCSR, where: Int32Array, k: int, interior: np.ndarray | None = None
) -> tuple[KWayInfo, int]:
    """Refinement state of ``graph`` under ``where``, and its cut."""
    mask = np.empty(0, dtype=np.bool_) if interior is None else interior
    idg, edg, nnbrs, nstart, npart, ned, pwgts, pwgts2, cut = build_info(
        graph.xadj, graph.adjncy, graph.adjwgt, graph.vwgt, where, k, mask, graph.vwgt2
    )
    info = KWayInfo(where, idg, edg, nnbrs, nstart, npart, ned, pwgts, pwgts2)
    return info, int(cut)


def project_info(
    fine: WeightedCSR, cmap: np.ndarray, coarse: KWayInfo, k: int
) -> tuple[KWayInfo, int]:
    """Project a coarse state to the finer level (interior stays interior)."""
    where = coarse.where[cmap]
    interior = coarse.edg[cmap] == 0
    return new_info(fine, where, k, interior)


@dataclass(frozen=True, slots=True, eq=False)
class Bounds:
    """Per-part weight limits of one level, for both constraints.

    Attributes:
        maxpw: caps of the first constraint.
        minpw: floors of the first constraint.
        maxpw2: caps of the second constraint (empty without one).
        minpw2: floors of the second constraint.
    """

    maxpw: np.ndarray
    minpw: np.ndarray
    maxpw2: np.ndarray
    minpw2: np.ndarray

    def over(self, info: KWayInfo, slack: float = 0.0) -> bool:
        """Whether a part exceeds a cap (by more than ``slack`` of the mean)."""
        k = self.maxpw.shape[0]
        pw = info.pwgts
        if (pw > self.maxpw + slack * pw.sum() / k).any():
            return True
        pw2 = info.pwgts2
        return bool(
            pw2.shape[0] > 0 and (pw2 > self.maxpw2 + slack * pw2.sum() / k).any()
        )


def level_bounds(
    info: KWayInfo,
    cap: int,
    imbalance: float,
    floor: int | None,
    cap2: int = int(NO_CAP),
    imbalance2: float | None = None,
) -> Bounds:
    """The :class:`Bounds` of a level (the second pair only when it has ``pwgts2``)."""
    k = info.pwgts.shape[0]
    maxpw, minpw = _bounds(int(info.pwgts.sum()), k, cap, imbalance, floor)
    if info.pwgts2.shape[0] == 0 or imbalance2 is None:
        empty = np.zeros(0, dtype=np.int64)
        return Bounds(maxpw, minpw, empty, empty)
    maxpw2, minpw2 = _bounds(int(info.pwgts2.sum()), k, cap2, imbalance2, None)
    return Bounds(maxpw, minpw, maxpw2, minpw2)


def _greedy(
    graph: WeightedCSR,
    info: KWayInfo,
    bounds: Bounds,
    passes: int,
    balance: bool,
    fudge: float,
    cut: int,
    state: np.ndarray,
) -> int:
    two = bounds.maxpw2.shape[0] > 0
    return int(
        greedy_kway(
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
            bounds.minpw,
            passes,
            balance,
            fudge,
            cut,
            state,
            graph.vwgt2 if two else NO_VWGT2,
            info.pwgts2 if two else NO_VWGT2,
            bounds.maxpw2,
            bounds.minpw2,
        )
    )


def refine_level(
    graph: WeightedCSR,
    info: KWayInfo,
    cut: int,
    cap: int,
    imbalance: float,
    passes: int,
    *,
    balance_first: bool,
    final: bool,
    state: np.ndarray,
    fudge: float = 5.0,
    floor: int | None = None,
    cap2: int = int(NO_CAP),
    imbalance2: float | None = None,
) -> int:
    """One uncoarsening step of METIS's ``RefineKWay``; return the cut.

    ``balance_first`` runs one balance pass when a part exceeds the average by more
    than ``eps + 2%``; ``final`` adds the closing balance + strict refinement round
    and :func:`enforce_cap`, so the result meets the cap. ``floor`` overrides the
    minimum part weight (isolated vertices will fill light parts later).
    ``cap2``/``imbalance2`` bound the second constraint (``graph.vwgt2``) the
    same way; without ``imbalance2`` it is ignored.
    """
    bounds = level_bounds(info, cap, imbalance, floor, cap2, imbalance2)
    two = bounds.maxpw2.shape[0] > 0
    if balance_first and bounds.over(info, 0.02):
        cut = _greedy(graph, info, bounds, 1, True, 0.0, cut, state)
    cut = _greedy(graph, info, bounds, passes, False, fudge, cut, state)
    if final and bounds.over(info):
        cut = _greedy(graph, info, bounds, 10, True, 0.0, cut, state)
        cut = _greedy(graph, info, bounds, passes, False, 0.0, cut, state)
    if final and bounds.over(info):
        cut = int(
            enforce_cap(
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
                cap,
                cut,
                graph.vwgt2 if two else NO_VWGT2,
                info.pwgts2 if two else NO_VWGT2,
                cap2 if two else int(NO_CAP),
            )
        )
    return cut


@dataclass(frozen=True, slots=True)
class GreedyKWayRefiner:
    """Greedy k-way refinement of an existing assignment.

    Attributes:
        k: number of parts.
        imbalance: eps of the cap rule (``strata.partition.metrics``).
        passes: refinement passes.
        seed: seed of the random visit order.
    """

    k: int
    imbalance: float = 0.03
    passes: int = 10
    seed: int = 0

    def __post_init__(self) -> None:
        check_settings(
            "GreedyKWayRefiner",
            ints={"k": self.k, "passes": self.passes, "seed": self.seed},
            floats={"imbalance": self.imbalance},
        )

    def refine(self, graph: CSRGraph, part: Partition) -> Partition:
        """Refine an edge-cut partition of ``graph`` (e.g. LDG's) into a new one.

        Raises:
            PartitionError: on bad input, or a partition of another graph or k.
        """
        where_ = "GreedyKWayRefiner"
        simple, wgraph = prepare(graph, self.k, None, where_)
        if part.k != self.k or part.assignment.shape != (wgraph.num_nodes,):
            raise PartitionError.build(
                "part",
                where_,
                f"an edge-cut partition of this graph into {self.k}",
                f"k={part.k}, {part.assignment.shape[0]} vertices",
            )
        start = time.perf_counter()
        where = np.array(part.assignment, dtype=np.int32)
        self.refine_arrays(wgraph, where, new_state(self.seed))
        seconds = time.perf_counter() - start
        return edge_cut_partition(
            method=f"{part.report.method}+refine",
            k=self.k,
            seed=self.seed,
            simple=simple,
            assignment=where,
            seconds=seconds,
            phase_seconds={"refine": seconds},
            config=self,
            backend=f"{part.report.backend}+strata-refine",
        )

    def refine_arrays(
        self, graph: WeightedCSR, where: Int32Array, state: np.ndarray
    ) -> int:
        """Balance (when needed) and refine ``where`` in place; return the cut."""
        info, cut = new_info(graph, where, self.k)
        cap = part_cap(graph.vwgt, self.k, self.imbalance)
        return refine_level(
            graph,
            info,
            cut,
            cap,
            self.imbalance,
            self.passes,
            balance_first=True,
            final=True,
            state=state,
            fudge=0.0,
        )
