"""Layer-wise full-neighbour inference: exact outputs for every node, bounded memory.

A sampled model is evaluated without sampling, layer by layer (as DGL's GraphSAGE
example and PyG's ``inference`` do): layer ``l``'s output for *all* nodes is
computed in batches of destination nodes, each from a one-layer block holding every
in-neighbour (fan-out ``-1``), and stored before layer ``l + 1`` starts. Each node's
embedding is computed once per layer, instead of once per seed whose
``L``-hop neighbourhood contains it, and memory holds one layer's outputs plus one
batch.

For GraphSAGE, GAT and GIN the result equals the full-graph forward pass. GCN on a
block normalises by the block's source degrees (DGL's ``norm="both"`` on blocks), so
its layer-wise outputs differ from the full-graph GCN's.

Examples:
    >>> import numpy as np, torch
    >>> from strata.storage import InMemoryFeatureStore, Key, sbm
    >>> from strata.operators.layers import GraphSAGE
    >>> g, _ = sbm(60, 3, avg_degree=4, seed=0)
    >>> x = torch.randn(60, 8)
    >>> store = InMemoryFeatureStore({Key("node", "x"): x})
    >>> model = GraphSAGE(8, 16, 3, num_layers=2).eval()
    >>> out = layerwise_inference(model, g, store, Key("node", "x"), batch_size=16)
    >>> torch.allclose(out, model(g, x), atol=1e-5)
    True
"""

from __future__ import annotations

import numpy as np
import torch

from strata.operators.layers import BasicGNN
from strata.operators.samplers import NeighborSampler, SamplerConfig
from strata.storage import CSRGraph, FeatureStore, Key


@torch.no_grad()
def layerwise_inference(
    model: BasicGNN,
    graph: CSRGraph,
    features: FeatureStore,
    key: Key,
    *,
    batch_size: int = 4096,
    device: torch.device | None = None,
) -> torch.Tensor:
    """Compute ``model``'s output for every node of ``graph``, one layer at a time.

    Args:
        model: a model of :mod:`strata.operators.layers` (its ``convs`` and
            ``act``); put
            it in eval mode first (dropout is applied as the model's mode says).
        graph: the full graph.
        features: the store holding the input features under ``key``.
        key: the features' key.
        batch_size: destination nodes per block.
        device: where to compute (default: the model's device); layer outputs are
            kept on the CPU between layers.

    Returns:
        A CPU float tensor ``[num_nodes, out_channels]``.

    Shapes:
        features[key]: ``[num_nodes, in_channels]``.
    """
    if device is None:
        device = next(model.parameters()).device
    n = graph.num_nodes
    sampler = NeighborSampler(graph, SamplerConfig(fanouts=(-1,)))
    h: torch.Tensor | None = None  # the previous layer's outputs (CPU)
    for layer, conv in enumerate(model.convs):
        out: torch.Tensor | None = None
        for start in range(0, n, batch_size):
            dst = np.arange(start, min(n, start + batch_size), dtype=np.int64)
            (block,) = sampler.sample(dst)
            src = block.src_global_ids
            x = features.get(key, src) if h is None else h[torch.from_numpy(src)]
            x = x.to(device=device, dtype=torch.float32).reshape(len(src), -1)
            x = torch.nn.functional.dropout(x, model.dropout, model.training)
            y = conv(block, x)
            if layer < model.num_layers - 1:
                y = model.act(y)
            if out is None:
                out = torch.empty((n, y.shape[1]), dtype=y.dtype)
            out[start : start + len(dst)] = y.cpu()
        h = out
    assert h is not None
    return h
