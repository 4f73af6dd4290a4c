"""One relation of a typed graph: its name and its CSR over destination nodes.

A :class:`Relation` names an edge type ``src -name-> dst`` between two node types
(the same type for item-item relations). A :class:`RelationCSR` holds that
relation's edges as message passing reads them: row ``i`` lists the **source ids**
(ids of the ``src`` node type) of destination ``i``'s in-edges, so a layer
aggregates a row without a transpose. Parallel edges are kept (a user who engaged
an item twice sends two messages, as in PyG).

Examples:
    >>> import numpy as np
    >>> rel = Relation("user", "clicked", "item")
    >>> str(rel)
    'user-clicked->item'
    >>> csr = RelationCSR.from_edges(np.array([0, 1, 1]), np.array([2, 0, 2]),
    ...                              num_src=2, num_dst=3)
    >>> csr.indptr.tolist(), csr.indices.tolist()  # item 2 <- users {0, 1}
    ([0, 1, 1, 3], [1, 0, 1])
    >>> csr.transpose(num_src=2).indices.tolist()  # user 1 -> items {0, 2}
    [2, 0, 2]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from strata.storage._checks import describe_nonfinite, first_nonfinite
from strata.storage._types import Float32Array, Int64Array
from strata.storage.errors import GraphError


class Relation(NamedTuple):
    """An edge type: edges run from ``src``-type nodes to ``dst``-type nodes.

    Attributes:
        src: the source node type.
        name: the relation's name (unique per ``(src, dst)`` pair).
        dst: the destination node type.
    """

    src: str
    name: str
    dst: str

    def __str__(self) -> str:
        return f"{self.src}-{self.name}->{self.dst}"

    def reversed(self, name: str) -> Relation:
        """The relation ``dst -name-> src``."""
        return Relation(self.dst, name, self.src)


def _check_ids(
    subject: str, ids: np.ndarray, bound: int, what: str, where: str
) -> Int64Array:
    """``ids`` as contiguous int64, checked to be integers in ``[0, bound)``."""
    array = np.asarray(ids)
    if array.ndim != 1:
        raise GraphError.build(subject, where, "a 1-D id array", f"shape {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise GraphError.build(
            subject,
            where,
            "integer ids",
            f"dtype {array.dtype}",
            "map labels to ids first (strata.storage.loaders)",
        )
    out = np.ascontiguousarray(array, dtype=np.int64)
    if out.size:
        low, high = int(out.min()), int(out.max())
        if low < 0 or high >= bound:
            pos = int(np.argmax((out < 0) | (out >= bound)))
            raise GraphError.build(
                subject,
                where,
                f"{what} ids in [0, {bound})",
                f"{int(out[pos])} at position {pos}",
            )
    return out


@dataclass(frozen=True, slots=True, eq=False)
class RelationCSR:
    """The edges of one relation as a CSR over its destination nodes.

    Attributes:
        indptr: int64 ``[num_dst + 1]``; destination ``i``'s in-edges come from
            ``indices[indptr[i]:indptr[i + 1]]``.
        indices: int64 source ids (of the relation's ``src`` type).
        weights: optional float32 per-edge weights, in CSR order.

    The constructor checks the arrays' shapes and dtypes; :class:`TypedGraph`
    checks the ids against the node counts of their types.
    """

    indptr: Int64Array
    indices: Int64Array
    weights: Float32Array | None = None
    # Tensors built from this relation per device (strata.operators.layers.hetero).
    _device_cache: dict[Any, Any] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        where = "RelationCSR"
        indptr = self.indptr
        if indptr.ndim != 1 or indptr.shape[0] < 1 or indptr.dtype != np.int64:
            raise GraphError.build(
                "indptr",
                where,
                "a 1-D int64 array of length num_dst + 1",
                f"{indptr.dtype} of shape {indptr.shape}",
            )
        if int(indptr[0]) != 0 or (indptr.shape[0] > 1 and np.any(np.diff(indptr) < 0)):
            raise GraphError.build(
                "indptr", where, "non-decreasing row pointers from 0", "other values"
            )
        num_edges = int(indptr[-1])
        if self.indices.shape != (num_edges,) or self.indices.dtype != np.int64:
            raise GraphError.build(
                "indices",
                where,
                f"int64 of shape ({num_edges},) (indptr[-1])",
                f"{self.indices.dtype} of shape {self.indices.shape}",
            )
        if self.weights is not None and (
            self.weights.shape != (num_edges,) or self.weights.dtype != np.float32
        ):
            raise GraphError.build(
                "weights",
                where,
                f"float32 of shape ({num_edges},)",
                f"{self.weights.dtype} of shape {self.weights.shape}",
            )

    def __reduce__(self) -> tuple[type[RelationCSR], tuple[Any, ...]]:
        # The arrays only: the device cache holds locks and device tensors.
        return (RelationCSR, (self.indptr, self.indices, self.weights))

    @classmethod
    def from_edges(
        cls,
        src: np.ndarray,
        dst: np.ndarray,
        *,
        num_src: int,
        num_dst: int,
        weights: np.ndarray | None = None,
        where: str = "RelationCSR.from_edges",
    ) -> RelationCSR:
        """Build from parallel ``src``/``dst`` id arrays (edges ``src -> dst``).

        Rows are sorted by destination, and each row by source id (ties keep the
        input order), so the same edge set always gives the same CSR.

        Raises:
            GraphError: on non-integer, out-of-range or mismatched ids, or on
                weights that are not finite or not one per edge.
        """
        s = _check_ids("src", src, num_src, "source", where)
        d = _check_ids("dst", dst, num_dst, "destination", where)
        if s.shape != d.shape:
            raise GraphError.build(
                "dst", where, f"{s.shape[0]} ids (as src)", f"{d.shape[0]} ids"
            )
        w: Float32Array | None = None
        if weights is not None:
            w_in = np.asarray(weights)
            if w_in.shape != s.shape or w_in.dtype.kind not in "fiu":
                raise GraphError.build(
                    "weights",
                    where,
                    f"{s.shape[0]} numbers (one per edge)",
                    f"{w_in.dtype} of shape {w_in.shape}",
                )
            bad = first_nonfinite(w_in)
            if bad is not None:
                raise GraphError.build(
                    "weights", where, "finite weights", describe_nonfinite(w_in, bad)
                )
            w = w_in.astype(np.float32)
        order = np.lexsort((s, d))  # by dst, then src; stable
        counts = np.bincount(d, minlength=num_dst)
        indptr = np.zeros(num_dst + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return cls(indptr, s[order], None if w is None else w[order])

    @property
    def num_dst(self) -> int:
        """Number of destination rows."""
        return int(self.indptr.shape[0] - 1)

    @property
    def num_edges(self) -> int:
        """Number of edges."""
        return int(self.indices.shape[0])

    def dst_index(self) -> Int64Array:
        """Destination id of every edge (the row of each CSR entry)."""
        return np.repeat(np.arange(self.num_dst, dtype=np.int64), np.diff(self.indptr))

    def transpose(self, num_src: int) -> RelationCSR:
        """The reverse relation's CSR: rows are this relation's sources.

        Args:
            num_src: number of nodes of this relation's source type.
        """
        return RelationCSR.from_edges(
            self.dst_index(),
            self.indices,
            num_src=self.num_dst,
            num_dst=num_src,
            weights=self.weights,
            where="RelationCSR.transpose",
        )

    def nbytes(self) -> int:
        """Bytes held by the arrays."""
        extra = 0 if self.weights is None else self.weights.nbytes
        return self.indptr.nbytes + self.indices.nbytes + extra

    def __repr__(self) -> str:
        weighted = ", weighted" if self.weights is not None else ""
        return (
            f"RelationCSR(num_dst={self.num_dst}, num_edges={self.num_edges}{weighted})"
        )
