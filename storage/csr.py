"""Compressed sparse row graphs: the one graph type every layer of Strata reads.

A :class:`CSRGraph` stores the *out*-adjacency: row ``u`` lists the destinations of the
edges ``u -> v``, sorted ascending. The transpose (:meth:`CSRGraph.csc`) is the
in-adjacency, which GNN aggregation reads (row ``v`` lists the sources of ``v``'s
in-edges). It is computed once and cached.

Construction policies (defaults keep the input exactly as given):

* ``self_loops``: ``KEEP`` (default), ``REMOVE``, or ``ADD`` (existing loops are
  dropped, then one loop of weight 1 is added on every node).
* ``duplicates``: ``KEEP`` (default; a multigraph), ``REMOVE`` (keep the first copy), or
  ``SUM`` (one edge whose weight is the sum of the copies' weights).
* ``symmetrize``: ``False`` (default) or ``True`` (add ``v -> u`` for every ``u -> v``;
  combine with ``duplicates=REMOVE`` for a simple undirected graph).

``edge_ids`` (optional) maps each CSR edge back to its position in the input edge list,
so edge features stored in input order can be gathered in CSR order.

Examples:
    >>> import numpy as np
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2, 2]), np.array([1, 2, 0, 1]))
    >>> g.num_nodes, g.num_edges
    (3, 4)
    >>> g.indptr.tolist(), g.indices.tolist()
    ([0, 1, 2, 4], [1, 2, 0, 1])
    >>> g.in_degree().tolist()
    [1, 2, 1]
    >>> g.csc().indices.tolist()  # sources of each node's in-edges
    [2, 0, 2, 1]
"""

from __future__ import annotations

import enum
import warnings
from dataclasses import dataclass, field
from typing import Any, cast

import numba
import numpy as np
import torch

from strata.storage._types import FloatArray, IndexArray, Int64Array
from strata.storage.errors import GraphError

_INT32_MAX = np.iinfo(np.int32).max


class SelfLoopPolicy(enum.Enum):
    """What :meth:`CSRGraph.from_edges` does with edges ``v -> v``."""

    KEEP = "keep"
    REMOVE = "remove"
    ADD = "add"


class DuplicatePolicy(enum.Enum):
    """What :meth:`CSRGraph.from_edges` does with repeated ``(src, dst)`` pairs."""

    KEEP = "keep"
    REMOVE = "remove"
    SUM = "sum"


def index_dtype(num_nodes: int) -> type[np.signedinteger[Any]]:
    """Return the narrowest id dtype for ``num_nodes`` nodes: int32 when it fits."""
    return np.int32 if num_nodes <= _INT32_MAX else np.int64


def as_tensor(array: np.ndarray) -> torch.Tensor:
    """View a numpy array as a torch tensor without copying.

    Read-only arrays (memory maps, frozen graph arrays) are viewed too. torch warns
    that writing through such a view is undefined; callers here never write, so the
    warning is silenced. Copy the tensor before changing it.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="The given NumPy array is not writable"
        )
        return torch.from_numpy(array)


@numba.njit(cache=True)
def _counting_sort_order(
    keys: np.ndarray, num_keys: int
) -> tuple[np.ndarray, np.ndarray]:
    """Stable counting sort: return (order, indptr) grouping positions by key."""
    counts = np.zeros(num_keys + 1, dtype=np.int64)
    for k in keys:
        counts[k + 1] += 1
    for i in range(num_keys):
        counts[i + 1] += counts[i]
    indptr = counts.copy()
    order = np.empty(keys.shape[0], dtype=np.int64)
    for pos in range(keys.shape[0]):
        k = keys[pos]
        order[counts[k]] = pos
        counts[k] += 1
    return order, indptr


def _sort_by_src_then_dst(
    src: np.ndarray, dst: np.ndarray, num_nodes: int
) -> tuple[Int64Array, Int64Array]:
    """Return (order, indptr) of edges sorted by src, then dst (stable LSD radix)."""
    by_dst, _ = _counting_sort_order(dst, num_nodes)
    by_src, indptr = _counting_sort_order(src[by_dst], num_nodes)
    return by_dst[by_src], indptr


@numba.njit(cache=True)
def _first_of_runs(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Mark the first edge of every run of equal (row, col) in a row-sorted CSR."""
    keep = np.ones(indices.shape[0], dtype=np.bool_)
    for row in range(indptr.shape[0] - 1):
        for e in range(indptr[row] + 1, indptr[row + 1]):
            if indices[e] == indices[e - 1]:
                keep[e] = False
    return keep


