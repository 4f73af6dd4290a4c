"""Shared pieces of the streaming tests: small graphs, models, and the oracle."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pytest
import torch

from strata.operators.layers import GCN, GraphSAGE
from strata.operators.streaming import chaos
from strata.operators.streaming.reference import full_recompute
from strata.storage import (
    CSRGraph,
    DynamicGraph,
    UpdateKind,
    decode_updates,
    rmat_edges,
)

IN_DIM = 8


@pytest.fixture(autouse=False)
def one_torch_thread() -> Iterator[None]:
    """Tiny oracle forwards on one thread: a busy 2-core box makes OpenMP spin."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


#: Models with an incremental rule: name -> factory(in_dim).
MODELS = {
    "sage-mean": lambda d: GraphSAGE(d, 12, 5, num_layers=2),
    "sage-sum": lambda d: GraphSAGE(d, 12, 5, num_layers=2, aggr="sum"),
    "sage-max": lambda d: GraphSAGE(d, 12, 5, num_layers=2, aggr="max"),
    "sage-maxpool": lambda d: GraphSAGE(
        d, 12, 5, num_layers=2, aggr="max", project=True
    ),
    "gcn": lambda d: GCN(d, 12, 5, num_layers=2),
}


def free_endpoint() -> str:
    """A loopback endpoint on a port that is free now and stays out of the way.

    Jobs are killed and restarted on it: a kernel-picked port (``bind(0)``) could be
    handed to another process's outgoing connection while the job is down, and the
    restarted job's bind would fail (see ``chaos.free_endpoint``).
    """
    return chaos.free_endpoint()


def make_model(name: str, seed: int = 0) -> torch.nn.Module:
    """A seeded model in eval mode."""
    torch.manual_seed(seed)
    model = MODELS[name](IN_DIM)
    model.eval()
    return model


def rmat_graph(scale: int = 8, edge_factor: int = 4, seed: int = 0) -> CSRGraph:
    """An R-MAT multigraph with self-loops and parallel edges."""
    src, dst = rmat_edges(scale, edge_factor, seed=seed)
    return CSRGraph.from_edges(src, dst, num_nodes=1 << scale)


def features(num_nodes: int, seed: int = 0) -> np.ndarray:
    """Gaussian float32 node features."""
    return (
        np.random.default_rng(seed).normal(size=(num_nodes, IN_DIM)).astype(np.float32)
    )


class Oracle:
    """The current graph, features and liveness, kept by applying the same batches."""

    def __init__(self, graph: CSRGraph, x: np.ndarray, live: np.ndarray | None = None):
        self.graph = DynamicGraph(graph)
        self.x = np.zeros((max(graph.num_nodes, x.shape[0]), x.shape[1]), np.float32)
        self.x[: x.shape[0]] = x
        self.live = np.zeros(self.x.shape[0], dtype=bool)
        self.live[: x.shape[0]] = True if live is None else live

    def apply(self, batch: pa.RecordBatch) -> None:
        """Apply one update batch in row order."""
        self.graph.apply(batch)
        u = decode_updates(batch)
        n = max(self.graph.num_nodes, int(u.node.max(initial=-1)) + 1)
        if n > self.x.shape[0]:
            grown = np.zeros((n, self.x.shape[1]), np.float32)
            grown[: self.x.shape[0]] = self.x
            live = np.zeros(n, dtype=bool)
            live[: self.live.shape[0]] = self.live
            self.x, self.live = grown, live
        sets = np.flatnonzero(u.kind == UpdateKind.SET_FEATURE)
        if sets.size:
            self.x[u.node[sets]] = u.feature[sets]  # fancy assignment: last row wins
            self.live[u.node[sets]] = True

    def embeddings(self, model: torch.nn.Module) -> tuple[np.ndarray, np.ndarray]:
        """(live node ids, their full-recompute embeddings)."""
        n = self.graph.num_nodes
        if n > self.x.shape[0]:
            self.apply_growth(n)
        out = full_recompute(model, self.graph, self.x[:n], self.live[:n])
        nodes = np.flatnonzero(self.live[:n])
        return nodes, out[nodes]

    def apply_growth(self, n: int) -> None:
        """Grow the feature table to ``n`` rows (edges named new nodes)."""
        grown = np.zeros((n, self.x.shape[1]), np.float32)
        grown[: self.x.shape[0]] = self.x
        live = np.zeros(n, dtype=bool)
        live[: self.live.shape[0]] = self.live
        self.x, self.live = grown, live
