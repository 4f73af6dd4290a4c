"""Source chunking: which sources iteration ``t`` refreshes, and what that costs.

Chunk ids come from global ids with a counter-based hash (``emma.md`` §3.2)::

    chunk(v, cycle) = mix64(seed, cycle, v) mod S

so every worker decides, for its own rows and for its halo, the same way and
without talking, and the active set of an iteration does not depend on the
worker count or the partition (K-invariance). Iteration ``t`` uses cycle
``t // redraw_every`` and chunk ``t mod S``; with ``redraw_every = S`` every
source is active in exactly one iteration of each cycle, so every edge is
aggregated exactly once per cycle.

For one worker, :class:`SourceChunker` gives per iteration:

* :meth:`~SourceChunker.active`: a bool mask over the local rows (owned, then
  halo); owned sources are chunked exactly like remote ones;
* :meth:`~SourceChunker.plan`: the halo plan restricted to active rows
  (:meth:`HaloPlan.restrict`; inactive halo rows read as zeros);
* :meth:`~SourceChunker.graph`: the local CSR with only the edges whose source
  is active, in their original order, and ``n_t`` (the refreshed weight into
  each destination); :attr:`~SourceChunker.degree` is the full weighted
  in-degree (self-loops included where the propagation graph has them), computed
  by the same code so that S=1 gives ``n_t == deg`` bit for bit.

Plans and graphs are built once per (cycle, chunk) and kept for the current
cycle only.

Examples:
    >>> import numpy as np
    >>> ids = np.arange(10)
    >>> a, b = chunk_ids(ids, splits=3, cycle=0, seed=0), chunk_ids(ids[5:], 3, 0, 0)
    >>> bool((a[5:] == b).all()), sorted(set(a.tolist())) == [0, 1, 2]
    (True, True)
    >>> bool((chunk_ids(ids, 3, cycle=1, seed=0) == a).all())  # a new cycle redraws
    False
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from strata.operators.trainers.distributed.emma.config import EmmaConfig
from strata.operators.trainers.distributed.halo import HaloPlan
from strata.operators.trainers.distributed.local_graph import LocalGraph
from strata.operators.trainers.distributed.programs import SliceTensors

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL2 = np.uint64(0x94D049BB133111EB)


def mix64(z: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser on a uint64 array (wraps modulo 2^64)."""
    z = np.asarray(z, dtype=np.uint64)
    z = (z ^ (z >> np.uint64(30))) * _MUL1
    z = (z ^ (z >> np.uint64(27))) * _MUL2
    return z ^ (z >> np.uint64(31))


def chunk_ids(global_ids: np.ndarray, splits: int, cycle: int, seed: int) -> np.ndarray:
    """``mix64(seed, cycle, v) mod splits`` for every global id ``v`` (int64)."""
    key = mix64(np.array([seed], dtype=np.uint64) * _GOLDEN)
    key = mix64(key ^ (np.array([cycle], dtype=np.uint64) * _MUL1))
    ids = np.asarray(global_ids, dtype=np.int64).astype(np.uint64)
    h = mix64(ids * _GOLDEN ^ key)
    return (h % np.uint64(splits)).astype(np.int64)


def weighted_in_degree(local: LocalGraph, keep: np.ndarray | None = None) -> np.ndarray:
    """Per destination, the summed weights (1 per edge if unweighted) of kept edges.

    One code path for ``n_t`` and ``deg``: with every edge kept the two are
    equal bit for bit.
    """
    weights = (
        np.ones(local.num_edges, np.float64)
        if local.values is None
        else local.values.astype(np.float64)
    )
    if keep is not None:
        weights = np.where(keep, weights, 0.0)
    dst = np.repeat(np.arange(local.num_dst, dtype=np.int64), np.diff(local.indptr))
    return np.bincount(dst, weights=weights, minlength=local.num_dst).astype(np.float32)


def filter_sources(local: LocalGraph, keep_src: np.ndarray) -> LocalGraph:
    """The slice with only the edges whose source row is kept (order unchanged)."""
    keep = keep_src[local.indices]
    dst = np.repeat(np.arange(local.num_dst, dtype=np.int64), np.diff(local.indptr))
    indptr = np.zeros(local.num_dst + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst[keep], minlength=local.num_dst), out=indptr[1:])
    return LocalGraph(
        indptr=indptr,
        indices=local.indices[keep],
        values=None if local.values is None else local.values[keep],
        row_scale=local.row_scale,
        num_src=local.num_src,
    )


@dataclass(frozen=True, slots=True, eq=False)
class ChunkStep:
    """What one (cycle, chunk) refreshes on one worker.

    Attributes:
        active: bool ``[local rows]``: the active sources (owned, then halo).
        plan: the halo plan restricted to active rows.
        part: the local CSR restricted to active sources, on the device.
        refreshed: float32 ``[owned]`` refreshed weight into each destination.
        active_sources: active local rows.
        edges: edges aggregated.
    """

    active: torch.Tensor
    plan: HaloPlan
    part: SliceTensors
    refreshed: torch.Tensor
    active_sources: int
    edges: int


class SourceChunker:
    """One worker's per-iteration active sources, plans and graphs.

    Args:
        config: the Emma settings.
        local_ids: int64 global ids of the local rows (owned, then halo).
        halo: the worker's full :class:`HaloPlan`.
        local: the worker's full slice (destinations: owned rows).
        num_nodes: vertices of the whole graph (for global-id masks).
        device: where plans and graphs go.

    Attributes:
        degree: float32 ``[owned]`` full weighted in-degree, on the device.
    """

    def __init__(
        self,
        config: EmmaConfig,
        local_ids: np.ndarray,
        halo: HaloPlan,
        local: LocalGraph,
        num_nodes: int,
        device: torch.device,
    ) -> None:
        self.config = config
        self.local_ids = np.asarray(local_ids, dtype=np.int64)
        self.halo = halo
        self.local = local
        self.num_nodes = int(num_nodes)
        self.device = device
        self.degree = torch.from_numpy(weighted_in_degree(local)).to(device)
        self._cycle = -1
        self._chunks = np.empty(0, np.int64)
        self._steps: dict[int, ChunkStep] = {}

    def chunks(self, cycle: int) -> np.ndarray:
        """Chunk id of every local row in ``cycle``."""
        if cycle != self._cycle:
            c = self.config
            self._chunks = chunk_ids(self.local_ids, c.splits, cycle, c.seed)
            self._cycle, self._steps = cycle, {}
        return self._chunks

    def step(self, iteration: int) -> ChunkStep:
        """The active sources, plan and graph of ``iteration`` (cached per cycle)."""
        c = self.config
        chunks = self.chunks(c.cycle_of(iteration))
        k = c.chunk_of(iteration)
        if k not in self._steps:
            self._steps[k] = self._build(chunks == k)
        return self._steps[k]

    def _build(self, active: np.ndarray) -> ChunkStep:
        by_global = torch.zeros(self.num_nodes, dtype=torch.bool)
        by_global[torch.from_numpy(self.local_ids[active])] = True
        plan = self.halo.restrict(by_global.to(self.halo.send_ids.device))
        part = filter_sources(self.local, active)
        keep = active[self.local.indices]
        refreshed = torch.from_numpy(weighted_in_degree(self.local, keep))
        return ChunkStep(
            active=torch.from_numpy(active).to(self.device),
            plan=plan.to(self.device),
            part=SliceTensors.of(part, self.device),
            refreshed=refreshed.to(self.device),
            active_sources=int(active.sum()),
            edges=part.num_edges,
        )
