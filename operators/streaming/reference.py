"""Oracle and baselines: what incremental inference is checked and measured against.

* :func:`full_recompute`: Strata's batch layers over the whole current graph with
  the streaming liveness rule (d3gnn.md §3.1: edges from sources without an input
  are masked). The oracle of every exactness test, and baseline (b), "full-graph
  recompute per batch".
* :class:`AffectedRecompute`: baseline (a), the DGL-style recompute D3-GNN
  compares against (§2, §4 A2): per window, find the vertices whose final
  embedding may change, build their *full* L-hop in-neighbour blocks, and run the
  batch model on those blocks, on the same kernels.

Examples:
    >>> import numpy as np, torch
    >>> from strata.storage import CSRGraph
    >>> from strata.operators.layers import GraphSAGE
    >>> _ = torch.manual_seed(0)
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]))
    >>> x = np.ones((3, 4), dtype=np.float32)
    >>> live = np.array([True, True, False])  # edge 2 -> 0 is masked
    >>> full_recompute(GraphSAGE(4, 8, 2), g, x, live).shape
    (3, 2)
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from torch import nn

from strata.operators.kernels.device_graph import as_device_graph
from strata.operators.layers.message_passing import Propagation, SymNorm
from strata.operators.samplers.block import Block
from strata.storage import CSRGraph, DynamicGraph

Int64Array = np.ndarray


def _as_csr(graph: CSRGraph | DynamicGraph) -> CSRGraph:
    return graph.snapshot() if isinstance(graph, DynamicGraph) else graph


def live_graph(graph: CSRGraph | DynamicGraph, live: np.ndarray | None) -> CSRGraph:
    """The graph without edges whose source is not live (the oracle's rule)."""
    csr = _as_csr(graph)
    if live is None or bool(np.all(live[: csr.num_nodes])):
        return csr
    src, dst = csr.to_coo()
    keep = live[src]
    return CSRGraph.from_edges(src[keep], dst[keep], num_nodes=csr.num_nodes)


def full_recompute(
    model: nn.Module,
    graph: CSRGraph | DynamicGraph,
    x: np.ndarray,
    live: np.ndarray | None = None,
    *,
    dtype: torch.dtype = torch.float64,
) -> np.ndarray:
    """Embeddings of every node from a full forward pass over the current graph.

    Args:
        model: The trained batch model (not modified; a copy runs in ``dtype``).
        graph: The current graph.
        x: Node features, ``[num_nodes, in_dim]`` (rows of nodes that are not
            live are ignored).
        live: Which nodes have features (default: all).
        dtype: Precision of the forward pass.

    Returns:
        ``[num_nodes, out_dim]`` embeddings; rows of nodes that are not live are
        meaningless.
    """
    csr = live_graph(graph, live)
    runner = copy.deepcopy(model).to(dtype).eval()
    features = torch.as_tensor(np.asarray(x)[: csr.num_nodes]).to(dtype)
    with torch.no_grad():
        return np.asarray(runner(csr, features).numpy())


class AffectedRecompute:
    """Baseline (a): recompute the affected vertices from full L-hop blocks.

    Keeps an embedding table; :meth:`update` takes the nodes an applied window
    touched and rewrites the rows that may have changed:

    * *targets*: the (L-1)-hop out-reach of the window's edge destinations, the
      L-hop out-reach of nodes with new features (and, for GCN, one more hop: a
      degree change alters the sender's messages);
    * blocks: for every layer, top down, the full in-neighbourhood of the layer's
      destinations (DGL's ``MultiLayerFullNeighborSampler``), then one batched
      forward of the batch model over those blocks.

    Args:
        model: The trained batch model (SAGE; GCN through exact global-degree
            coefficients, since the block GCN normalises by block degrees).
        graph: The dynamic graph the stream is applied to (read, never written).
        features: ``[num_nodes, in_dim]`` node features, updated by the caller.
        live: Which nodes have features (updated by the caller).
        dtype: Precision of the forward passes (the model's own: float32).
    """

    def __init__(
        self,
        model: nn.Module,
        graph: DynamicGraph,
        features: np.ndarray,
        live: np.ndarray,
        *,
        dtype: torch.dtype = torch.float64,
    ) -> None:
        self.dtype = dtype
        self.model = copy.deepcopy(model).to(dtype).eval()
        self.graph = graph
        self.features = features
        self.live = live
        self.num_layers = len(self.model.convs)  # type: ignore[arg-type]
        # A degree-normalised aggregation (GCN) reads global degrees, and a
        # degree change alters the sender's messages: one more hop.
        first = self.model.convs[0]  # type: ignore[index]
        self.gcn = isinstance(getattr(first, "aggregation", None), SymNorm)
        self.table = full_recompute(model, graph, features, live, dtype=dtype)
        self.recomputed = 0

    def targets(self, edge_dst: Int64Array, feature_nodes: Int64Array) -> Int64Array:
        """Vertices whose final embedding may change after this window."""
        extra = 1 if self.gcn else 0  # a degree change alters the sender's messages
        reach = self._mark(edge_dst)
        frontier = np.flatnonzero(reach)
        for _ in range(self.num_layers - 1 + extra):
            frontier = self._out(frontier)
            reach[frontier] = True
        frontier = np.flatnonzero(self._mark(feature_nodes))
        reach[frontier] = True
        for _ in range(self.num_layers + extra):
            frontier = self._out(frontier)
            reach[frontier] = True
        return np.flatnonzero(reach)

    def update(self, edge_dst: Int64Array, feature_nodes: Int64Array) -> int:
        """Recompute the rows the window may have changed; return how many."""
        nodes = self.targets(edge_dst, feature_nodes)
        if nodes.size:
            self.table[nodes] = self._forward(nodes)
        self.recomputed += int(nodes.size)
        return int(nodes.size)

    def _mark(self, nodes: Int64Array) -> np.ndarray:
        """A dense mask of ``nodes`` (sets by marking: cheaper than hashing here)."""
        mask = np.zeros(self.graph.num_nodes, dtype=np.bool_)
        mask[nodes] = True
        return mask

    def _out(self, nodes: Int64Array) -> Int64Array:
        if nodes.size == 0:
            return nodes
        return np.flatnonzero(self._mark(self.graph.out_adjacency(nodes)[1]))

    def _blocks(self, seeds: Int64Array) -> list[Block]:
        """Full in-neighbour blocks, last layer first, live sources only."""
        blocks = []
        dst = seeds
        local = np.full(self.graph.num_nodes, -1, dtype=np.int64)
        for _ in range(self.num_layers):
            indptr, src = self.graph.in_adjacency(dst)
            rows = np.repeat(np.arange(dst.shape[0]), np.diff(indptr))
            keep = self.live[src]
            counts = np.bincount(rows[keep], minlength=dst.shape[0])
            src = src[keep]
            new = self._mark(src)
            new[dst] = False  # destinations come first among the sources
            ids = np.concatenate([dst, np.flatnonzero(new)])
            local[ids] = np.arange(ids.shape[0])
            new_indptr = np.zeros(dst.shape[0] + 1, dtype=np.int64)
            np.cumsum(counts, out=new_indptr[1:])
            blocks.append(Block(new_indptr, local[src], ids, dst.shape[0]))
            dst = ids
        return blocks[::-1]

    def _forward(self, seeds: Int64Array) -> np.ndarray:
        blocks = self._blocks(seeds)
        x = torch.from_numpy(np.asarray(self.features[blocks[0].src_global_ids]))
        x = x.to(self.dtype)
        with torch.no_grad():
            if not self.gcn:
                return np.asarray(self.model(blocks, x).numpy())
            convs: Any = self.model.convs
            for i, (conv, block) in enumerate(zip(convs, blocks, strict=True)):
                x = _gcn_block(conv, block, x, self.graph, self.live)
                if i < self.num_layers - 1:
                    x = self.model.act(x)  # type: ignore[operator]
        return np.asarray(x.numpy())


def _gcn_block(
    conv: Any, block: Block, x: torch.Tensor, graph: DynamicGraph, live: np.ndarray
) -> torch.Tensor:
    """A self-loop, degree-normalised layer over a block with *global* degrees.

    The block's own degrees would normalise differently from the full graph, so
    the coefficients come from the live in-degrees of the whole graph (through
    the aggregation's own formula); the layer's declaration does the rest.
    """
    aggregation: SymNorm = conv.aggregation
    num_dst = block.num_dst
    rows = np.repeat(np.arange(num_dst), np.diff(block.indptr))
    cols = block.indices
    ids = block.src_global_ids
    keep = ids[cols] != ids[rows]  # existing loops are replaced by one per node
    loops = np.arange(num_dst)
    rows = np.concatenate([rows[keep], loops])
    cols = np.concatenate([cols[keep], loops])
    weight = np.concatenate(
        [np.ones(int(keep.sum())), np.full(num_dst, aggregation.loop_weight)]
    )
    order = np.argsort(rows, kind="stable")
    rows, cols, weight = rows[order], cols[order], weight[order]
    degree = _live_in_degree(graph, ids, live) + aggregation.loop_weight
    inv = torch.from_numpy(degree**-0.5)
    values = aggregation.coefficients(
        inv[torch.from_numpy(cols)],
        torch.from_numpy(weight),
        inv[torch.from_numpy(rows)],
    )
    indptr = np.zeros(num_dst + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=num_dst), out=indptr[1:])
    looped = as_device_graph(Block(indptr, cols, ids, num_dst), x.device)
    prop = Propagation(looped, values.to(x.dtype))
    out: torch.Tensor = conv.propagate(prop, x, x[:num_dst])
    return out


def _live_in_degree(
    graph: DynamicGraph, nodes: Int64Array, live: np.ndarray
) -> np.ndarray:
    indptr, src = graph.in_adjacency(nodes)
    rows = np.repeat(np.arange(nodes.shape[0]), np.diff(indptr))
    keep = live[src] & (src != nodes[rows])
    return np.bincount(rows[keep], minlength=nodes.shape[0]).astype(np.float64)
