"""The supersteps of PageRank, BFS, SSSP and CC on one rank of a mesh (tdorch.md §5).

One superstep is one batch of edge tasks ``state[v] ⊕= g(state[u], w)`` anchored
at the source ``u``:

- round 0 (pull): owners send the current value of every source another rank
  pulls (HubSplit's hub chunks; only active ones for frontier kernels);
- compute: every local edge whose source is active makes one update;
- round 1 (push): updates go to the destination's owner, folded per (rank, dst)
  first when the placement combines (otherwise one update per edge);
- the owner folds what arrived in sender-rank order (so float sums do not depend
  on arrival order), applies it, and one allreduce carries "anything changed?"
  (and PageRank's L1 change and dangling mass).

Kernels (⊕, g): BFS (min, d+1), SSSP (min, d+w; a frontier Bellman-Ford: only
vertices whose distance fell are active next, which gives Dijkstra's distances
for w >= 0), PageRank (+, r/outdeg; dangling mass spread uniformly as networkx
does), CC (min, label; on the symmetrised graph, labels start as ids so each
component ends labelled by its smallest id).

:func:`rank_main` is the SPMD function one rank runs; it knows only the
:class:`~strata.engine.mesh.base.Mesh` contract.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from strata.engine.mesh.base import Mesh, Tag
from strata.operators.algorithms.placement import (
    Cut,
    Placement,
    RankPart,
    partition_rank,
)
from strata.storage.csr import CSRGraph

Algorithm = Literal["pagerank", "bfs", "sssp", "cc"]
ALGORITHMS: tuple[str, ...] = ("pagerank", "bfs", "sssp", "cc")
INT_INF = np.iinfo(np.int64).max
_PULL, _PUSH, _REDUCE = 0, 1, 2


@dataclass(frozen=True, slots=True)
class KernelParams:
    """Parameters of one run (frozen, the same on every rank).

    Attributes:
        source: BFS/SSSP source vertex.
        damping: PageRank damping d.
        iterations: PageRank supersteps (with ``tol``: at most this many).
        tol: PageRank stops once the L1 change < ``num_nodes * tol`` (networkx).
    """

    source: int = 0
    damping: float = 0.85
    iterations: int = 20
    tol: float | None = None


@dataclass(slots=True)
class RankResult:
    """What one rank returns: its vertices' values and its load."""

    rank: int
    own: NDArray[np.int64]
    values: NDArray[np.float64] | NDArray[np.int64]
    supersteps: int
    tasks: int = 0
    bytes_sent: int = 0
    frames_sent: int = 0
    bytes_received: int = 0
    busy_s: float = 0.0
    wall_s: float = 0.0
    process_s: float = 0.0
    pulled: int = 0
    superstep_tasks: list[int] = field(default_factory=list)


class _Wiring:
    """Per-rank index arrays built once: who pulls what, where updates go."""

    def __init__(self, part: RankPart) -> None:
        self.part = part
        n_slots = part.src_ptr.shape[0] - 1
        self.edge_slot = np.repeat(
            np.arange(n_slots, dtype=np.int64), np.diff(part.src_ptr)
        )
        size = part.size
        if part.combiner:
            key = part.dst_owner * (part.num_nodes + 1) + part.dst_local
            uniq, self.edge_out = np.unique(key, return_inverse=True)
            self.out_owner = uniq // (part.num_nodes + 1)
            self.out_local = uniq % (part.num_nodes + 1)
            self.out_ptr = np.searchsorted(self.out_owner, np.arange(size + 1))
        else:
            self.edge_order = np.argsort(part.dst_owner, kind="stable")
        self.serve: list[NDArray[np.int64]] = []

    def setup(self, mesh: Mesh) -> None:
        """Round (0, 0): tell each owner which of its vertices this rank pulls."""
        p = self.part
        out = [[p.pull_ids[p.pull_ptr[q] : p.pull_ptr[q + 1]]] for q in range(p.size)]
        incoming = mesh.exchange(out, Tag(0, 0))
        self.serve = [frames[0].astype(np.int64) for frames in incoming]


