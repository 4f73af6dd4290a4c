"""Topology: one streaming layer's view of the graph, over a ``DynamicGraph``.

A thin adapter that gives the flush algebra what it needs from
:class:`strata.storage.DynamicGraph` in its own terms:

* :meth:`Topology.apply` applies ordered edge operations (``+k`` / ``-k`` copies)
  and returns the *net* change per ``(src, dst)`` pair, with deletes of absent
  copies resolved (dropped and counted) exactly as the graph resolves them;
* :meth:`Topology.out_edges` / :meth:`Topology.in_edges` return ``(row, neighbour)``
  pairs for many nodes at once, one entry per parallel copy;
* with ``skips_loops`` (GCN, whose batch layer replaces self-loops by its own),
  loops stay in the graph (the next layer needs them in the diff) but are left out
  of every aggregation view.

Examples:
    >>> import numpy as np
    >>> t = Topology()
    >>> t.grow(3)
    >>> t.apply(np.array([0, 0, 1]), np.array([1, 1, 2]), np.array([1, 1, -1]))
    (array([0]), array([1]), array([2]))
    >>> t.dropped_deletes
    1
    >>> rows, cols = t.out_edges(np.array([0]))
    >>> cols.tolist()
    [1, 1]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from strata.storage import CSRGraph, DynamicGraph, UpdateArrays, UpdateKind

Int64Array = np.ndarray

_EMPTY = np.zeros(0, dtype=np.int64)


def _pack(src: Int64Array, dst: Int64Array) -> Int64Array:
    return (src.astype(np.int64) << 32) | dst.astype(np.int64)


class Topology:
    """A layer's directed multigraph (see the module docstring).

    Args:
        graph: The graph to start from (default: empty).
        skips_loops: Leave self-loops out of aggregation views.
    """

    def __init__(
        self, graph: DynamicGraph | None = None, *, skips_loops: bool = False
    ) -> None:
        self.graph = graph or DynamicGraph()
        self.skips_loops = skips_loops

    @classmethod
    def from_graph(cls, graph: CSRGraph, *, skips_loops: bool = False) -> Topology:
        """Start from a CSR graph (shared, not copied: it is immutable)."""
        return cls(DynamicGraph(graph), skips_loops=skips_loops)

    @property
    def num_nodes(self) -> int:
        """Nodes of the graph."""
        return self.graph.num_nodes

    @property
    def dropped_deletes(self) -> int:
        """Deletes of absent copies seen so far (no-ops)."""
        return self.graph.dropped_deletes

    def grow(self, num_nodes: int) -> None:
        """Make sure node ids below ``num_nodes`` exist."""
        if num_nodes > self.graph.num_nodes:
            self.graph.add_nodes(num_nodes - self.graph.num_nodes)

    # ------------------------------------------------------------------ updates
    def apply(
        self, src: Int64Array, dst: Int64Array, count: Int64Array
    ) -> tuple[Int64Array, Int64Array, Int64Array]:
        """Apply edge operations in order; return the net ``(src, dst, count)``.

        Pairs whose copies did not change (an add cancelled by a delete, or a
        dropped delete) are left out; the result is sorted by ``(src, dst)``.
        """
        if src.shape[0] == 0:
            return _EMPTY, _EMPTY, _EMPTY
        keys = _pack(src, dst)
        unique, inverse = np.unique(keys, return_inverse=True)
        usrc, udst = unique >> 32, unique & 0xFFFFFFFF
        if bool((count > 0).all()):  # only additions: nothing can be dropped
            net = np.bincount(inverse, weights=count).astype(np.int64)
            self.graph.add_edges(np.repeat(src, count), np.repeat(dst, count))
            return usrc, udst, net
        before = self.graph.multiplicity(usrc, udst)
        copies = np.abs(count)
        kind = np.where(count > 0, UpdateKind.ADD_EDGE, UpdateKind.REMOVE_EDGE)
        rows = int(copies.sum())
        self.graph.apply(
            UpdateArrays(
                kind=np.repeat(kind, copies).astype(np.int8),
                src=np.repeat(src, copies),
                dst=np.repeat(dst, copies),
                node=np.full(rows, -1, dtype=np.int64),
                feature=np.zeros((rows, 0), dtype=np.float32),
                event_time=np.zeros(rows, dtype=np.int64),
            )
        )
        net = self.graph.multiplicity(usrc, udst) - before
        changed = net != 0
        return usrc[changed], udst[changed], net[changed]

    def aggregated(
        self, src: Int64Array, dst: Int64Array, count: Int64Array
    ) -> tuple[Int64Array, Int64Array, Int64Array]:
        """The pairs of a diff that take part in aggregation (loops dropped if so)."""
        if not self.skips_loops:
            return src, dst, count
        keep = src != dst
        return src[keep], dst[keep], count[keep]

    # ------------------------------------------------------------------ queries
    def out_edges(self, nodes: Int64Array) -> tuple[Int64Array, Int64Array]:
        """``(row, dst)`` for every out-edge copy of ``nodes[row]``."""
        return self._edges(nodes, self.graph.out_adjacency)

    def in_edges(self, nodes: Int64Array) -> tuple[Int64Array, Int64Array]:
        """``(row, src)`` for every in-edge copy of ``nodes[row]``."""
        return self._edges(nodes, self.graph.in_adjacency)

    def _edges(
        self, nodes: Int64Array, adjacency: Any
    ) -> tuple[Int64Array, Int64Array]:
        if nodes.shape[0] == 0:
            return _EMPTY, _EMPTY
        indptr, neighbours = adjacency(nodes)
        rows = np.repeat(np.arange(nodes.shape[0], dtype=np.int64), np.diff(indptr))
        if self.skips_loops:
            keep = neighbours != nodes[rows]
            rows, neighbours = rows[keep], neighbours[keep]
        return rows, neighbours

    def edges(self) -> tuple[Int64Array, Int64Array]:
        """Every edge copy as ``(src, dst)`` (loops dropped if so)."""
        src, dst = self.graph.edges()
        if self.skips_loops:
            keep = src != dst
            src, dst = src[keep], dst[keep]
        return src, dst

    # ------------------------------------------------------------------ state
    def state(self) -> dict[str, np.ndarray]:
        """The graph's checkpoint arrays (see ``DynamicGraph.state``)."""
        return self.graph.state()

    @classmethod
    def from_state(cls, state: dict[str, Any], *, skips_loops: bool) -> Topology:
        """Inverse of :meth:`state`."""
        arrays = {k: np.asarray(v) for k, v in state.items()}
        return cls(DynamicGraph.from_state(arrays), skips_loops=skips_loops)

    def __repr__(self) -> str:
        return f"Topology({self.graph!r}, skips_loops={self.skips_loops})"
