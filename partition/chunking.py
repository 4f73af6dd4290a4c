"""Two-level partitioning: parts -> chunks inside each part (HongTu-style training).

Level 1 is any partition of the vertices into K parts. Level 2 splits each part into
M chunks. Chunk c owns destinations ``D_c`` and *all* their in-edges ``E_c``; its
sources are the union ``S_c = N_in(D_c) + D_c``. Every per-destination reduction
(sum, mean, max, edge softmax) is therefore complete inside one chunk. The expansion
``alpha = sum_c |S_c| / n`` measures how many rows the chunks read in total.

Level-2 methods (:class:`ChunkMethod`):

* ``RECURSIVE`` (default): multilevel k-way (M parts) on the part's induced
  undirected subgraph, so chunks are cut along sparse boundaries;
* ``CONTIGUOUS``: M weight-balanced ranges of a BFS order of the part (cheap,
  locality-preserving).

:func:`split_chunks` builds a :class:`ChunkSchedule` (D_c, S_c and the chunk CSR
whose rows are ``D_c`` and whose column ids index ``S_c``), and orders each part's
chunks with :func:`strata.partition.chunk_order.order_chunks`.

References:
    Wang, Chen, Wong and He, "HongTu: Scalable Full-Graph GNN Training on
    Multiple GPUs", PACMMOD 1(4), 2023 (SIGMOD 2024), arXiv:2311.14898.

Examples:
    >>> import numpy as np
    >>> from strata.storage import CSRGraph
    >>> src = np.arange(16); ring = CSRGraph.from_edges(src, (src + 1) % 16)
    >>> part = (np.arange(16) // 8).astype(np.int32)            # two halves
    >>> s = split_chunks(ring, part, 2, ChunkConfig(num_chunks=2))
    >>> s.num_chunks, s.dst_of(0).size + s.dst_of(1).size
    (4, 8)
    >>> s.halo_of(0).tolist()  # sources of chunk 0 it does not own
    [...]
    >>> round(s.alpha, 2) > 1
    True
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from strata.partition._graph import check_k
from strata.partition._jit import njit
from strata.partition._params import check_settings
from strata.partition._types import Int32Array, Int64Array
from strata.partition.errors import PartitionError
from strata.partition.multilevel import MultilevelPartitioner
from strata.partition.streaming import bfs_order
from strata.storage import CSRGraph, DuplicatePolicy, SelfLoopPolicy

_WHERE = "split_chunks"


class ChunkMethod(enum.Enum):
    """How a part is split into chunks."""

    RECURSIVE = "recursive"
    CONTIGUOUS = "contiguous"


class ChunkOrdering(enum.Enum):
    """Processing order of a part's chunks."""

    OVERLAP = "overlap"  # chain by the largest shared source sets (default)
    NATURAL = "natural"  # chunk id order


@dataclass(frozen=True, slots=True)
class ChunkConfig:
    """Level-2 split settings.

    Attributes:
        num_chunks: M, chunks per part.
        method: how a part is split.
        ordering: processing order of each part's chunks.
        imbalance: eps for the recursive split (vertex weight 1 + in-degree).
        seed: seed of the recursive split.
    """

    num_chunks: int
    method: ChunkMethod = ChunkMethod.RECURSIVE
    ordering: ChunkOrdering = ChunkOrdering.OVERLAP
    imbalance: float = 0.03
    seed: int = 0

    def __post_init__(self) -> None:
        check_settings(
            "ChunkConfig",
            ints={"num_chunks": self.num_chunks, "seed": self.seed},
            floats={"imbalance": self.imbalance},
        )


