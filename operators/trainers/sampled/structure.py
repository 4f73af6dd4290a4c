"""The graph structure a sampler worker holds: in-edges of the vertices it needs.

An Armada sampler worker samples the blocks of some trainers' seeds. Sampling
``L`` layers around a seed reads the in-edges of the seed and of every vertex
within ``L - 1`` in-hops of it (the last hop's vertices are only ids). So the
worker keeps exactly those rows of the in-adjacency and nothing else:
:func:`sampler_structure` finds the ``(L - 1)``-hop in-closure of the seeds with
one pass over the out-CSR per hop, and copies the in-edges of the closure into a
:class:`SamplerStructure`, a CSR on global ids whose other rows are empty.

Rows keep the order of the full graph's in-adjacency (:meth:`CSRGraph.csc`:
sources ascending), so :meth:`SamplerStructure.sampler` draws exactly the blocks
a sampler over the whole graph draws, for every seed in the closure.
``structure_bytes`` against ``full_structure_bytes`` says how much of the graph
one worker holds.

Examples:
    >>> import numpy as np
    >>> from strata.operators.samplers import SamplerConfig
    >>> from strata.storage import CSRGraph
    >>> # 0 -> 1 -> 2 -> 3, and 4 -> 3
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2, 4]), np.array([1, 2, 3, 3]))
    >>> part = sampler_structure(g, np.array([2]), num_layers=2)
    >>> part.vertices.tolist(), part.num_edges   # 2 and its in-neighbour 1
    ([1, 2], 2)
    >>> sampler = part.sampler(SamplerConfig(fanouts=(5, 5)), seed=0)
    >>> [b.src_global_ids.tolist() for b in sampler.sample(np.array([2]))]
    [[2, 1, 0], [2, 1]]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numba
import numpy as np

from strata.operators.samplers import NeighborSampler, SamplerConfig
from strata.storage import CSRGraph
from strata.storage._types import IndexArray, Int64Array

__all__ = ["SamplerStructure", "sampler_structure"]


@dataclass(frozen=True, slots=True, eq=False)
class SamplerStructure:
    """The in-edges of ``vertices``, as an in-adjacency CSR on global ids.

    Attributes:
        in_adjacency: rows are destinations; row ``v`` lists the sources of
            ``v``'s in-edges (sorted) for ``v`` in ``vertices``, and is empty
            for every other vertex.
        vertices: int64, sorted: the vertices whose in-edges are kept.
        full_structure_bytes: bytes of the whole graph's in-adjacency
            (``indptr`` and ``indices``), what a full replica would hold.
    """

    in_adjacency: CSRGraph
    vertices: Int64Array
    full_structure_bytes: int

    @property
    def num_edges(self) -> int:
        """In-edges held."""
        return int(self.in_adjacency.indices.shape[0])

    @property
    def structure_bytes(self) -> int:
        """Bytes held: the in-adjacency's ``indptr`` and ``indices``."""
        return int(self.in_adjacency.indptr.nbytes + self.in_adjacency.indices.nbytes)

    def sampler(self, config: SamplerConfig, seed: int) -> NeighborSampler:
        """A :class:`NeighborSampler` over this structure (rank-free keys).

        For seeds whose ``(L - 1)``-hop in-closure lies in ``vertices`` its
        blocks equal those of a sampler over the whole graph with the same
        ``config`` and ``seed``.
        """
        n = self.in_adjacency.num_nodes
        # NeighborSampler reads its graph's in-adjacency (graph.csc()). Hand it
        # ours as the cached transpose of an edgeless graph on the same ids,
        # instead of transposing a copy of the edges back and forth.
        shell = CSRGraph(
            indptr=np.broadcast_to(np.int64(0), (n + 1,)),
            indices=np.empty(0, dtype=self.in_adjacency.indices.dtype),
            num_nodes=n,
        )
        shell._csc.append(self.in_adjacency)
        return NeighborSampler(shell, config, seed=seed)

    def __repr__(self) -> str:
        return (
            f"SamplerStructure(vertices={self.vertices.size}, edges={self.num_edges}, "
            f"bytes={self.structure_bytes} of {self.full_structure_bytes})"
        )


def sampler_structure(
    graph: CSRGraph, seeds: np.ndarray, num_layers: int
) -> SamplerStructure:
    """The structure a worker needs to sample ``num_layers`` layers around ``seeds``.

    Args:
        graph: the whole graph (out-CSR; messages flow along its edges).
        seeds: every seed the worker may be asked to sample (any order).
        num_layers: layers sampled per seed (``len(fanouts)``).

    Returns:
        The in-edges of the seeds' ``(num_layers - 1)``-hop in-closure.
    """
    n = graph.num_nodes
    needed = np.zeros(n, dtype=np.bool_)
    needed[np.asarray(seeds, dtype=np.int64)] = True
    for _ in range(num_layers - 1):
        _add_in_neighbours(graph.indptr, graph.indices, needed)
    indptr, indices = _in_rows(graph.indptr, graph.indices, needed)
    in_adjacency = CSRGraph(
        indptr=indptr,
        indices=cast(IndexArray, indices.astype(graph.indices.dtype, copy=False)),
        num_nodes=n,
    )
    full = (n + 1) * 8 + graph.indices.shape[0] * graph.indices.dtype.itemsize
    return SamplerStructure(in_adjacency, np.flatnonzero(needed), full)


@numba.njit(cache=True, nogil=True)
def _add_in_neighbours(
    indptr: np.ndarray, indices: np.ndarray, needed: np.ndarray
) -> None:
    """Mark every source of an edge into a marked vertex (one hop, in place)."""
    frontier = needed.copy()
    for u in range(indptr.shape[0] - 1):
        if needed[u]:
            continue
        for k in range(indptr[u], indptr[u + 1]):
            if frontier[indices[k]]:
                needed[u] = True
                break


@numba.njit(cache=True, nogil=True)
def _in_rows(
    indptr: np.ndarray, indices: np.ndarray, needed: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """In-adjacency rows of the marked vertices; sources ascending, as ``csc()``."""
    n = indptr.shape[0] - 1
    counts = np.zeros(n + 1, dtype=np.int64)
    for u in range(n):
        for k in range(indptr[u], indptr[u + 1]):
            v = indices[k]
            if needed[v]:
                counts[v + 1] += 1
    in_indptr = np.cumsum(counts)
    fill = in_indptr[:-1].copy()
    sources = np.empty(in_indptr[n], dtype=np.int64)
    for u in range(n):  # ascending u: every row comes out sorted
        for k in range(indptr[u], indptr[u + 1]):
            v = indices[k]
            if needed[v]:
                sources[fill[v]] = u
                fill[v] += 1
    return in_indptr, sources
