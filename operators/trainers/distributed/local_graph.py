"""The propagation graph with global coefficients, and its per-worker slices.

A worker aggregates over a *local* CSR: some destinations (its part, or one chunk
of it) and every in-edge of each, whose sources index a local row list (owned
rows then the halo, or a chunk's sorted sources ``S_c``). Normalisation must use
*global* degrees (``hongtu.md`` pitfall 4), so the coefficients are computed once
on the whole graph, exactly as the single-device layers compute them, and every
slice copies its rows' edges in their original order:

the layer's aggregation (:mod:`strata.operators.layers.message_passing`) computes
them, e.g.:

* ``SymNorm`` (GCN): PyG's ``add_remaining_self_loops`` graph with the symmetric
  coefficients;
* ``Mean``: the raw in-edges, and a per-destination scale ``1 / in_degree``
  applied after the sum (as :func:`strata.operators.kernels.aggregate` does);
* ``Sum`` and ``Max``: the raw in-edges, unweighted; ``WeightedSum``: the edge
  weights as coefficients.

Each destination keeps all its in-edges, in the global order, so a slice sums
the same terms in the same order as the single-device kernel.

Examples:
    >>> import numpy as np
    >>> from strata.storage import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2, 3]), np.array([1, 2, 3, 0]))
    >>> from strata.operators.layers.message_passing import SymNorm
    >>> prop = PropagationGraph.build(g, SymNorm())
    >>> local = prop.slice(np.array([1, 2]), np.array([0, 1, 2]))  # D, S
    >>> local.indptr.tolist(), local.indices.tolist()  # 1 <- {0, 1}, 2 <- {1, 2}
    ([0, 2, 4], [0, 1, 1, 2])
    >>> round(float(local.values[0]), 3)  # 1 / sqrt(2 * 2)
    0.5
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from strata.operators.errors import OperatorError
from strata.operators.kernels import DeviceGraph
from strata.operators.layers.message_passing import (
    Aggregation,
    Max,
    Mean,
    Sum,
    SymNorm,
)
from strata.storage import CSRGraph

#: Aggregation kinds a slice supports (every reduction of per-source messages).
KINDS = ("gcn", "mean", "sum", "max")
#: The aggregation of each kind's name, for graphs rebuilt from shared memory.
_BY_KIND: dict[str, Aggregation] = {
    "gcn": SymNorm(),
    "mean": Mean(),
    "sum": Sum(),
    "max": Max(),
}


@dataclass(frozen=True, slots=True, eq=False)
class PropagationGraph:
    """The whole graph's in-adjacency as one layer kind aggregates it (numpy).

    Attributes:
        kind: ``gcn``, ``mean``, ``sum`` or ``max``.
        indptr: int64 ``[n + 1]`` over destinations.
        indices: int64 source of every edge.
        values: float32 per-edge coefficients, or None (unweighted).
        row_scale: float32 per-destination factor applied after the sum, or None.
    """

    kind: str
    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray | None
    row_scale: np.ndarray | None

    @classmethod
    def build(cls, graph: CSRGraph, aggregation: Aggregation | str) -> PropagationGraph:
        """The propagation graph of ``aggregation`` on the whole of ``graph``.

        The aggregation computes its coefficients exactly as the single-device
        layer does (:meth:`Aggregation.propagate`), so slices keep them.

        Raises:
            OperatorError: on an unknown aggregation kind.
        """
        if isinstance(aggregation, str):  # a kind name, as stored in shared memory
            if aggregation not in _BY_KIND:
                raise OperatorError.build(
                    "kind",
                    "PropagationGraph.build",
                    f"one of {KINDS}",
                    repr(aggregation),
                )
            aggregation = _BY_KIND[aggregation]
        if aggregation.name not in KINDS:
            raise OperatorError.build(
                "aggregation",
                "PropagationGraph.build",
                f"a reduction of per-source messages ({', '.join(KINDS)})",
                repr(aggregation),
            )
        dg = DeviceGraph.from_csr(graph, torch.device("cpu"))
        indptr, indices, values, row_scale = aggregation.numpy_propagation(dg)
        return cls(aggregation.name, indptr, indices, values, row_scale)

    @property
    def num_nodes(self) -> int:
        """Vertices of the graph."""
        return int(self.indptr.shape[0] - 1)

    def in_degree(self) -> np.ndarray:
        """Edges into every vertex (self-loops included for ``gcn``)."""
        return np.diff(self.indptr)

    def to_arrays(self, prefix: str = "") -> dict[str, np.ndarray]:
        """Plain arrays (for shared memory); :meth:`from_arrays` inverts it."""
        arrays = {
            f"{prefix}kind": np.array([KINDS.index(self.kind)], dtype=np.int64),
            f"{prefix}indptr": self.indptr,
            f"{prefix}indices": self.indices,
        }
        if self.values is not None:
            arrays[f"{prefix}values"] = self.values
        if self.row_scale is not None:
            arrays[f"{prefix}row_scale"] = self.row_scale
        return arrays

    @classmethod
    def from_arrays(
        cls, arrays: dict[str, np.ndarray], prefix: str = ""
    ) -> PropagationGraph:
        """Rebuild from :meth:`to_arrays` (arrays may be shared-memory views)."""
        return cls(
            KINDS[int(arrays[f"{prefix}kind"][0])],
            arrays[f"{prefix}indptr"],
            arrays[f"{prefix}indices"],
            arrays.get(f"{prefix}values"),
            arrays.get(f"{prefix}row_scale"),
        )

    def slice(self, dst: np.ndarray, src: np.ndarray) -> LocalGraph:
        """The in-edges of ``dst``, their sources as positions in ``src``.

        Args:
            dst: global ids of the destinations (any order; rows follow it).
            src: global ids of the local rows; must contain every in-neighbour
                of ``dst`` (any order, no duplicates).

        Raises:
            OperatorError: naming a source missing from ``src``.
        """
        dst = np.asarray(dst, dtype=np.int64)
        src = np.asarray(src, dtype=np.int64)
        starts = self.indptr[dst]
        lengths = self.indptr[dst + 1] - starts
        total = int(lengths.sum())
        edges = np.repeat(starts - np.cumsum(lengths) + lengths, lengths)
        edges += np.arange(total, dtype=np.int64)
        sources = self.indices[edges]
        order = np.argsort(src, kind="stable")
        sorted_src = src[order]
        pos = np.searchsorted(sorted_src, sources)
        pos = np.minimum(pos, max(sorted_src.shape[0] - 1, 0))
        found = sorted_src[pos] == sources if total else np.ones(0, dtype=bool)
        if not found.all():
            missing = int(sources[np.argmin(found)])
            raise OperatorError.build(
                "src",
                "PropagationGraph.slice",
                "every in-neighbour of the destinations among the local rows",
                f"vertex {missing} missing",
                "the halo must hold all 1-hop in-neighbours (halo_hops >= 1)",
            )
        indptr = np.zeros(dst.shape[0] + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        return LocalGraph(
            indptr=indptr,
            indices=order[pos].astype(np.int64) if total else np.zeros(0, np.int64),
            values=None if self.values is None else self.values[edges],
            row_scale=None if self.row_scale is None else self.row_scale[dst],
            num_src=int(src.shape[0]),
        )


@dataclass(frozen=True, slots=True, eq=False)
class LocalGraph:
    """One slice: rows are destinations, indices are local source positions.

    Attributes:
        indptr: int64 ``[num_dst + 1]``.
        indices: int64 positions in the local rows.
        values: float32 per-edge coefficients or None.
        row_scale: float32 per-destination factor or None.
        num_src: local rows.
    """

    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray | None
    row_scale: np.ndarray | None
    num_src: int

    @property
    def num_dst(self) -> int:
        """Destinations."""
        return int(self.indptr.shape[0] - 1)

    @property
    def num_edges(self) -> int:
        """Edges."""
        return int(self.indices.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes of the topology and coefficients."""
        return sum(
            a.nbytes
            for a in (self.indptr, self.indices, self.values, self.row_scale)
            if a is not None
        )

    def device_graph(self, device: torch.device) -> DeviceGraph:
        """The slice as a bipartite :class:`DeviceGraph` on ``device``."""
        return DeviceGraph(
            torch.from_numpy(self.indptr).to(device),
            torch.from_numpy(self.indices).to(device),
            self.num_src,
            self.num_dst,
            bipartite=True,
        )

    def transposed(self, device: torch.device) -> tuple[DeviceGraph, np.ndarray]:
        """The transpose (rows are sources) and the edge permutation into it."""
        order = np.argsort(self.indices, kind="stable")
        counts = np.bincount(self.indices, minlength=self.num_src)
        indptr = np.zeros(self.num_src + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        rows = np.repeat(np.arange(self.num_dst, dtype=np.int64), np.diff(self.indptr))
        graph = DeviceGraph(
            torch.from_numpy(indptr).to(device),
            torch.from_numpy(rows[order]).to(device),
            self.num_dst,
            self.num_src,
            bipartite=True,
        )
        return graph, order
