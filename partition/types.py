"""Shared data structures: Partition, PartitionReport and the Partitioner protocol.

Every partitioner is a frozen config object with a ``partition(graph)`` method that
returns a :class:`Partition`: an int32 owner per vertex (the *master* for vertex-cuts),
for vertex-cuts also the part of every undirected edge, and a report with the metrics
of ``strata.partition.metrics`` (edge cut, balance, replication factor) plus timings.

Examples:
    >>> import numpy as np
    >>> from strata.storage import CSRGraph
    >>> from strata.partition.baselines import HashPartitioner
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2, 3]), np.array([1, 2, 3, 0]))
    >>> p = HashPartitioner(k=2).partition(g)
    >>> p.kind, p.k, p.assignment.dtype, p.report.method, p.report.backend
    (<CutKind.EDGE_CUT: 'edge_cut'>, 2, dtype('int32'), 'hash', 'strata-hash')
    >>> sorted(p.report.to_dict())[:4]
    ['backend', 'config', 'edge_balance', 'edge_cut']
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from strata.partition._types import Float64Array, Int32Array
from strata.storage import CSRGraph


class CutKind(enum.Enum):
    """Whether a partition splits vertices (edge-cut) or edges (vertex-cut)."""

    EDGE_CUT = "edge_cut"
    VERTEX_CUT = "vertex_cut"


@dataclass(frozen=True, slots=True)
class PartitionReport:
    """Quality and cost of one partition (metrics: ``strata.partition.metrics``).

    Attributes:
        method: partitioner name (``metis``, ``grem``, ``ldg``, ...).
        k: number of parts.
        seed: the partitioner's seed.
        num_nodes: vertices of the undirected simple graph.
        num_edges: undirected edges of that graph (each counted once).
        edge_cut: undirected edges whose endpoints are in different parts (weighted:
            their total weight); 0 for vertex-cuts by definition.
        edge_cut_fraction: ``edge_cut`` over the edge count (or total weight).
        replication_factor: vertex-cut: mean number of parts holding an edge of a
            vertex; edge-cut: ``1 + sum of 1-hop halo sizes / n``.
        vertex_balance: ``max part weight / (total weight / k)``.
        edge_balance: edge-cut: ``max_p sum deg / (2m / k)``; vertex-cut:
            ``max_p |E_p| / (m / k)``.
        train_balance: vertex balance over training vertices, when a mask was given.
        part_sizes: vertices per part (masters for vertex-cuts).
        seconds: wall time of ``partition`` (input checks and metrics excluded).
        phase_seconds: wall time per phase (``coarsen``, ``initial``, ``refine``,
            ``seed``, ``pass_1``, ...).
        peak_rss_bytes: extra peak resident memory, set only by an isolated run
            (CLI, benchmarks): ``ru_maxrss`` minus the RSS after the input loaded.
        config: the partitioner's frozen config as plain data.
        backend: the engine that computed the assignment: ``strata-<name>`` for
            Strata's own (``strata-multilevel``, ``strata-grem``, ...), or an
            external library (``pymetis``, ``kahip``; see
            ``strata.partition.backends``).
    """

    method: str
    k: int
    seed: int
    num_nodes: int
    num_edges: int
    edge_cut: float
    edge_cut_fraction: float
    replication_factor: float
    vertex_balance: float
    edge_balance: float
    train_balance: float | None
    part_sizes: tuple[int, ...]
    seconds: float
    phase_seconds: Mapping[str, float] = field(default_factory=dict)
    peak_rss_bytes: int | None = None
    config: Mapping[str, object] = field(default_factory=dict)
    backend: str = "strata"

    @property
    def imbalance(self) -> float:
        """Alias of :attr:`vertex_balance` (the issue's name; 1.0 is perfect)."""
        return self.vertex_balance

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data, ``imbalance`` included."""
        return {
            "method": self.method,
            "backend": self.backend,
            "k": self.k,
            "seed": self.seed,
            "num_nodes": self.num_nodes,
            "num_edges": self.num_edges,
            "edge_cut": self.edge_cut,
            "edge_cut_fraction": self.edge_cut_fraction,
            "replication_factor": self.replication_factor,
            "imbalance": self.vertex_balance,
            "vertex_balance": self.vertex_balance,
            "edge_balance": self.edge_balance,
            "train_balance": self.train_balance,
            "part_sizes": list(self.part_sizes),
            "seconds": self.seconds,
            "phase_seconds": dict(self.phase_seconds),
            "peak_rss_bytes": self.peak_rss_bytes,
            "config": dict(self.config),
        }


@dataclass(frozen=True, slots=True, eq=False)
class Partition:
    """A k-way partition of a graph's vertices (and, for vertex-cuts, its edges).

    Attributes:
        kind: edge-cut (vertices split) or vertex-cut (edges split).
        k: number of parts.
        assignment: ``(n,)`` int32 owner of every vertex in ``[0, k)``; for
            vertex-cuts the master (first part that received one of its edges).
        edge_assignment: vertex-cut only: ``(m,)`` int32 part of every undirected
            edge, in the order of ``strata.partition.metrics.undirected_edges(graph)``.
        report: metrics and timings.
    """

    kind: CutKind
    k: int
    assignment: Int32Array
    edge_assignment: Int32Array | None
    report: PartitionReport

    def part_sizes(self) -> tuple[int, ...]:
        """Vertices per part."""
        return tuple(int(c) for c in np.bincount(self.assignment, minlength=self.k))


@runtime_checkable
class Partitioner(Protocol):
    """A frozen config with a ``partition`` method (coupe's shared trait)."""

    @property
    def k(self) -> int:
        """Number of parts."""
        ...

    def partition(
        self, graph: CSRGraph, *, node_weights: Float64Array | None = None
    ) -> Partition:
        """Partition ``graph`` (as undirected; see ``strata.partition.metrics``)."""
        ...


@runtime_checkable
class Refiner(Protocol):
    """Improves an existing partition (e.g. LDG, then greedy k-way refinement)."""

    def refine(self, graph: CSRGraph, part: Partition) -> Partition:
        """Return a refined copy of ``part``."""
        ...
