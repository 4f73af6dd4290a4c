"""PyG baselines of the streaming benchmark: recompute after every update batch.

Real peer code (issue 15 item 5): PyG's own ``SAGEConv`` layers, with the weights of
Strata's model, keep every node's embedding current while update batches arrive by

* :class:`PygFull`: a full forward over the current graph after each batch;
* :class:`PygAffected`: the DGL-style recompute D3-GNN compares against, written with
  PyG's ``k_hop_subgraph``: the vertices whose embedding may change (the ``L-1``-hop
  out-reach of the batch's edge destinations, the ``L``-hop out-reach of nodes with
  new features), their ``L``-hop in-neighbourhood subgraph, one forward on it.

Both aggregate through a ``torch.sparse_csr`` ``adj_t`` (PyG's fast CPU path,
``torch.sparse.mm(adj_t, x, reduce="mean")``; without pyg-lib or torch-sparse there
is no faster one: ``edge_index`` scatter is measured slower, see
``aggregate="edge_index"``). Both maintain their own graph (:class:`PeerGraph`) and
count applying the batch to it in their time, as the incremental path counts its own.

Examples:
    >>> import numpy as np, torch
    >>> from strata.operators.layers import GraphSAGE
    >>> from strata.storage import CSRGraph, edge_updates
    >>> _ = torch.manual_seed(0)
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]))
    >>> x = np.ones((3, 4), np.float32)
    >>> full = PygFull(GraphSAGE(4, 8, 2, num_layers=2), g, x)
    >>> full.update(edge_updates(np.array([2]), np.array([1]), event_time=0)).shape
    (3, 2)
"""

from __future__ import annotations

import warnings

import numpy as np
import pyarrow as pa
import torch
from torch import nn

from strata.storage import CSRGraph, UpdateKind, decode_updates

# PyG 2.8 scripts a class with torch.jit at import, which torch 2.13 deprecates.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import torch_geometric
    from torch_geometric.nn import SAGEConv
    from torch_geometric.utils import k_hop_subgraph

#: The peer's name and version, as the results table shows it.
PEER = f"PyG {torch_geometric.__version__} (torch {torch.__version__.split('+')[0]})"


class PygSage(nn.Module):
    """PyG ``SAGEConv`` layers with ReLU between them (Strata's GraphSAGE, eval)."""

    def __init__(self, strata_model: nn.Module) -> None:
        super().__init__()
        convs = list(strata_model.convs)  # type: ignore[arg-type]
        self.convs = nn.ModuleList()
        for conv in convs:
            if conv.aggr != "mean" or conv.project or conv.normalize:
                raise ValueError("the PyG peer mirrors SAGE-mean layers only")
            pyg = SAGEConv(conv.in_channels, conv.out_channels, aggr="mean")
            pyg.lin_l.load_state_dict(conv.lin_l.state_dict())
            pyg.lin_r.load_state_dict(conv.lin_r.state_dict())
            self.convs.append(pyg)
        self.eval()

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        """Embeddings of every row of ``x`` (``adj``: ``adj_t`` or ``edge_index``)."""
        for i, conv in enumerate(self.convs):
            x = conv(x, adj)
            if i < len(self.convs) - 1:
                x = x.relu()
        return x


class PeerGraph:
    """The peer's multigraph as a destination-sorted COO, updated in place.

    A batch's deletes remove one copy each (of edges present when the batch starts,
    as ``UpdateStream`` draws them), then its additions are inserted at their sorted
    positions: ``O(E)`` memory moves per batch, no sort.
    """

    def __init__(self, graph: CSRGraph) -> None:
        src, dst = graph.to_coo()
        order = np.argsort(dst, kind="stable")
        self.col = np.ascontiguousarray(np.asarray(src, np.int64)[order])
        self.row = np.ascontiguousarray(np.asarray(dst, np.int64)[order])
        self.num_nodes = graph.num_nodes

    def apply(self, batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray]:
        """Apply a batch's edge rows; return (edge destinations, feature nodes)."""
        u = decode_updates(batch)
        adds = u.kind == UpdateKind.ADD_EDGE
        dels = u.kind == UpdateKind.REMOVE_EDGE
        if dels.any():
            doomed = []
            for s, d in zip(u.src[dels], u.dst[dels], strict=True):
                lo, hi = np.searchsorted(self.row, [d, d + 1])
                hits = lo + np.flatnonzero(self.col[lo:hi] == s)
                free = [h for h in hits.tolist() if h not in doomed]
                if free:
                    doomed.append(free[0])
            self.col = np.delete(self.col, doomed)
            self.row = np.delete(self.row, doomed)
        if adds.any():
            # sorted by destination: additions sharing an insertion point (after
            # the last in-edge of their node, or one without any) keep row order
            order = np.argsort(u.dst[adds], kind="stable")
            src, dst = u.src[adds][order], u.dst[adds][order]
            at = np.searchsorted(self.row, dst, side="right")
            self.col = np.insert(self.col, at, src)
            self.row = np.insert(self.row, at, dst)
        edges = adds | dels
        return u.dst[edges], u.node[u.kind == UpdateKind.SET_FEATURE]

    def indptr(self) -> torch.Tensor:
        """CSR row pointers over destinations."""
        counts = np.bincount(self.row, minlength=self.num_nodes)
        out = np.zeros(self.num_nodes + 1, dtype=np.int64)
        np.cumsum(counts, out=out[1:])
        return torch.from_numpy(out)

    def adj_t(self) -> torch.Tensor:
        """``adj_t`` as a ``torch.sparse_csr`` tensor (rows: destinations)."""
        return _csr(self.indptr(), torch.from_numpy(self.col), self.num_nodes)

    def edge_index(self) -> torch.Tensor:
        """``[2, E]`` (source, destination), sorted by destination."""
        return torch.from_numpy(np.stack([self.col, self.row]))