@dataclass(frozen=True, slots=True, eq=False)
class ChunkSchedule:
    """The level-2 split: per chunk its destinations, sources and local CSR.

    Chunk ids are ``part * chunks_per_part + j``; ``order[p]`` lists part p's chunk
    ids in processing order. Empty chunks are allowed (a part with fewer vertices
    than chunks), so every part runs the same number of steps.

    Attributes:
        num_parts: K.
        chunks_per_part: M.
        order: ``(K, M)`` chunk ids in processing order.
        dst_ptr: ``(K M + 1,)`` offsets into ``dst``.
        dst: destinations of every chunk, each chunk's ids ascending (all vertices).
        src_ptr: ``(K M + 1,)`` offsets into ``src``.
        src: sources ``S_c`` of every chunk, ascending per chunk.
        in_ptr: ``(n + 1,)`` row offsets aligned with ``dst``: the in-edges of
            ``dst[i]`` are ``in_src[in_ptr[i]:in_ptr[i + 1]]``.
        in_src: position of each in-edge's source inside its chunk's ``S_c``.
    """

    num_parts: int
    chunks_per_part: int
    order: Int64Array
    dst_ptr: Int64Array
    dst: Int64Array
    src_ptr: Int64Array
    src: Int64Array
    in_ptr: Int64Array
    in_src: Int32Array

    @property
    def num_chunks(self) -> int:
        """K * M."""
        return self.num_parts * self.chunks_per_part

    @property
    def alpha(self) -> float:
        """Expansion ``sum_c |S_c| / n``."""
        n = int(self.dst.shape[0])
        return float(self.src.shape[0]) / n if n else 0.0

    def dst_of(self, chunk: int) -> Int64Array:
        """``D_c`` (ascending)."""
        result: Int64Array = self.dst[self.dst_ptr[chunk] : self.dst_ptr[chunk + 1]]
        return result

    def src_of(self, chunk: int) -> Int64Array:
        """``S_c`` (ascending)."""
        result: Int64Array = self.src[self.src_ptr[chunk] : self.src_ptr[chunk + 1]]
        return result

    def halo_of(self, chunk: int) -> Int64Array:
        """``S_c`` minus ``D_c``: sources the chunk reads but does not own."""
        result: Int64Array = np.setdiff1d(
            self.src_of(chunk), self.dst_of(chunk), assume_unique=True
        )
        return result

    def csr_of(self, chunk: int) -> tuple[Int64Array, Int32Array]:
        """Local CSR of a chunk: ``indptr`` over ``D_c``, ``indices`` into ``S_c``."""
        lo = int(self.dst_ptr[chunk])
        hi = int(self.dst_ptr[chunk + 1])
        indptr: Int64Array = self.in_ptr[lo : hi + 1] - self.in_ptr[lo]
        indices: Int32Array = self.in_src[self.in_ptr[lo] : self.in_ptr[hi]]
        return indptr, indices

    def chunk_sizes(self) -> Int64Array:
        """``|D_c|`` per chunk."""
        result: Int64Array = np.diff(self.dst_ptr)
        return result

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Plain arrays (``from_arrays`` inverts it)."""
        return {
            "shape": np.array([self.num_parts, self.chunks_per_part], dtype=np.int64),
            "order": self.order,
            "dst_ptr": self.dst_ptr,
            "dst": self.dst,
            "src_ptr": self.src_ptr,
            "src": self.src,
            "in_ptr": self.in_ptr,
            "in_src": self.in_src,
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> ChunkSchedule:
        """Rebuild from :meth:`to_arrays`."""
        k, m = (int(x) for x in arrays["shape"])
        return cls(
            k,
            m,
            np.asarray(arrays["order"], dtype=np.int64).reshape(k, m),
            np.asarray(arrays["dst_ptr"], dtype=np.int64),
            np.asarray(arrays["dst"], dtype=np.int64),
            np.asarray(arrays["src_ptr"], dtype=np.int64),
            np.asarray(arrays["src"], dtype=np.int64),
            np.asarray(arrays["in_ptr"], dtype=np.int64),
            np.asarray(arrays["in_src"], dtype=np.int32),
        )


@njit(cache=True)
def _chunk_sources(
    in_indptr: np.ndarray,
    in_indices: np.ndarray,
    dst_ptr: np.ndarray,
    dst: np.ndarray,
    n: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For every chunk: sorted ``S_c`` and the in-edges mapped to positions in it."""
    nchunks = dst_ptr.shape[0] - 1
    mark = np.full(n, -1, dtype=np.int64)
    pos = np.zeros(n, dtype=np.int64)
    src_ptr = np.zeros(nchunks + 1, dtype=np.int64)
    total = 0
    for c in range(nchunks):  # count |S_c|
        for i in range(dst_ptr[c], dst_ptr[c + 1]):
            v = dst[i]
            if mark[v] != c:
                mark[v] = c
                total += 1
            for e in range(in_indptr[v], in_indptr[v + 1]):
                u = in_indices[e]
                if mark[u] != c:
                    mark[u] = c
                    total += 1
        src_ptr[c + 1] = total
    src = np.empty(total, dtype=np.int64)
    mark[:] = -1
    nedges = 0
    for i in range(dst.shape[0]):
        v = dst[i]
        nedges += in_indptr[v + 1] - in_indptr[v]
    in_ptr = np.zeros(dst.shape[0] + 1, dtype=np.int64)
    in_src = np.empty(nedges, dtype=np.int32)
    for c in range(nchunks):
        fill = src_ptr[c]
        for i in range(dst_ptr[c], dst_ptr[c + 1]):
            v = dst[i]
            if mark[v] != c:
                mark[v] = c
                src[fill] = v
                fill += 1
            for e in range(in_indptr[v], in_indptr[v + 1]):
                u = in_indices[e]
                if mark[u] != c:
                    mark[u] = c
                    src[fill] = u
                    fill += 1
        lo = src_ptr[c]
        hi = src_ptr[c + 1]
        src[lo:hi] = np.sort(src[lo:hi])
        for j in range(lo, hi):
            pos[src[j]] = j - lo
        edge = in_ptr[dst_ptr[c]]
        for i in range(dst_ptr[c], dst_ptr[c + 1]):
            v = dst[i]
            for e in range(in_indptr[v], in_indptr[v + 1]):
                in_src[edge] = pos[in_indices[e]]
                edge += 1
            in_ptr[i + 1] = edge
    return src_ptr, src, in_ptr, in_src


