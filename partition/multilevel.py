"""Multilevel k-way partitioning (METIS-style): coarsen -> initial -> uncoarsen.

The phases live in ``coarsen.py``, ``initial.py`` and ``refine.py``; this driver
times each one (``phase_seconds``: ``coarsen``, ``initial``, ``refine``).

Isolated vertices are set aside first: the rest is partitioned under the *global*
cap (so a part may hold more connected weight than ``(1 + eps) W_c / k``), then the
isolated vertices fill the lightest parts. They are free balance filler, and using
them this way lowers the cut without breaking the cap.

References:
    Karypis and Kumar, "Multilevel k-way Partitioning Scheme for Irregular Graphs",
    JPDC 48(1), 1998. METIS 5.2.1, github.com/KarypisLab/METIS.

Examples:
    >>> import numpy as np
    >>> from strata.storage import CSRGraph
    >>> src = np.arange(200); dst = (src + 1) % 200           # a ring of 200
    >>> p = MultilevelPartitioner(k=4, seed=0).partition(CSRGraph.from_edges(src, dst))
    >>> p.report.edge_cut, max(p.report.part_sizes) <= 51
    (4.0, True)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from strata.partition._graph import (
    NO_VWGT2,
    PhaseTimer,
    WeightedCSR,
    edge_cut_partition,
    fill_lightest,
    part_cap,
    prepare,
    second_cap,
    without_isolated,
)
from strata.partition._params import check_settings
from strata.partition._rng import new_state
from strata.partition._types import Float64Array, Int32Array
from strata.partition.coarsen import CoarsenConfig, Level, coarsen, restrict
from strata.partition.fm import fm_refine
from strata.partition.initial import InitialConfig, recursive_bisection
from strata.partition.refine import (
    KWayInfo,
    level_bounds,
    new_info,
    project_info,
    refine_level,
)
from strata.partition.types import Partition
from strata.storage import CSRGraph

_WHERE = "MultilevelPartitioner"


@dataclass(frozen=True, slots=True)
class MultilevelPartitioner:
    """METIS-style multilevel k-way partitioner (numba, sequential, deterministic).

    Attributes:
        k: number of parts.
        imbalance: eps: every part weighs at most
            ``max(ceil(W / k), floor((1 + eps) * W / k))``.
        refine_passes: greedy refinement passes per level (METIS ``niter``).
        seed: random seed; the same seed gives the same assignment.
        coarsening: coarsening constants.
        initial: initial-partitioning constants.
        fm_passes: k-way FM passes (``strata.partition.fm``: negative-gain moves
            with rollback) after greedy refinement, on every level with at
            most ``fm_max_nodes`` vertices; 0 turns FM off.
        fm_limit: moves without a new best cut before an FM pass stops.
        fm_max_nodes: largest level that gets FM.
        initial_runs: independent initial partitions of the coarsest graph,
            each refined there (greedy + FM); the lowest cut is kept.
        vcycles: extra V-cycles (KaHIP's global iteration): coarsen again
            matching only vertices of the same part, so the coarsest graph
            carries the partition, and refine back up; stops early when a
            cycle does not lower the cut.
        edge_imbalance: eps of a second balance constraint on edges (METIS
            ``ncon = 2`` with vertex weights ``[w, degree]``): every part's sum
            of degrees stays at most ``max(ceil(2m / k), floor((1 + eps) 2m / k))``
            as well. ``None`` (default) balances vertices only.
    """

    k: int
    imbalance: float = 0.03
    refine_passes: int = 10
    seed: int = 0
    coarsening: CoarsenConfig = field(default_factory=CoarsenConfig)
    initial: InitialConfig = field(default_factory=InitialConfig)
    edge_imbalance: float | None = None
    fm_passes: int = 2
    fm_limit: int = 64
    fm_max_nodes: int = 50_000
    vcycles: int = 0
    initial_runs: int = 1

    def __post_init__(self) -> None:
        check_settings(
            _WHERE,
            ints={
                "k": self.k,
                "refine_passes": self.refine_passes,
                "seed": self.seed,
                "fm_passes": self.fm_passes,
                "fm_limit": self.fm_limit,
                "fm_max_nodes": self.fm_max_nodes,
                "vcycles": self.vcycles,
                "initial_runs": self.initial_runs,
            },
            floats={
                "imbalance": self.imbalance,
                "edge_imbalance": self.edge_imbalance,
            },
        )

    def partition(
        self, graph: CSRGraph, *, node_weights: Float64Array | None = None
    ) -> Partition:
        """Partition ``graph`` (read as undirected; see ``strata.partition.metrics``).

        Raises:
            PartitionError: on k out of range, an empty or edgeless graph, or
                negative / non-finite weights.
        """
        simple, wgraph = prepare(graph, self.k, node_weights, _WHERE)
        if self.edge_imbalance is not None:
            wgraph = wgraph.with_degree_constraint()
        timer = PhaseTimer()
        start = time.perf_counter()
        where = self.partition_weighted(wgraph, timer)
        seconds = time.perf_counter() - start
        return edge_cut_partition(
            method="metis",
            k=self.k,
            seed=self.seed,
            simple=simple,
            assignment=where,
            seconds=seconds,
            phase_seconds=timer.seconds,
            config=self,
            node_weights=None if node_weights is None else wgraph.vwgt,
            backend="strata-multilevel",
        )

    def partition_weighted(
        self, graph: WeightedCSR, timer: PhaseTimer | None = None
    ) -> Int32Array:
        """Assignment of an already validated :class:`WeightedCSR` (no report).

        With ``edge_imbalance`` set and ``graph.vwgt2`` present, ``vwgt2`` is
        the second constraint (``partition`` puts the degrees there).
        """
        timer = timer or PhaseTimer()
        k = self.k
        if k == 1:
            return np.zeros(graph.num_nodes, dtype=np.int32)
        state = new_state(self.seed)
        cap = part_cap(graph.vwgt, k, self.imbalance)
        two = self.edge_imbalance is not None and graph.has_second
        if not two and graph.has_second:
            graph = replace(graph, vwgt2=NO_VWGT2)
        cap2 = second_cap(graph, k, self.edge_imbalance)
        core, core_ids, islands = without_isolated(graph)
        floor = None
        if islands.size:  # isolated vertices will fill light parts
            floor = max(0, core.total_vwgt - (k - 1) * cap)
        with timer.phase("coarsen"):
            levels = coarsen(core, k, self.coarsening, state)
        coarsest = levels[-1].graph
        with timer.phase("initial"):
            if core.num_nodes <= self.coarsening.small_graph:
                tries = self.initial.tries or self.initial.small_tries
            else:  # METIS: 4 tries when coarsening reached 30 k vertices, else 5
                small = coarsest.num_nodes <= self.coarsening.per_part * k
                tries = self.initial.tries or (4 if small else 5)
            limits = _Limits(cap, floor, cap2, self.edge_imbalance if two else None)
            where = self._initial(coarsest, two, tries, limits, state)
        with timer.phase("refine"):
            info, cut = self._uncoarsen(levels, where, limits, state)
        for _ in range(self.vcycles):
            with timer.phase("vcycle"):
                keep = info.where.copy()
                levels = coarsen(core, k, self.coarsening, state, keep=keep)
                coarse = restrict_levels(levels, keep)
                again, new_cut = self._uncoarsen(levels, coarse, limits, state)
                if new_cut > cut:
                    break
                improved = new_cut < cut
                info, cut = again, new_cut
                if not improved:
                    break
        if not islands.size:
            result: Int32Array = info.where
            return result
        full = np.empty(graph.num_nodes, dtype=np.int32)
        full[core_ids] = info.where
        full[islands] = fill_lightest(info.pwgts.copy(), graph.vwgt[islands])
        return full

    def _initial(
        self,
        coarsest: WeightedCSR,
        two: bool,
        tries: int,
        limits: _Limits,
        state: np.ndarray,
    ) -> Int32Array:
        """Best of ``initial_runs`` recursive bisections, each refined k-way."""
        best: Int32Array | None = None
        best_cut = -1
        for _ in range(self.initial_runs):
            where = recursive_bisection(
                blended(coarsest) if two else coarsest,
                self.k,
                self.initial,
                self.imbalance,
                state,
                tries,
            )
            if self.initial_runs == 1:
                return where
            info, cut = new_info(coarsest, where, self.k)
            cut = self._refine(coarsest, info, cut, limits, state, True, False)
            if best is None or cut < best_cut:
                best, best_cut = info.where.copy(), cut
        assert best is not None
        return best

    def _refine(
        self,
        graph: WeightedCSR,
        info: KWayInfo,
        cut: int,
        limits: _Limits,
        state: np.ndarray,
        balance_first: bool,
        final: bool,
    ) -> int:
        """Greedy refinement, then FM when the level is small enough."""
        cut = refine_level(
            graph,
            info,
            cut,
            limits.cap,
            self.imbalance,
            self.refine_passes,
            balance_first=balance_first,
            final=final,
            state=state,
            floor=limits.floor,
            cap2=limits.cap2,
            imbalance2=limits.imbalance2,
        )
        if self.fm_passes and graph.num_nodes <= self.fm_max_nodes:
            bounds = level_bounds(
                info,
                limits.cap,
                self.imbalance,
                limits.floor,
                limits.cap2,
                limits.imbalance2,
            )
            cut = fm_refine(
                graph,
                info,
                bounds,
                cut,
                self.fm_passes,
                self.fm_limit,
                state,
            )
        return cut

    def _uncoarsen(
        self,
        levels: list[Level],
        where: Int32Array,
        limits: _Limits,
        state: np.ndarray,
    ) -> tuple[KWayInfo, int]:
        """Project ``where`` (of the coarsest level) up, refining every level."""
        k = self.k
        coarsest = levels[-1].graph
        info, cut = new_info(coarsest, where, k)
        nlevels = len(levels) - 1
        for i in range(nlevels + 1):
            level = levels[nlevels - i]
            if i > 0:
                assert level.cmap is not None
                info, cut = project_info(level.graph, level.cmap, info, k)
            cut = self._refine(
                level.graph, info, cut, limits, state, 2 * i >= nlevels, i == nlevels
            )
        return info, cut


@dataclass(frozen=True, slots=True)
class _Limits:
    """The caps of one run: vertex cap and floor, edge cap and its eps."""

    cap: int
    floor: int | None
    cap2: int
    imbalance2: float | None


def restrict_levels(levels: list[Level], where: Int32Array) -> Int32Array:
    """The coarsest level's assignment of a partition every level respects."""
    for level in levels[:-1]:
        assert level.cmap is not None
        where = restrict(level.cmap, where, int(level.cmap.max()) + 1)
    return where


def blended(graph: WeightedCSR) -> WeightedCSR:
    """One weight for the initial bisections of a two-constraint graph.

    ``w = w1 / W1 + w2 / W2`` (scaled to integers, mean about 16 per vertex), so
    each bisection splits both totals about evenly on average; k-way refinement
    then enforces each cap on its own. METIS bisects with one queue per constraint
    instead; the blend keeps Strata's single-weight bisection code.
    """
    n = graph.num_nodes
    w1 = graph.vwgt.astype(np.float64) / max(graph.total_vwgt, 1)
    w2 = graph.vwgt2.astype(np.float64) / max(int(graph.vwgt2.sum()), 1)
    weights = np.rint((w1 + w2) * (8.0 * n)).astype(np.int64)
    np.maximum(weights, 1, out=weights)
    return WeightedCSR(graph.xadj, graph.adjncy, graph.adjwgt, weights)