def _csr(indptr: torch.Tensor, col: torch.Tensor, n: int) -> torch.Tensor:
    values = torch.ones(col.shape[0], dtype=torch.float32)
    return torch.sparse_csr_tensor(
        indptr, col, values, size=(n, n), check_invariants=False
    )


def _apply_features(x: torch.Tensor, batch: pa.RecordBatch) -> None:
    u = decode_updates(batch)
    sets = u.kind == UpdateKind.SET_FEATURE
    if sets.any():  # in row order: the last write of a node wins
        for node, value in zip(u.node[sets], u.feature[sets], strict=True):
            x[int(node)] = torch.from_numpy(np.asarray(value))


class PygFull:
    """Baseline (b): a full PyG forward over the current graph after each batch.

    Args:
        model: Strata's trained GraphSAGE (SAGE-mean; weights are copied).
        graph: The starting graph.
        x: ``[num_nodes, in_dim]`` float32 features.
        aggregate: ``"adj_t"`` (sparse CSR, default) or ``"edge_index"`` (scatter).
    """

    def __init__(
        self,
        model: nn.Module,
        graph: CSRGraph,
        x: np.ndarray,
        *,
        aggregate: str = "adj_t",
    ) -> None:
        self.model = PygSage(model)
        self.graph = PeerGraph(graph)
        self.x = torch.from_numpy(np.array(x, dtype=np.float32))
        self.aggregate = aggregate
        self.table = self._forward()

    def _forward(self) -> np.ndarray:
        g = self.graph
        adj = g.adj_t() if self.aggregate == "adj_t" else g.edge_index()
        with torch.no_grad():
            return np.asarray(self.model(self.x, adj).numpy())

    def update(self, batch: pa.RecordBatch) -> np.ndarray:
        """Apply ``batch``; return every node's embedding."""
        self.graph.apply(batch)
        _apply_features(self.x, batch)
        self.table = self._forward()
        return self.table


class PygAffected:
    """Baseline (a): recompute the vertices a batch may change, on their subgraph.

    Keeps an embedding table (initialised by a full forward). Per batch: apply it to
    the graph; targets by ``k_hop_subgraph(flow="target_to_source")`` (out-reach);
    their ``L``-hop in-neighbourhood by ``k_hop_subgraph(flow="source_to_target",
    relabel_nodes=True)``; one forward on that subgraph; write the target rows.
    """

    def __init__(self, model: nn.Module, graph: CSRGraph, x: np.ndarray) -> None:
        self.model = PygSage(model)
        self.graph = PeerGraph(graph)
        self.x = torch.from_numpy(np.array(x, dtype=np.float32))
        self.layers = len(self.model.convs)
        with torch.no_grad():
            self.table = self.model(self.x, self.graph.adj_t()).numpy().copy()
        self.recomputed = 0
        self.subgraph_edges = 0

    def _reach(self, seeds: np.ndarray, hops: int, ei: torch.Tensor) -> torch.Tensor:
        if seeds.size == 0:
            return torch.zeros(0, dtype=torch.int64)
        subset, _, _, _ = k_hop_subgraph(
            torch.from_numpy(np.unique(seeds)),
            hops,
            ei,
            num_nodes=self.graph.num_nodes,
            flow="target_to_source",
        )
        return subset

    def update(self, batch: pa.RecordBatch) -> np.ndarray:
        """Apply ``batch``; recompute the rows it may change; return the table."""
        edge_dst, feature_nodes = self.graph.apply(batch)
        _apply_features(self.x, batch)
        ei = self.graph.edge_index()
        targets = torch.cat(
            [
                self._reach(edge_dst, self.layers - 1, ei),
                self._reach(feature_nodes, self.layers, ei),
            ]
        ).unique()
        if targets.numel() == 0:
            return self.table
        subset, sub_ei, mapping, _ = k_hop_subgraph(
            targets,
            self.layers,
            ei,
            relabel_nodes=True,
            num_nodes=self.graph.num_nodes,
            flow="source_to_target",
        )
        # sub_ei keeps edge_index's destination order and relabelling is monotone:
        # a CSR over the subgraph needs no sort.
        n = int(subset.numel())
        indptr = torch.zeros(n + 1, dtype=torch.int64)
        torch.cumsum(torch.bincount(sub_ei[1], minlength=n), 0, out=indptr[1:])
        adj = _csr(indptr, sub_ei[0].contiguous(), n)
        with torch.no_grad():
            out = self.model(self.x[subset], adj)[mapping]
        self.table[targets.numpy()] = out.numpy()
        self.recomputed += int(targets.numel())
        self.subgraph_edges += int(sub_ei.shape[1])
        return self.table