def _contiguous(
    graph: CSRGraph, members: Int64Array, m: int, weight: Int64Array
) -> np.ndarray:
    """M weight-balanced ranges of a BFS order of the part's induced subgraph."""
    sub = _induced(graph, members)
    roots = np.arange(members.shape[0], dtype=np.int64)
    order = bfs_order(np.array(sub.indptr), np.array(sub.indices), roots)
    w = weight[members][order].astype(np.float64)
    cum = np.cumsum(w) - w / 2
    labels = np.minimum((cum * m / max(w.sum(), 1.0)).astype(np.int64), m - 1)
    out = np.empty(members.shape[0], dtype=np.int32)
    out[order] = labels
    return out


def _induced(graph: CSRGraph, members: Int64Array) -> CSRGraph:
    """Undirected simple subgraph induced by ``members`` (local ids)."""
    n = graph.num_nodes
    local = np.full(n, -1, dtype=np.int64)
    local[members] = np.arange(members.shape[0])
    src, dst = graph.to_coo()
    keep = (local[src] >= 0) & (local[dst] >= 0)
    return CSRGraph.from_edges(
        local[src[keep]],
        local[dst[keep]],
        members.shape[0],
        symmetrize=True,
        self_loops=SelfLoopPolicy.REMOVE,
        duplicates=DuplicatePolicy.REMOVE,
    )


def split_chunks(
    graph: CSRGraph, part: np.ndarray, num_parts: int, config: ChunkConfig
) -> ChunkSchedule:
    """Split every part of ``part`` into ``config.num_chunks`` chunks.

    Args:
        graph: the graph (edges ``u -> v``; chunks read in-edges).
        part: ``(n,)`` level-1 part of every vertex, in ``[0, num_parts)``.
        num_parts: K.
        config: M, method, ordering.

    Returns:
        The :class:`ChunkSchedule`.

    Raises:
        PartitionError: on a bad ``part`` array or ``num_chunks < 1``.
    """
    n = graph.num_nodes
    part = np.asarray(part)
    if part.shape != (n,) or (n and (part.min() < 0 or part.max() >= num_parts)):
        raise PartitionError.build(
            "part",
            _WHERE,
            f"shape ({n},) with values in [0, {num_parts})",
            f"shape {part.shape}",
        )
    m = config.num_chunks
    if m < 1:
        raise PartitionError.build("num_chunks", _WHERE, "num_chunks >= 1", str(m))
    csc = graph.csc()
    weight = 1 + graph.in_degree()
    labels = np.empty(n, dtype=np.int64)
    for p in range(num_parts):
        members = np.flatnonzero(part == p)
        if members.size == 0:
            continue
        if m == 1:
            local = np.zeros(members.size, dtype=np.int32)
        elif members.size <= m:
            local = np.arange(members.size, dtype=np.int32)
        elif config.method is ChunkMethod.CONTIGUOUS:
            local = _contiguous(graph, members, m, weight)
        else:
            local = _recursive(graph, members, m, weight, config)
        labels[members] = p * m + local
    order = np.argsort(labels, kind="stable")  # by chunk, ascending ids inside
    counts = np.bincount(labels, minlength=num_parts * m)
    dst_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    dst = order.astype(np.int64)
    src_ptr, src, in_ptr, in_src = _chunk_sources(
        csc.indptr, csc.indices, dst_ptr, dst, n
    )
    unordered = np.arange(num_parts * m, dtype=np.int64).reshape(num_parts, m)
    schedule = ChunkSchedule(
        num_parts, m, unordered, dst_ptr, dst, src_ptr, src, in_ptr, in_src
    )
    if config.ordering is ChunkOrdering.OVERLAP:
        from strata.partition.chunk_order import order_chunks  # chunk_order imports us

        return order_chunks(schedule)
    return schedule


def _recursive(
    graph: CSRGraph,
    members: Int64Array,
    m: int,
    weight: Int64Array,
    config: ChunkConfig,
) -> np.ndarray:
    """Multilevel k-way (M parts) on the part's induced subgraph."""
    sub = _induced(graph, members)
    if sub.num_edges == 0:  # no edges inside: balanced ranges by weight
        return _contiguous(graph, members, m, weight)
    check_k(m, sub.num_nodes, _WHERE)
    ml = MultilevelPartitioner(m, config.imbalance, seed=config.seed)
    result: np.ndarray = ml.partition(
        sub, node_weights=weight[members].astype(np.float64)
    ).assignment
    return result
