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
from strata.partition.coarsen import CoarsenConfig, coarsen
from strata.partition.initial import InitialConfig, recursive_bisection
from strata.partition.refine import new_info, project_info, refine_level
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

    def __post_init__(self) -> None:
        check_settings(
            _WHERE,
            ints={"k": self.k, "refine_passes": self.refine_passes, "seed": self.seed},
            floats={"imbalance": self.imbalance, "edge_imbalance": self.edge_imbalance},
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
            where = recursive_bisection(
                blended(coarsest) if two else coarsest,
                k,
                self.initial,
                self.imbalance,
                state,
                tries,
            )
        with timer.phase("refine"):
            info, cut = new_info(coarsest, where, k)
            nlevels = len(levels) - 1
            for i in range(nlevels + 1):
                level = levels[nlevels - i]
                if i > 0:
                    assert level.cmap is not None
                    info, cut = project_info(level.graph, level.cmap, info, k)
                cut = refine_level(
                    level.graph,
                    info,
                    cut,
                    cap,
                    self.imbalance,
                    self.refine_passes,
                    balance_first=2 * i >= nlevels,
                    final=i == nlevels,
                    state=state,
                    floor=floor,
                    cap2=cap2,
                    imbalance2=self.edge_imbalance if two else None,
                )
            if not islands.size:
                result: Int32Array = info.where
                return result
            full = np.empty(graph.num_nodes, dtype=np.int32)
            full[core_ids] = info.where
            full[islands] = fill_lightest(info.pwgts.copy(), graph.vwgt[islands])
            return full


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
