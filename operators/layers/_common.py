"""Helpers shared by the layers (private): graph resolution and initialisers."""

from __future__ import annotations

import math

import torch

from strata.operators.kernels.device_graph import (
    DeviceGraph,
    GraphLike,
    as_device_graph,
    check_node_features,
)

Graph = GraphLike | DeviceGraph


def resolve_graph(graph: Graph, x: torch.Tensor, where: str) -> DeviceGraph:
    """The cached :class:`DeviceGraph` of ``graph`` on ``x``'s device, checked.

    Raises:
        OperatorError: if ``x`` does not have one row per source node.
    """
    dg = as_device_graph(graph, x.device)
    check_node_features(dg, x, where)
    return dg


def needs_backward(module: torch.nn.Module) -> bool:
    """Whether a backward pass through ``module``'s parameters will follow."""
    return torch.is_grad_enabled() and any(p.requires_grad for p in module.parameters())


def glorot_(tensor: torch.Tensor) -> None:
    """PyG's ``glorot``: uniform in +-sqrt(6 / (size(-2) + size(-1)))."""
    bound = math.sqrt(6.0 / (tensor.size(-2) + tensor.size(-1)))
    with torch.no_grad():
        tensor.uniform_(-bound, bound)
