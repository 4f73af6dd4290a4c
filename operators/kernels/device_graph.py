"""The graph as message passing reads it: in-adjacency tensors on one device.

A :class:`DeviceGraph` holds a CSR over *destination* rows (row ``i`` lists the
sources of ``i``'s in-edges) as tensors on one device, plus everything derived from
it that kernels need again and again: the transposed structure (for backward
passes), degrees, the self-loop variant, normalisation coefficients. Each derived
item is built on first use and cached on the object, so an epoch never rebuilds it.

Layers accept a :class:`strata.storage.CSRGraph` (a full graph), a sampled
:class:`strata.operators.samplers.Block`, or a ``DeviceGraph``; :func:`as_device_graph`
converts and caches. A full graph's ``DeviceGraph`` is cached per (graph, device) in
a small LRU (the last :data:`CACHE_SIZE` graphs); a block's lives on the block.

Examples:
    >>> import numpy as np, torch
    >>> from strata.storage import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 1]))
    >>> dg = as_device_graph(g, torch.device("cpu"))
    >>> dg.indptr.tolist(), dg.indices.tolist()  # node 1 <- {0, 2}, node 2 <- {1}
    ([0, 0, 2, 3], [0, 2, 1])
    >>> as_device_graph(g, torch.device("cpu")) is dg  # cached
    True
    >>> dg.in_degree().tolist(), dg.out_degree().tolist()
    ([0, 2, 1], [1, 1, 1])
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import torch

from strata.operators.errors import OperatorError
from strata.operators.kernels import _cpu
from strata.operators.samplers.block import Block
from strata.storage import CSRGraph, as_tensor

CACHE_SIZE = 8
T = TypeVar("T")

GraphLike = CSRGraph | Block  # or a DeviceGraph; see as_device_graph


class Transposed(NamedTuple):
    """The transpose of a :class:`DeviceGraph`'s CSR (rows are sources).

    Attributes:
        indptr: int64 ``[num_src + 1]``.
        indices: int64 destination ids.
        perm: int64; entry ``t`` of the transpose is edge ``perm[t]`` of the graph.
    """

    indptr: torch.Tensor
    indices: torch.Tensor
    perm: torch.Tensor


class DeviceGraph:
    """In-adjacency CSR of a (possibly bipartite) graph, as tensors on one device.

    Args:
        indptr: int64 ``[num_dst + 1]`` row pointers over destination nodes.
        indices: source ids of every edge (int32 or int64), grouped by destination.
        num_src: number of source nodes.
        num_dst: number of destination nodes.
        edge_weight: optional float ``[num_edges]`` weights, in edge order.
        bipartite: True for sampled blocks (sources ``[0, num_dst)`` are the
            destinations); False for a full graph (sources and destinations are the
            same ``num_src == num_dst`` nodes). Layers use it to pick the block
            conventions of DGL where PyG has no bipartite variant (GCN).
    """

    def __init__(
        self,
        indptr: torch.Tensor,
        indices: torch.Tensor,
        num_src: int,
        num_dst: int,
        *,
        edge_weight: torch.Tensor | None = None,
        bipartite: bool = False,
    ) -> None:
        self.indptr = indptr
        self.indices = indices
        self.num_src = int(num_src)
        self.num_dst = int(num_dst)
        self.edge_weight = edge_weight
        self.bipartite = bipartite
        self._cache: dict[Any, Any] = {}
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_csr(cls, graph: CSRGraph, device: torch.device) -> DeviceGraph:
        """Build from a full graph: its in-adjacency (``graph.csc()``) on ``device``."""
        in_adj = graph.csc()
        weight = None
        if in_adj.edge_weight is not None:
            weight = as_tensor(in_adj.edge_weight).to(device, torch.float32)
        return cls(
            as_tensor(in_adj.indptr).to(device),
            as_tensor(in_adj.indices).to(device),
            graph.num_nodes,
            graph.num_nodes,
            edge_weight=weight,
        )

    @classmethod
    def from_block(cls, block: Block, device: torch.device) -> DeviceGraph:
        """Build from a sampled block (already a CSR over its destinations)."""
        return cls(
            torch.from_numpy(block.indptr).to(device),
            torch.from_numpy(block.indices).to(device),
            block.num_src,
            block.num_dst,
            bipartite=True,
        )

    # ------------------------------------------------------------------ basics
    @property
    def device(self) -> torch.device:
        """The device every tensor of the graph lives on."""
        return self.indptr.device

    @property
    def num_edges(self) -> int:
        """Number of edges."""
        return int(self.indices.shape[0])

    def to(self, device: torch.device) -> DeviceGraph:
        """A copy on ``device`` (derived structures are rebuilt there on demand)."""
        if device == self.device:
            return self
        weight = None if self.edge_weight is None else self.edge_weight.to(device)
        return DeviceGraph(
            self.indptr.to(device),
            self.indices.to(device),
            self.num_src,
            self.num_dst,
            edge_weight=weight,
            bipartite=self.bipartite,
        )

    def cached(self, key: Any, build: Callable[[], T]) -> T:
        """Return ``build()`` the first time ``key`` is asked for, then the cache.

        Layers store graph-derived tensors here (e.g. GCN coefficients) so they are
        computed once per graph, not once per forward pass.
        """
        with self._lock:
            if key not in self._cache:
                self._cache[key] = build()
            return self._cache[key]

    def cached_for(
        self, key: Any, source: torch.Tensor, build: Callable[[], torch.Tensor]
    ) -> torch.Tensor:
        """Like :meth:`cached`, for a value derived from the tensor ``source``.

        One entry per ``key``: it is reused while ``source`` is the same tensor
        object with the same version counter, data pointer, shape, strides and
        dtype, and the value's own version counter is unchanged (so neither a new
        tensor, an in-place change of the old one, nor a write into the value is
        served stale); it is rebuilt otherwise. Only a weak reference to
        ``source`` is kept, and the entry is dropped when ``source`` is freed.
        """
        with self._lock:
            entry = self._cache.get(key)
            if entry is not None and entry[0]() is source:
                value: torch.Tensor = entry[2]
                if entry[1] == _signature(source) and entry[3] == value._version:
                    return value
        value = build()
        this = weakref.ref(self)

        def drop(ref: weakref.ReferenceType[torch.Tensor]) -> None:
            graph = this()
            if graph is None:
                return
            with graph._lock:
                current = graph._cache.get(key)
                if current is not None and current[0] is ref:
                    del graph._cache[key]

        with self._lock:
            self._cache[key] = (
                weakref.ref(source, drop),
                _signature(source),
                value,
                value._version,
            )
        return value

    # ------------------------------------------------------------------ derived
    def src_index(self, *, cache: bool = True) -> torch.Tensor:
        """Source id of every edge as int64 (what torch's index ops require).

        Args:
            cache: keep the result for later calls; builders that need it once
                pass False so a full graph does not hold another 8 bytes per edge.
        """
        if self.indices.dtype == torch.int64:
            return self.indices
        if cache or "src_index" in self._cache:
            return self.cached("src_index", lambda: self.indices.to(torch.int64))
        return self.indices.to(torch.int64)

    def dst_index(self, *, cache: bool = True) -> torch.Tensor:
        """Destination id of every edge (int64), i.e. the row of each CSR entry.

        Args:
            cache: as in :meth:`src_index`.
        """
        if cache or "dst_index" in self._cache:
            return self.cached("dst_index", self._rows)
        return self._rows()

    def _rows(self) -> torch.Tensor:
        return torch.repeat_interleave(
            torch.arange(self.num_dst, device=self.device),
            self.indptr.diff(),
            output_size=self.num_edges,
        )

    def in_degree(self) -> torch.Tensor:
        """In-degree of every destination (int64, parallel edges counted)."""
        return self.cached("in_degree", lambda: self.indptr.diff())

    def out_degree(self) -> torch.Tensor:
        """Out-degree of every source within this graph (int64)."""
        return self.cached(
            "out_degree",
            lambda: torch.bincount(self.src_index(), minlength=self.num_src),
        )

    def transpose(self) -> Transposed:
        """The transposed CSR (rows are sources) with the edge permutation."""
        return self.cached("transpose", self._build_transpose)

    def _build_transpose(self) -> Transposed:
        if self.device.type == "cpu":
            t_indptr, t_indices, perm = _cpu.transpose_csr(
                self.indptr.numpy(), self.src_index().numpy(), self.num_src
            )
            return Transposed(
                torch.from_numpy(t_indptr),
                torch.from_numpy(t_indices),
                torch.from_numpy(perm),
            )
        return self._transpose_torch()

    def _transpose_torch(self) -> Transposed:
        # A stable sort by source keeps each source's edges in destination order,
        # which is what the numba counting sort produces too.
        perm = torch.argsort(self.src_index(), stable=True)
        counts = torch.bincount(self.src_index(), minlength=self.num_src)
        t_indptr = torch.zeros(self.num_src + 1, dtype=torch.int64, device=self.device)
        torch.cumsum(counts, 0, out=t_indptr[1:])
        return Transposed(t_indptr, self.dst_index(cache=False)[perm], perm)

    def with_self_loops(self, fill_value: float = 1.0) -> DeviceGraph:
        """The graph with every self-loop removed and one loop per destination added.

        This is PyG's ``add_remaining_self_loops``: on a weighted graph, a
        destination that already had a loop keeps that loop's weight (the last one,
        if several) and the others get ``fill_value``; on an unweighted graph every
        loop gets ``fill_value`` (the result is unweighted when that is 1). In a
        block, loop ``i -> i`` joins destination ``i`` to source ``i``, which is
        the same node. Within a row the loop comes after the other edges. Cached
        per ``fill_value``.
        """
        return self.cached(
            ("self_loops", float(fill_value)),
            lambda: self._build_self_loops(float(fill_value)),
        )

    def _build_self_loops(self, fill_value: float) -> DeviceGraph:
        device = self.device
        src, dst = self.src_index(cache=False), self.dst_index(cache=False)
        keep = src != dst
        kept_dst = dst[keep]
        counts = torch.bincount(kept_dst, minlength=self.num_dst)
        indptr = torch.zeros(self.num_dst + 1, dtype=torch.int64, device=device)
        torch.cumsum(counts + 1, 0, out=indptr[1:])
        kept_start = torch.cumsum(counts, 0) - counts  # first kept edge of each row
        rank = torch.arange(kept_dst.shape[0], device=device) - kept_start[kept_dst]
        kept_pos = indptr[kept_dst] + rank
        loop_pos = indptr[1:] - 1
        num_edges = int(indptr[-1])
        indices = torch.empty(num_edges, dtype=self.indices.dtype, device=device)
        indices[kept_pos] = self.indices[keep]
        indices[loop_pos] = torch.arange(self.num_dst, device=device).to(
            self.indices.dtype
        )
        weight = None
        if self.edge_weight is not None or fill_value != 1.0:
            loop_weight = torch.full((self.num_dst,), fill_value, device=device)
            weight = torch.ones(num_edges, device=device)
            if self.edge_weight is not None:
                loops = ~keep
                # Assignment with repeated indices keeps the last write on CPU;
                # PyG makes the same assignment, so both keep the same copy.
                loop_weight[dst[loops]] = self.edge_weight[loops]
                weight[kept_pos] = self.edge_weight[keep]
            weight[loop_pos] = loop_weight
        return DeviceGraph(
            indptr,
            indices,
            self.num_src,
            self.num_dst,
            edge_weight=weight,
            bipartite=self.bipartite,
        )

    def __repr__(self) -> str:
        kind = "block" if self.bipartite else "graph"
        return (
            f"DeviceGraph({kind}, num_src={self.num_src}, num_dst={self.num_dst}, "
            f"num_edges={self.num_edges}, device={self.device})"
        )


def _signature(t: torch.Tensor) -> tuple[Any, ...]:
    """What must not change for a value derived from ``t`` to stay valid."""
    return (t._version, t.data_ptr(), tuple(t.shape), t.stride(), t.dtype, t.device)


_graph_cache: OrderedDict[tuple[int, str], tuple[CSRGraph, DeviceGraph]] = OrderedDict()
_graph_cache_lock = threading.Lock()


def as_device_graph(
    graph: CSRGraph | Block | DeviceGraph, device: torch.device
) -> DeviceGraph:
    """Return the :class:`DeviceGraph` of ``graph`` on ``device``, cached.

    Args:
        graph: a full graph, a sampled block, or a ``DeviceGraph``.
        device: where the tensors should live (usually ``x.device``).

    Returns:
        The cached structure: the same object on every call for the same graph
        and device (a ``DeviceGraph`` on another device is copied, not cached).

    Raises:
        OperatorError: if ``graph`` is none of the accepted types.
    """
    if isinstance(graph, DeviceGraph):
        return graph.to(device)
    if isinstance(graph, Block):
        cache = graph._device_cache
        if device not in cache:
            cache[device] = DeviceGraph.from_block(graph, device)
        result: DeviceGraph = cache[device]
        return result
    if isinstance(graph, CSRGraph):
        key = (id(graph), str(device))
        with _graph_cache_lock:
            entry = _graph_cache.get(key)
            if entry is not None and entry[0] is graph:
                _graph_cache.move_to_end(key)
                return entry[1]
        built = DeviceGraph.from_csr(graph, device)
        with _graph_cache_lock:
            # The entry holds the graph, so its id cannot be reused while cached.
            _graph_cache[key] = (graph, built)
            while len(_graph_cache) > CACHE_SIZE:
                _graph_cache.popitem(last=False)
        return built
    raise OperatorError.build(
        "graph",
        "as_device_graph",
        "a strata.storage.CSRGraph, a strata.operators.samplers.Block or a DeviceGraph",
        type(graph).__name__,
    )


def check_node_features(dg: DeviceGraph, x: torch.Tensor, where: str) -> None:
    """Raise unless ``x`` has one row per source node of ``dg``.

    Raises:
        OperatorError: on a row-count mismatch or a tensor with no feature axis.
    """
    if x.dim() < 2:
        raise OperatorError.build(
            "x", where, "a [num_nodes, features] tensor", f"shape {tuple(x.shape)}"
        )
    if x.shape[0] != dg.num_src:
        what = "block's num_src" if dg.bipartite else "graph's num_nodes"
        raise OperatorError.build(
            "x",
            where,
            f"{dg.num_src} rows (the {what})",
            f"{x.shape[0]} rows",
            "features must have one row per node, in node-id order; for a block, "
            "gather rows for block.src_global_ids",
        )
