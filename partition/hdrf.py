"""HDRF: streaming vertex-cut partitioning (edges to parts) for power-law graphs.

Edges arrive one at a time and are placed at once. For edge (u, v):

1. partial degrees ``d(u) += 1``, ``d(v) += 1``; ``theta(u) = d(u) / (d(u) + d(v))``;
2. ``g(x, p) = 1 + (1 - theta(x))`` if part ``p`` already holds an edge of ``x``
   (``p in A(x)``), else 0: the lower-degree endpoint counts more, so high-degree
   vertices are the ones that get replicated;
3. ``score(p) = g(u, p) + g(v, p) + lam * (max_size - size_p) / (eps + max_size -
   min_size)``;
4. the edge goes to ``argmax score`` (ties: lower load, then lower id); ``p`` joins
   ``A(u)`` and ``A(v)``. The *master* of a vertex is the first part that received
   one of its edges.

:class:`HDRFState` holds the incremental state as plain arrays (degrees, a replica
bitset, part loads, masters) with ``place``/``place_batch`` and
``snapshot``/``restore``; the streaming GNN (issue 7) wraps it as an operator step.
:class:`HDRFPartitioner` streams a graph's undirected edges once.

References:
    Petroni, Querzoni, Daudjee, Kamali and Iacoboni, "HDRF: Stream-Based
    Partitioning for Power-Law Graphs", CIKM 2015.

Examples:
    >>> import numpy as np
    >>> state = HDRFState.empty(num_nodes=4, k=2, lam=10.0)  # a 4-cycle
    >>> [state.place(u, v) for u, v in [(0, 1), (1, 2), (2, 3), (3, 0)]]
    [0, 1, 1, 0]
    >>> state.replication_factor()  # vertices 1 and 3 are replicated
    1.5
    >>> restored = HDRFState.empty(4, 2)
    >>> restored.restore(state.snapshot())
    >>> restored.place(3, 0) == state.place(3, 0)
    True
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass

import numpy as np

from strata.partition._graph import check_graph, config_dict
from strata.partition._jit import njit
from strata.partition._params import check_settings
from strata.partition._types import Float64Array, Int32Array
from strata.partition.errors import PartitionError
from strata.partition.metrics import undirected_edges, vertex_cut_replication
from strata.partition.types import CutKind, Partition, PartitionReport
from strata.storage import CSRGraph

_WHERE = "HDRFPartitioner"


class EdgeOrder(enum.Enum):
    """Order of the edge stream."""

    RANDOM = "random"  # a seeded shuffle (default)
    NATURAL = "natural"  # CSR order of the undirected edges


@njit(cache=True)
def hdrf_place(
    src: np.ndarray,
    dst: np.ndarray,
    degree: np.ndarray,
    replicas: np.ndarray,
    sizes: np.ndarray,
    masters: np.ndarray,
    lam: float,
    eps: float,
) -> np.ndarray:
    """Place a batch of edges in order (updates the state arrays); return parts."""
    k = sizes.shape[0]
    out = np.empty(src.shape[0], dtype=np.int32)
    one = np.uint64(1)
    for i in range(src.shape[0]):
        u = src[i]
        v = dst[i]
        degree[u] += 1
        degree[v] += 1
        du = float(degree[u])
        dv = float(degree[v])
        theta_u = du / (du + dv)
        theta_v = 1.0 - theta_u
        max_size = sizes[0]
        min_size = sizes[0]
        for p in range(1, k):
            max_size = max(max_size, sizes[p])
            min_size = min(min_size, sizes[p])
        best = -1
        best_score = 0.0
        for p in range(k):
            word = p >> 6
            bit = one << np.uint64(p & 63)
            score = lam * (max_size - sizes[p]) / (eps + max_size - min_size)
            if replicas[u, word] & bit:
                score += 1.0 + (1.0 - theta_u)
            if replicas[v, word] & bit:
                score += 1.0 + (1.0 - theta_v)
            if (
                best < 0
                or score > best_score
                or (score == best_score and sizes[p] < sizes[best])
            ):
                best = p
                best_score = score
        word = best >> 6
        bit = one << np.uint64(best & 63)
        replicas[u, word] |= bit
        replicas[v, word] |= bit
        if masters[u] < 0:
            masters[u] = best
        if masters[v] < 0:
            masters[v] = best
        sizes[best] += 1
        out[i] = best
    return out


@dataclass(eq=False)
class HDRFState:
    """Incremental HDRF state (plain arrays, so it snapshots and restores exactly).

    Attributes:
        k: number of parts.
        lam: balance weight lambda.
        eps: epsilon of the balance term.
        degree: ``(n,)`` int64 partial degrees.
        replicas: ``(n, ceil(k / 64))`` uint64 bitset of the parts holding an edge
            of each vertex.
        sizes: ``(k,)`` int64 edges per part.
        masters: ``(n,)`` int32 first part of each vertex (-1: no edge yet).
    """

    k: int
    lam: float
    eps: float
    degree: np.ndarray
    replicas: np.ndarray
    sizes: np.ndarray
    masters: np.ndarray

    @classmethod
    def empty(
        cls, num_nodes: int, k: int, *, lam: float = 1.0, eps: float = 1.0
    ) -> HDRFState:
        """A fresh state for ``num_nodes`` vertices and ``k`` parts."""
        if k < 1:
            raise PartitionError.build("k", "HDRFState", "k >= 1", str(k))
        return cls(
            k,
            lam,
            eps,
            np.zeros(num_nodes, dtype=np.int64),
            np.zeros((num_nodes, (k + 63) // 64), dtype=np.uint64),
            np.zeros(k, dtype=np.int64),
            np.full(num_nodes, -1, dtype=np.int32),
        )

    @property
    def num_nodes(self) -> int:
        """Vertices the state can hold (grows with :meth:`grow`)."""
        return int(self.degree.shape[0])

    def grow(self, num_nodes: int) -> None:
        """Make room for vertex ids up to ``num_nodes - 1`` (streams add vertices)."""
        extra = num_nodes - self.num_nodes
        if extra <= 0:
            return
        self.degree = np.concatenate([self.degree, np.zeros(extra, dtype=np.int64)])
        pad = np.zeros((extra, self.replicas.shape[1]), dtype=np.uint64)
        self.replicas = np.concatenate([self.replicas, pad])
        self.masters = np.concatenate([self.masters, np.full(extra, -1, np.int32)])

    def place(self, src: int, dst: int) -> int:
        """Place one edge; return its part."""
        return int(self.place_batch(np.array([src]), np.array([dst]))[0])

    def place_batch(self, src: np.ndarray, dst: np.ndarray) -> Int32Array:
        """Place edges in order; return their parts (ids beyond n grow the state)."""
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        if src.shape != dst.shape:
            raise PartitionError.build(
                "dst", "HDRFState.place_batch", f"shape {src.shape}", f"{dst.shape}"
            )
        if src.size == 0:
            return np.empty(0, dtype=np.int32)
        if min(int(src.min()), int(dst.min())) < 0:
            raise PartitionError.build(
                "src/dst", "HDRFState.place_batch", "ids >= 0", "a negative id"
            )
        self.grow(int(max(src.max(), dst.max())) + 1)
        parts: Int32Array = hdrf_place(
            src,
            dst,
            self.degree,
            self.replicas,
            self.sizes,
            self.masters,
            self.lam,
            self.eps,
        )
        return parts

    def replica_counts(self) -> np.ndarray:
        """``|A(v)|`` for every vertex."""
        counts = np.zeros(self.num_nodes, dtype=np.int64)
        for word in range(self.replicas.shape[1]):
            bits = self.replicas[:, word]
            for b in range(64):
                counts += ((bits >> np.uint64(b)) & np.uint64(1)).astype(np.int64)
        return counts

    def replication_factor(self) -> float:
        """``sum_v |A(v)| / |V'|`` over vertices with at least one edge."""
        counts = self.replica_counts()
        covered = int(np.count_nonzero(counts))
        return float(counts.sum()) / covered if covered else 1.0

    def snapshot(self) -> dict[str, np.ndarray]:
        """Copies of the state arrays (plus ``params`` = [k, lam, eps])."""
        return {
            "degree": self.degree.copy(),
            "replicas": self.replicas.copy(),
            "sizes": self.sizes.copy(),
            "masters": self.masters.copy(),
            "params": np.array([self.k, self.lam, self.eps], dtype=np.float64),
        }

    def restore(self, state: dict[str, np.ndarray]) -> None:
        """Load a :meth:`snapshot` (arrays are copied)."""
        k = int(state["params"][0])
        if state["replicas"].shape[1] != (k + 63) // 64:
            raise PartitionError.build(
                "replicas",
                "HDRFState.restore",
                f"{(k + 63) // 64} words per row",
                str(state["replicas"].shape[1]),
            )
        self.k = k
        self.lam = float(state["params"][1])
        self.eps = float(state["params"][2])
        self.degree = state["degree"].astype(np.int64, copy=True)
        self.replicas = state["replicas"].astype(np.uint64, copy=True)
        self.sizes = state["sizes"].astype(np.int64, copy=True)
        self.masters = state["masters"].astype(np.int32, copy=True)


