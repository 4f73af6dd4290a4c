"""StreamingGNN: the L streaming layers of a model chained in one process.

A flush of layer ``l`` returns the record layer ``l + 1`` applies, so one graph update
cascades through the layers (d3gnn.md §2, "unrolled dataflow"). This class runs the
cascade directly, without the engine: the reference path for tests and benchmarks, and
what :func:`strata.operators.streaming.gnn.streaming_gnn` splits into one pipeline step
per layer.

Examples:
    >>> import numpy as np, torch
    >>> from strata.storage import CSRGraph, edge_updates
    >>> from strata.operators.layers import GraphSAGE
    >>> _ = torch.manual_seed(0)
    >>> sage = GraphSAGE(4, 8, 2, num_layers=2)
    >>> gnn = StreamingGNN(StreamingModel.from_module(sage), dtype=np.float64)
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 3]), num_nodes=4)
    >>> x = np.random.default_rng(0).normal(size=(4, 4))
    >>> gnn.initialize(g, x)
    >>> new_edge = edge_updates(np.array([3]), np.array([0]), event_time=0)
    >>> out = gnn.apply_updates(new_edge)
    >>> sorted(out.nodes.tolist())  # 0 gained an in-edge; 1 reads 0
    [0, 1]
    >>> g2 = CSRGraph.from_edges(np.array([0, 1, 2, 3]), np.array([1, 2, 3, 0]))
    >>> with torch.no_grad():
    ...     full = sage.double()(g2, torch.from_numpy(x)).numpy()
    >>> bool(np.allclose(gnn.embeddings(np.arange(4)), full))
    True
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from strata.operators.streaming.delta import Int64Array, LayerDelta
from strata.operators.streaming.layer import StreamingLayer
from strata.operators.streaming.model import StreamingModel


class StreamingGNN:
    """All layers of a streaming model in one process.

    Args:
        model: The layer rules (see :class:`StreamingModel`).
        dtype: dtype of stored inputs and of embeddings (accumulators: float64).
    """

    def __init__(self, model: StreamingModel, *, dtype: Any = np.float32) -> None:
        self.model = model
        last = model.num_layers - 1
        self.layers = [
            StreamingLayer(rule, last=i == last, act=model.act, dtype=dtype)
            for i, rule in enumerate(model.rules)
        ]
        self.applied_updates = 0

    def initialize(
        self, graph: Any, x: np.ndarray, live: np.ndarray | None = None
    ) -> None:
        """Start every layer from a graph and node features (one forward pass).

        Args:
            graph: The starting :class:`~strata.storage.CSRGraph`.
            x: Node features, one row per node.
            live: Which nodes have features (default: all rows of ``x``).
        """
        f = x
        for layer in self.layers:
            layer.initialize(graph, f, live)
            live = layer.live[: layer.num_nodes]
            f = layer.outputs(np.arange(layer.num_nodes))

    def apply(self, delta: LayerDelta) -> LayerDelta:
        """Flush ``delta`` through every layer; return the last layer's record."""
        for layer in self.layers:
            delta = layer.apply(delta)
        self.applied_updates += delta.updates
        return delta

    def apply_updates(
        self, batch: pa.RecordBatch, first_offset: int = -1
    ) -> LayerDelta:
        """Flush one update batch (``strata.storage.updates`` schema) through layers."""
        return self.apply(LayerDelta.from_updates(batch, first_offset=first_offset))

    def embeddings(self, nodes: Int64Array | None = None) -> np.ndarray:
        """Current embeddings (last-layer outputs) of ``nodes`` (default: all)."""
        last = self.layers[-1]
        ids = np.arange(last.num_nodes) if nodes is None else np.asarray(nodes)
        return last.outputs(ids)

    def live_nodes(self) -> Int64Array:
        """Nodes with an embedding (a feature, hence an input at every layer)."""
        return self.layers[-1].live_nodes()

    def stats(self) -> dict[str, int]:
        """Per-layer counters, ``layer{l}.{name}``."""
        out = {"applied_updates": self.applied_updates}
        for i, layer in enumerate(self.layers, start=1):
            for key, value in layer.stats.items():
                out[f"layer{i}.{key}"] = value
        return out

    def snapshot(self) -> dict[str, Any]:
        """Every layer's state (arrays and scalars)."""
        state: dict[str, Any] = {"applied_updates": self.applied_updates}
        for i, layer in enumerate(self.layers):
            state[f"layer{i}"] = layer.snapshot()
        return state

    def restore(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`snapshot`."""
        self.applied_updates = int(state["applied_updates"])
        for i, layer in enumerate(self.layers):
            layer.restore(state[f"layer{i}"])

    def __repr__(self) -> str:
        return f"StreamingGNN({self.model!r}, num_nodes={self.layers[0].num_nodes})"