def _validate_ids(name: str, ids: np.ndarray, num_nodes: int | None) -> None:
    where = "CSRGraph.from_edges"
    if ids.ndim != 1:
        raise GraphError.build(name, where, "a 1-D array", f"shape {ids.shape}")
    if ids.size == 0:  # an empty list of any dtype (np.array([]) is float64) is no ids
        return
    if not np.issubdtype(ids.dtype, np.integer):
        raise GraphError.build(
            name,
            where,
            "an integer array",
            f"dtype {ids.dtype}",
            "node ids must be integers; map labels to ids first "
            "(strata.storage.loaders)",
        )
    low = int(ids.min())
    if low < 0:
        pos = int(np.argmax(ids < 0))
        raise GraphError.build(name, where, "ids >= 0", f"{low} at position {pos}")
    if num_nodes is not None:
        high = int(ids.max())
        if high >= num_nodes:
            pos = int(np.argmax(ids >= num_nodes))
            raise GraphError.build(
                name, where, f"ids < num_nodes={num_nodes}", f"{high} at position {pos}"
            )


@dataclass(frozen=True, slots=True, eq=False)
class CSRGraph:
    """An immutable directed graph in CSR form (out-adjacency, rows sorted).

    Attributes:
        indptr: int64 array of length ``num_nodes + 1``; row ``u`` is
            ``indices[indptr[u]:indptr[u + 1]]``.
        indices: destination ids, int32 when ``num_nodes`` fits, else int64.
        num_nodes: number of nodes, including isolated ones.
        edge_weight: optional float32 weight per CSR edge.
        edge_ids: optional int64 input position of each CSR edge.

    Use :meth:`from_edges` to build one; the constructor only validates arrays that are
    already in CSR form.
    """

    indptr: Int64Array
    indices: IndexArray
    num_nodes: int
    edge_weight: FloatArray | None = None
    edge_ids: Int64Array | None = None
    _csc: list[CSRGraph] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        where = "CSRGraph"
        n = self.num_nodes
        if n < 0:
            raise GraphError.build("num_nodes", where, "num_nodes >= 0", str(n))
        if self.indptr.dtype != np.int64 or self.indptr.shape != (n + 1,):
            raise GraphError.build(
                "indptr",
                where,
                f"int64 of shape ({n + 1},)",
                f"{self.indptr.dtype} of shape {self.indptr.shape}",
            )
        if self.indices.dtype not in (np.int32, np.int64) or self.indices.ndim != 1:
            raise GraphError.build(
                "indices",
                where,
                "a 1-D int32 or int64 array",
                f"{self.indices.dtype} of shape {self.indices.shape}",
            )
        m = int(self.indptr[-1])
        if int(self.indptr[0]) != 0 or m != self.indices.shape[0]:
            raise GraphError.build(
                "indptr",
                where,
                f"indptr[0] == 0 and indptr[-1] == len(indices) == "
                f"{self.indices.shape[0]}",
                f"{int(self.indptr[0])} and {m}",
            )
        for name, extra in (
            ("edge_weight", self.edge_weight),
            ("edge_ids", self.edge_ids),
        ):
            if extra is not None and extra.shape != (m,):
                raise GraphError.build(
                    name, where, f"shape ({m},) (one per edge)", f"shape {extra.shape}"
                )
        for array in (self.indptr, self.indices, self.edge_weight, self.edge_ids):
            if array is not None and array.flags.writeable:
                array.flags.writeable = False

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_edges(
        cls,
        src: np.ndarray,
        dst: np.ndarray,
        num_nodes: int | None = None,
        *,
        edge_weight: np.ndarray | None = None,
        self_loops: SelfLoopPolicy = SelfLoopPolicy.KEEP,
        duplicates: DuplicatePolicy = DuplicatePolicy.KEEP,
        symmetrize: bool = False,
        keep_edge_ids: bool = False,
    ) -> CSRGraph:
        """Build a graph from parallel ``src``/``dst`` id arrays (edges ``src -> dst``).

        Args:
            src: source ids, any integer dtype, all in ``[0, num_nodes)``.
            dst: destination ids, same length as ``src``.
            num_nodes: node count; inferred as ``max id + 1`` when omitted.
            edge_weight: optional per-edge weights (finite floats), input order.
            self_loops: policy for ``v -> v`` edges (default keep).
            duplicates: policy for repeated pairs (default keep).
            symmetrize: add the reverse of every edge (default no).
            keep_edge_ids: record each CSR edge's input position in ``edge_ids``.
                With ``symmetrize`` the reverse copy of input edge ``i`` gets ``i`` too.

        Returns:
            The graph, rows sorted by destination id.

        Raises:
            GraphError: on mismatched lengths, negative or out-of-range ids, non-integer
                ids, non-finite weights, or an empty edge list without ``num_nodes``.

        Examples:
            >>> import numpy as np
            >>> g = CSRGraph.from_edges(np.array([0, 0, 1]), np.array([1, 1, 1]),
            ...                         duplicates=DuplicatePolicy.SUM,
            ...                         self_loops=SelfLoopPolicy.REMOVE)
            >>> g.indices.tolist(), g.edge_weight.tolist()
            ([1], [2.0])
        """
        where = "CSRGraph.from_edges"
        src = np.asarray(src)
        dst = np.asarray(dst)
        _validate_ids("src", src, num_nodes)
        _validate_ids("dst", dst, num_nodes)
        if src.shape != dst.shape:
            raise GraphError.build(
                "dst",
                where,
                f"the same length as src ({src.shape[0]})",
                f"length {dst.shape[0]}",
            )
        if num_nodes is None:
            if src.size == 0:
                raise GraphError.build(
                    "num_nodes",
                    where,
                    "num_nodes for an empty edge list",
                    "None",
                    "an empty graph has no ids to infer the node count from",
                )
            num_nodes = int(max(src.max(), dst.max())) + 1
        weight: np.ndarray | None = None
        if edge_weight is not None:
            weight = np.asarray(edge_weight, dtype=np.float32)
            if weight.shape != src.shape:
                raise GraphError.build(
                    "edge_weight", where, f"shape {src.shape}", f"shape {weight.shape}"
                )
            if not np.isfinite(weight).all():
                pos = int(np.argmax(~np.isfinite(weight)))
                raise GraphError.build(
                    "edge_weight",
                    where,
                    "finite weights",
                    f"{weight[pos]} at position {pos}",
                )
        elif duplicates is DuplicatePolicy.SUM or self_loops is SelfLoopPolicy.ADD:
            weight = np.ones(src.shape[0], dtype=np.float32)
        ids = np.arange(src.shape[0], dtype=np.int64) if keep_edge_ids else None

        src64 = src.astype(np.int64, copy=False)
        dst64 = dst.astype(np.int64, copy=False)
        if symmetrize:
            src64, dst64 = (
                np.concatenate([src64, dst64]),
                np.concatenate([dst64, src64]),
            )
            weight = None if weight is None else np.concatenate([weight, weight])
            ids = None if ids is None else np.concatenate([ids, ids])
        if self_loops is not SelfLoopPolicy.KEEP:
            keep = src64 != dst64
            src64, dst64 = src64[keep], dst64[keep]
            weight = None if weight is None else weight[keep]
            ids = None if ids is None else ids[keep]
        if self_loops is SelfLoopPolicy.ADD:
            loops = np.arange(num_nodes, dtype=np.int64)
            src64 = np.concatenate([src64, loops])
            dst64 = np.concatenate([dst64, loops])
            assert weight is not None
            weight = np.concatenate([weight, np.ones(num_nodes, dtype=np.float32)])
            # Added loops have no input position; -1 marks them.
            ids = None if ids is None else np.concatenate([ids, np.full(num_nodes, -1)])

        order, indptr = _sort_by_src_then_dst(src64, dst64, num_nodes)
        indices = dst64[order]
        weight = None if weight is None else weight[order]
        ids = None if ids is None else ids[order]
        if duplicates is not DuplicatePolicy.KEEP and indices.size:
            first = _first_of_runs(indptr, indices)
            if not first.all():
                if duplicates is DuplicatePolicy.SUM:
                    assert weight is not None
                    run_id = np.cumsum(first) - 1
                    weight = np.bincount(run_id, weights=weight).astype(np.float32)
                elif weight is not None:
                    weight = weight[first]
                indices = indices[first]
                ids = None if ids is None else ids[first]
                row_of_edge = np.repeat(np.arange(num_nodes), np.diff(indptr))[first]
                indptr = np.zeros(num_nodes + 1, dtype=np.int64)
                np.cumsum(np.bincount(row_of_edge, minlength=num_nodes), out=indptr[1:])
        return cls(
            indptr=indptr,
            indices=indices.astype(index_dtype(num_nodes), copy=False),
            num_nodes=num_nodes,
            edge_weight=weight,
            edge_ids=ids,
        )

    # ------------------------------------------------------------------ properties
    @property
    def num_edges(self) -> int:
        """Number of directed edges (parallel copies counted)."""
        return int(self.indices.shape[0])

    def out_degree(self) -> Int64Array:
        """Out-degree of every node (int64)."""
        return np.diff(self.indptr)

    def in_degree(self) -> Int64Array:
        """In-degree of every node (int64)."""
        return np.bincount(self.indices, minlength=self.num_nodes).astype(np.int64)

    def neighbors(self, node: int) -> IndexArray:
        """Out-neighbours of ``node`` (a read-only view)."""
        return self.indices[self.indptr[node] : self.indptr[node + 1]]

    def to_coo(self) -> tuple[Int64Array, IndexArray]:
        """Return ``(src, dst)`` in CSR order; ``src`` is int64, ``dst`` a view."""
        src = np.repeat(np.arange(self.num_nodes, dtype=np.int64), self.out_degree())
        return src, self.indices

    def csc(self) -> CSRGraph:
        """The transpose (in-adjacency) as a CSRGraph, computed once and cached.

        Row ``v`` of the result lists the sources of ``v``'s in-edges, sorted; weights
        and edge ids travel with their edges.
        """
        if not self._csc:
            src, dst = self.to_coo()
            order, indptr = _sort_by_src_then_dst(
                dst.astype(np.int64, copy=False), src, self.num_nodes
            )
            transposed = CSRGraph(
                indptr=indptr,
                indices=cast(
                    IndexArray, src[order].astype(self.indices.dtype, copy=False)
                ),
                num_nodes=self.num_nodes,
                edge_weight=None
                if self.edge_weight is None
                else self.edge_weight[order],
                edge_ids=None if self.edge_ids is None else self.edge_ids[order],
            )
            transposed._csc.append(self)
            self._csc.append(transposed)
        return self._csc[0]

    def has_self_loops(self) -> bool:
        """Whether any edge ``v -> v`` exists."""
        src, dst = self.to_coo()
        return bool(np.any(src == dst))

    def is_symmetric(self) -> bool:
        """Whether every edge ``u -> v`` has its reverse (with equal multiplicity)."""
        other = self.csc()
        return bool(
            np.array_equal(self.indptr, other.indptr)
            and np.array_equal(self.indices, other.indices)
        )

    # ------------------------------------------------------------------ views
    def torch_indptr(self) -> torch.Tensor:
        """Zero-copy int64 tensor view of ``indptr`` (do not write to it)."""
        return as_tensor(self.indptr)

    def torch_indices(self) -> torch.Tensor:
        """Zero-copy tensor view of ``indices`` (do not write to it)."""
        return as_tensor(self.indices)

    def nbytes(self) -> int:
        """Bytes held by the graph's own arrays (the cached transpose excluded)."""
        extras = (self.edge_weight, self.edge_ids)
        return (
            self.indptr.nbytes
            + self.indices.nbytes
            + sum(a.nbytes for a in extras if a is not None)
        )

    def __repr__(self) -> str:
        extras = [
            name
            for name in ("edge_weight", "edge_ids")
            if getattr(self, name) is not None
        ]
        tail = f", {', '.join(extras)}" if extras else ""
        return f"CSRGraph(num_nodes={self.num_nodes}, num_edges={self.num_edges}{tail})"