@dataclass(frozen=True, slots=True)
class HDRFPartitioner:
    """HDRF over a graph's undirected edges, streamed once.

    Attributes:
        k: number of parts.
        lam: balance weight lambda (1 by default).
        eps: epsilon of the balance term.
        order: edge stream order.
        seed: seed of the random order.
    """

    k: int
    lam: float = 1.0
    eps: float = 1.0
    order: EdgeOrder = EdgeOrder.RANDOM
    seed: int = 0

    def __post_init__(self) -> None:
        check_settings(
            _WHERE,
            ints={"k": self.k, "seed": self.seed},
            floats={"lam": self.lam, "eps": self.eps},
        )

    def partition(
        self, graph: CSRGraph, *, node_weights: Float64Array | None = None
    ) -> Partition:
        """Place every undirected edge; masters go in ``assignment``.

        ``edge_assignment`` follows
        ``strata.partition.metrics.undirected_edges(graph)``. Vertices without edges get
        the part with the fewest masters.

        Raises:
            PartitionError: on bad input, or node weights (HDRF balances edges).
        """
        if node_weights is not None:
            raise PartitionError.build(
                "node_weights", _WHERE, "None (HDRF balances edges)", "an array"
            )
        simple = check_graph(graph, self.k, _WHERE)
        src, dst = undirected_edges(simple)
        m = src.shape[0]
        n = simple.num_nodes
        start = time.perf_counter()
        if self.order is EdgeOrder.RANDOM:
            perm = np.random.default_rng(self.seed).permutation(m)
        else:
            perm = np.arange(m)
        state = HDRFState.empty(n, self.k, lam=self.lam, eps=self.eps)
        edge_parts = np.empty(m, dtype=np.int32)
        edge_parts[perm] = state.place_batch(src[perm], dst[perm])
        masters = state.masters.copy()
        loose = np.flatnonzero(masters < 0)
        if loose.size:
            counts = np.bincount(masters[masters >= 0], minlength=self.k)
            order = np.argsort(counts, kind="stable")
            masters[loose] = order[np.arange(loose.size) % self.k]
        seconds = time.perf_counter() - start
        sizes = np.bincount(masters, minlength=self.k)
        report = PartitionReport(
            method="hdrf",
            k=self.k,
            seed=self.seed,
            num_nodes=n,
            num_edges=m,
            edge_cut=0.0,
            edge_cut_fraction=0.0,
            replication_factor=vertex_cut_replication(src, dst, edge_parts, n, self.k),
            vertex_balance=float(sizes.max() * self.k / n),
            edge_balance=float(state.sizes.max() * self.k / m),
            train_balance=None,
            part_sizes=tuple(int(c) for c in sizes),
            seconds=seconds,
            phase_seconds={"stream": seconds},
            peak_rss_bytes=None,
            config=config_dict(self),
            backend="strata-hdrf",
        )
        return Partition(CutKind.VERTEX_CUT, self.k, masters, edge_parts, report)