def _pull(
    mesh: Mesh,
    w: _Wiring,
    own_values: np.ndarray,
    own_active: NDArray[np.bool_] | None,
    step: int,
) -> tuple[np.ndarray, NDArray[np.bool_], int]:
    """Round 0: send pulled sources' values; return (values, active, served) by slot."""
    p = w.part
    out: list[list[np.ndarray]] = []
    served = 0
    for q in range(p.size):
        ids = w.serve[q]
        if own_active is None:
            out.append([own_values[ids]] if ids.size else [])
            served += int(ids.size) if q != p.rank else 0
        else:
            pos = np.flatnonzero(own_active[ids])
            out.append([pos, own_values[ids[pos]]] if pos.size else [])
            served += int(pos.size) if q != p.rank else 0
    incoming = mesh.exchange(out, Tag(step, _PULL))
    n_pulled = int(p.pull_ptr[-1])
    values = np.empty(p.num_own + n_pulled, dtype=own_values.dtype)
    values[: p.num_own] = own_values
    active = np.zeros(p.num_own + n_pulled, dtype=np.bool_)
    if own_active is None:
        active[:] = True
    else:
        active[: p.num_own] = own_active
    for q, frames in enumerate(incoming):
        if not frames:
            continue
        base = p.num_own + int(p.pull_ptr[q])
        if own_active is None:
            values[base : base + frames[0].shape[0]] = frames[0]
        else:
            values[base + frames[0]] = frames[1]
            active[base + frames[0]] = True
    return values, active, served


def _active_edges(w: _Wiring, active: NDArray[np.bool_]) -> NDArray[np.int64] | None:
    """Edge positions whose source slot is active (None: all of them)."""
    if active.all():
        return None
    slots = np.flatnonzero(active)
    starts = w.part.src_ptr[slots]
    lengths = w.part.src_ptr[slots + 1] - starts
    total = int(lengths.sum())
    offsets = np.repeat(
        starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths
    )
    return offsets + np.arange(total, dtype=np.int64)


def _push(
    mesh: Mesh,
    w: _Wiring,
    edges: NDArray[np.int64] | None,
    messages: np.ndarray,
    op: Literal["sum", "min"],
    identity: float | int,
    step: int,
) -> list[list[np.ndarray]]:
    """Round 1: send one update per (rank, dst) (combiner) or per edge to owners."""
    p = w.part
    out: list[list[np.ndarray]] = []
    if p.combiner:
        slots = w.edge_out if edges is None else w.edge_out[edges]
        n_out = w.out_owner.shape[0]
        if op == "sum":
            buf = np.bincount(slots, weights=messages, minlength=n_out)
        else:
            buf = np.full(n_out, identity, dtype=messages.dtype)
            np.minimum.at(buf, slots, messages)
        for q in range(p.size):
            lo, hi = int(w.out_ptr[q]), int(w.out_ptr[q + 1])
            if op == "sum" and edges is None:
                out.append([w.out_local[lo:hi], buf[lo:hi]] if hi > lo else [])
            else:
                hit = lo + np.flatnonzero(buf[lo:hi] != identity)
                out.append([w.out_local[hit], buf[hit]] if hit.size else [])
    else:
        if edges is None:
            order, msg_of = w.edge_order, messages[w.edge_order]
        else:
            by_owner = np.argsort(p.dst_owner[edges], kind="stable")
            order, msg_of = edges[by_owner], messages[by_owner]
        owners = p.dst_owner[order]
        bounds = np.searchsorted(owners, np.arange(p.size + 1))
        for q in range(p.size):
            lo, hi = int(bounds[q]), int(bounds[q + 1])
            out.append([p.dst_local[order[lo:hi]], msg_of[lo:hi]] if hi > lo else [])
    return mesh.exchange(out, Tag(step, _PUSH))


def _fold(
    incoming: list[list[np.ndarray]],
    n_own: int,
    op: Literal["sum", "min"],
    identity: float | int,
    dtype: type,
) -> tuple[np.ndarray, int]:
    """Fold updates in sender-rank order; return (folded, updates applied)."""
    acc: np.ndarray = np.full(n_own, identity, dtype=dtype)
    applied = 0
    for frames in incoming:
        if not frames:
            continue
        keys, vals = frames
        applied += int(keys.shape[0])
        if op == "sum":
            acc = acc + np.bincount(keys, weights=vals, minlength=n_own)
        else:
            np.minimum.at(acc, keys, vals)
    return acc, applied


def _stats(mesh: Mesh) -> tuple[int, int, int]:
    s = mesh.stats
    return s.bytes_sent, s.frames_sent, s.bytes_received


