"""Input checks and the weighted CSR every numba kernel of the package reads.

:func:`prepare` turns a user's :class:`~strata.storage.CSRGraph` plus optional node
weights into a :class:`WeightedCSR` over the undirected simple graph, raising
:class:`~strata.partition.errors.PartitionError` on bad input (k out of range, no
vertices, no edges, negative or non-finite weights). :func:`build_report` computes the
shared report fields.

Weights become int64 as METIS requires: integral weights are kept; fractional ones
are scaled so the largest becomes 10**6 and rounded, a positive weight never rounding
to 0.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from strata.partition._jit import njit
from strata.partition._types import BoolArray, Float64Array, Int32Array, Int64Array
from strata.partition.errors import PartitionError
from strata.partition.metrics import (
    NO_WEIGHTS,
    as_undirected_simple,
    balance,
    balance_cap,
    cut_stats,
)
from strata.partition.types import CutKind, Partition, PartitionReport
from strata.storage import CSRGraph

_FRACTIONAL_SCALE = 1e6

#: The ``vwgt2`` of a single-constraint graph (one numba signature for both).
NO_VWGT2 = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True, slots=True, eq=False)
class WeightedCSR:
    """Undirected simple graph with int64 vertex and edge weights (METIS layout).

    Attributes:
        xadj: ``(n + 1,)`` int64 row offsets.
        adjncy: neighbour ids (int32), both directions of every edge.
        adjwgt: ``(nnz,)`` edge weights (symmetric): int32 while the total weight
            fits (coarse levels only merge weights), else int64.
        vwgt: ``(n,)`` int64 vertex weights (the first balance constraint).
        vwgt2: ``(n,)`` int64 weights of a second balance constraint (METIS
            ``ncon = 2``; Strata uses vertex degrees, so parts balance their edge
            endpoints too), or an empty array when there is none.
    """

    xadj: Int64Array
    adjncy: Int32Array
    adjwgt: Int32Array | Int64Array
    vwgt: Int64Array
    vwgt2: Int64Array = dataclasses.field(default_factory=lambda: NO_VWGT2)

    @property
    def num_nodes(self) -> int:
        """Vertex count."""
        return int(self.xadj.shape[0] - 1)

    @property
    def total_vwgt(self) -> int:
        """Sum of vertex weights."""
        return int(self.vwgt.sum())

    @property
    def has_second(self) -> bool:
        """Whether a second balance constraint (``vwgt2``) is present."""
        return bool(self.vwgt2.shape[0] > 0)

    def with_degree_constraint(self) -> WeightedCSR:
        """This graph with ``vwgt2`` = vertex degree (edge endpoints per vertex)."""
        degree = np.diff(self.xadj).astype(np.int64)
        return dataclasses.replace(self, vwgt2=degree)

    def unit_edge_weights(self) -> bool:
        """Whether every edge weight is equal (METIS then matches at random)."""
        return bool(self.adjwgt.size == 0 or (self.adjwgt == self.adjwgt[0]).all())


def to_int_weights(values: np.ndarray, subject: str, where: str) -> Int64Array:
    """Check weights (finite, >= 0) and convert them to int64 (see module doc)."""
    w = np.asarray(values, dtype=np.float64)
    if w.size and not np.isfinite(w).all():
        pos = int(np.argmax(~np.isfinite(w)))
        raise PartitionError.build(
            subject, where, "finite weights", f"{w[pos]} at position {pos}"
        )
    if w.size and (w < 0).any():
        pos = int(np.argmax(w < 0))
        raise PartitionError.build(
            subject,
            where,
            "weights >= 0",
            f"{w[pos]} at position {pos}",
            "partitioners balance and cut non-negative weights only",
        )
    if w.size == 0 or np.array_equal(w, np.rint(w)):
        exact: Int64Array = w.astype(np.int64)
        return exact
    scaled = np.rint(w * (_FRACTIONAL_SCALE / w.max()))
    scaled[(scaled == 0) & (w > 0)] = 1
    result: Int64Array = scaled.astype(np.int64)
    return result


def check_k(k: int, num_nodes: int, where: str) -> None:
    """Raise unless ``1 <= k <= num_nodes``."""
    if not 1 <= k <= num_nodes:
        raise PartitionError.build(
            "k",
            where,
            f"1 <= k <= {num_nodes} (num_nodes)",
            str(k),
            "k counts parts; every part needs at least one vertex",
        )


def check_graph(graph: CSRGraph, k: int, where: str) -> CSRGraph:
    """Validate ``graph`` and ``k``; return the undirected simple graph."""
    n = graph.num_nodes
    if n == 0:
        raise PartitionError.build(
            "graph", where, "at least one vertex", "an empty graph (0 vertices)"
        )
    check_k(k, n, where)
    if graph.edge_weight is not None and graph.edge_weight.size:
        bad = ~np.isfinite(graph.edge_weight) | (graph.edge_weight < 0)
        if bad.any():
            pos = int(np.argmax(bad))
            raise PartitionError.build(
                "edge_weight",
                where,
                "finite weights >= 0",
                f"{graph.edge_weight[pos]} at edge {pos}",
            )
    simple = as_undirected_simple(graph)
    if simple.num_edges == 0:
        raise PartitionError.build(
            "graph",
            where,
            "at least one edge besides self-loops",
            f"{n} isolated vertices and no edges",
            "with no edges any balanced assignment has cut 0: use RandomPartitioner "
            "only if you must, or drop the partition step",
        )
    return simple


def check_node_weights(
    node_weights: np.ndarray | None, num_nodes: int, where: str
) -> Int64Array:
    """Validate optional node weights; return int64 weights (ones by default)."""
    if node_weights is None:
        return np.ones(num_nodes, dtype=np.int64)
    w = np.asarray(node_weights)
    if w.shape != (num_nodes,):
        raise PartitionError.build(
            "node_weights", where, f"shape ({num_nodes},)", f"shape {w.shape}"
        )
    iw = to_int_weights(w, "node_weights", where)
    if iw.sum() <= 0:
        raise PartitionError.build(
            "node_weights", where, "a positive total weight", "total 0"
        )
    return iw


def prepare(
    graph: CSRGraph, k: int, node_weights: np.ndarray | None, where: str
) -> tuple[CSRGraph, WeightedCSR]:
    """Validate the input; return the simple graph and its :class:`WeightedCSR`."""
    simple = check_graph(graph, k, where)
    vwgt = check_node_weights(node_weights, simple.num_nodes, where)
    adjwgt: Int32Array | Int64Array
    if simple.edge_weight is None:
        adjwgt = np.ones(simple.num_edges, dtype=np.int32)
    else:
        adjwgt = to_int_weights(simple.edge_weight, "edge_weight", where)
        if adjwgt.sum() < np.iinfo(np.int32).max:  # coarse weights sum up to it
            adjwgt = adjwgt.astype(np.int32)
    # Writable copies: numba compiles read-only arrays (CSRGraph freezes its own)
    # as a separate type, and coarse levels are writable, so one array type keeps
    # one compiled specialisation per kernel.
    xadj = np.array(simple.indptr, dtype=np.int64)
    adjncy = np.array(simple.indices, dtype=np.int32)
    return simple, WeightedCSR(xadj, adjncy, adjwgt, vwgt)


def without_isolated(graph: WeightedCSR) -> tuple[WeightedCSR, Int64Array, Int64Array]:
    """Split off degree-0 vertices: ``(core graph, core ids, isolated ids)``."""
    degree = np.diff(graph.xadj)
    isolated = degree == 0
    if not isolated.any():
        ids = np.arange(graph.num_nodes, dtype=np.int64)
        return graph, ids, np.empty(0, dtype=np.int64)
    core_ids = np.flatnonzero(~isolated)
    new_id = np.cumsum(~isolated, dtype=np.int64) - 1
    xadj = np.concatenate([[0], graph.xadj[1:][~isolated]]).astype(np.int64)
    adjncy = new_id[graph.adjncy].astype(np.int32)
    vwgt2 = graph.vwgt2[core_ids] if graph.has_second else graph.vwgt2
    core = WeightedCSR(xadj, adjncy, graph.adjwgt, graph.vwgt[core_ids], vwgt2)
    return core, core_ids, np.flatnonzero(isolated)


@njit(cache=True)
def _fill_lightest(
    pwgts: np.ndarray, weights: np.ndarray, order: np.ndarray
) -> np.ndarray:
    parts = np.empty(weights.shape[0], dtype=np.int32)
    k = pwgts.shape[0]
    for i in order:
        best = 0
        for p in range(1, k):
            if pwgts[p] < pwgts[best]:
                best = p
        parts[i] = best
        pwgts[best] += weights[i]
    return parts


def fill_lightest(pwgts: Int64Array, weights: Int64Array) -> Int32Array:
    """Give each item (heaviest first) to the currently lightest part."""
    order = np.argsort(-weights, kind="stable")
    result: Int32Array = _fill_lightest(pwgts, weights, order)
    return result


def part_cap(vwgt: Int64Array, k: int, eps: float) -> int:
    """Integer balance cap of ``strata.partition.metrics.balance_cap``."""
    return int(balance_cap(float(vwgt.sum()), k, eps))


#: The cap of an absent constraint: large, yet safe to add weights to in int64.
NO_CAP = np.iinfo(np.int64).max // 4


def second_cap(graph: WeightedCSR, k: int, eps: float | None) -> int:
    """Cap of the second constraint (``NO_CAP`` when the graph has none)."""
    if eps is None or not graph.has_second:
        return int(NO_CAP)
    return part_cap(graph.vwgt2, k, eps)


def config_dict(config: object) -> dict[str, object]:
    """A frozen config as plain JSON-ready data (enums by value, objects by repr)."""
    out: dict[str, object] = {}
    if not dataclasses.is_dataclass(config):
        return out
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if isinstance(value, enum.Enum):
            value = value.value
        elif value is not None and not isinstance(value, int | float | str | bool):
            value = repr(value)
        out[f.name] = value
    return out


@dataclass
class PhaseTimer:
    """Wall-clock seconds per named phase (Jet's timed driver)."""

    seconds: dict[str, float] = dataclasses.field(default_factory=dict)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the ``with`` body and add it to ``name``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            self.seconds[name] = self.seconds.get(name, 0.0) + elapsed


def build_report(
    *,
    method: str,
    k: int,
    seed: int,
    simple: CSRGraph,
    assignment: Int32Array,
    seconds: float,
    phase_seconds: Mapping[str, float],
    config: object,
    node_weights: Int64Array | None = None,
    train_mask: BoolArray | None = None,
    backend: str | None = None,
) -> PartitionReport:
    """Report of an edge-cut partition of the simple graph ``simple``.

    ``backend`` names the engine that ran (default ``strata-<method>``).
    """
    weights = NO_WEIGHTS if simple.edge_weight is None else simple.edge_weight
    cut, total, halos, degree_sums = cut_stats(
        simple.indptr, simple.indices, weights, assignment, k
    )
    vw: Float64Array | None = (
        None if node_weights is None else node_weights.astype(np.float64)
    )
    n = simple.num_nodes
    two_m = float(degree_sums.sum())
    return PartitionReport(
        method=method,
        k=k,
        seed=seed,
        num_nodes=n,
        num_edges=simple.num_edges // 2,
        edge_cut=cut,
        edge_cut_fraction=cut / total if total > 0 else 0.0,
        replication_factor=1.0 + float(halos.sum()) / n,
        vertex_balance=balance(assignment, k, vw),
        edge_balance=float(degree_sums.max() * k / two_m) if two_m > 0 else 1.0,
        train_balance=None
        if train_mask is None
        else balance(assignment, k, None, train_mask),
        part_sizes=tuple(int(c) for c in np.bincount(assignment, minlength=k)),
        seconds=seconds,
        phase_seconds=dict(phase_seconds),
        peak_rss_bytes=None,
        config=config_dict(config),
        backend=backend or f"strata-{method}",
    )


def edge_cut_partition(
    *,
    method: str,
    k: int,
    seed: int,
    simple: CSRGraph,
    assignment: np.ndarray,
    seconds: float,
    phase_seconds: Mapping[str, float],
    config: object,
    node_weights: Int64Array | None = None,
    backend: str | None = None,
) -> Partition:
    """Wrap an assignment of ``simple``'s vertices as an edge-cut :class:`Partition`."""
    a = np.ascontiguousarray(assignment, dtype=np.int32)
    report = build_report(
        method=method,
        k=k,
        seed=seed,
        simple=simple,
        assignment=a,
        seconds=seconds,
        phase_seconds=phase_seconds,
        config=config,
        node_weights=node_weights,
        backend=backend,
    )
    return Partition(CutKind.EDGE_CUT, k, a, None, report)