def _pagerank(
    mesh: Mesh, w: _Wiring, params: KernelParams, result: RankResult
) -> np.ndarray:
    p = w.part
    n = p.num_nodes
    d = params.damping
    rank_own = np.full(p.num_own, 1.0 / n)
    dangling = p.own_outdeg == 0
    outdeg = np.maximum(p.src_outdeg, 1).astype(np.float64)
    dangling_sum = float(
        mesh.allreduce(np.array([rank_own[dangling].sum()]), "sum", Tag(0, _REDUCE))[0]
    )
    for step in range(1, params.iterations + 1):
        values, _, served = _pull(mesh, w, rank_own, None, step)
        messages = (values / outdeg)[w.edge_slot]
        incoming = _push(mesh, w, None, messages, "sum", 0.0, step)
        acc, applied = _fold(incoming, p.num_own, "sum", 0.0, np.float64)
        new = (1.0 - d) / n + d * (acc + dangling_sum / n)
        local = np.array([np.abs(new - rank_own).sum(), new[dangling].sum()])
        l1, dangling_sum = (
            float(x) for x in mesh.allreduce(local, "sum", Tag(step, _REDUCE))
        )
        rank_own = new
        tasks = p.num_edges + applied + served
        result.tasks += tasks
        result.superstep_tasks.append(tasks)
        result.supersteps = step
        if params.tol is not None and l1 < n * params.tol:
            break
    return rank_own


def _propagate(
    mesh: Mesh, w: _Wiring, algorithm: str, params: KernelParams, result: RankResult
) -> np.ndarray:
    p = w.part
    state: np.ndarray
    if algorithm == "cc":
        state = p.own.copy()
        active = np.ones(p.num_own, dtype=np.bool_)
    else:
        inf: float | int = np.inf if algorithm == "sssp" else INT_INF
        state = np.full(
            p.num_own, inf, dtype=np.float64 if algorithm == "sssp" else np.int64
        )
        active = p.own == params.source
        state[active] = 0
    identity: float | int = np.inf if algorithm == "sssp" else INT_INF
    weight = p.weight if p.weight is not None else np.ones(p.num_edges)
    step = 0
    while True:
        step += 1
        values, slot_active, served = _pull(mesh, w, state, active, step)
        edges = _active_edges(w, slot_active)
        src = w.edge_slot if edges is None else w.edge_slot[edges]
        messages = values[src]
        if algorithm == "bfs":
            messages = messages + 1
        elif algorithm == "sssp":
            messages = messages + (weight if edges is None else weight[edges])
        incoming = _push(mesh, w, edges, messages, "min", identity, step)
        best, applied = _fold(incoming, p.num_own, "min", identity, state.dtype.type)
        active = best < state
        state = np.where(active, best, state)
        tasks = int(src.shape[0]) + applied + served
        result.tasks += tasks
        result.superstep_tasks.append(tasks)
        changed = mesh.allreduce(
            np.array([int(active.sum())]), "sum", Tag(step, _REDUCE)
        )
        result.supersteps = step
        if int(changed[0]) == 0:
            return state


def rank_main(
    mesh: Mesh,
    graph: CSRGraph,
    algorithm: str,
    placement: Placement,
    params: KernelParams,
    cut: Cut | None = None,
) -> RankResult:
    """Run ``algorithm`` as rank ``mesh.rank`` of ``mesh.size`` (SPMD; see module docs).

    ``graph`` is the whole graph (symmetrised already for CC); each rank cuts its own
    share (of ``cut`` when the driver computed the placement once). Traffic and
    busy time are counted over the supersteps only.
    """
    part = partition_rank(graph, mesh.size, mesh.rank, placement, cut)
    wiring = _Wiring(part)
    wiring.setup(mesh)
    result = RankResult(
        mesh.rank, part.own, np.empty(0), 0, pulled=int(part.pull_ptr[-1])
    )
    sent0, frames0, received0 = _stats(mesh)
    busy0, wall0, process0 = (
        time.thread_time(),
        time.perf_counter(),
        time.process_time(),
    )
    if algorithm == "pagerank":
        values = _pagerank(mesh, wiring, params, result)
    else:
        values = _propagate(mesh, wiring, algorithm, params, result)
    result.busy_s = time.thread_time() - busy0
    result.wall_s = time.perf_counter() - wall0
    result.process_s = time.process_time() - process0
    sent, frames, received = _stats(mesh)
    result.bytes_sent, result.frames_sent = sent - sent0, frames - frames0
    result.bytes_received = received - received0
    result.values = values
    return result
