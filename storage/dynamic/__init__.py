"""Graphs that change: a CSR base plus deltas, and node features beside it.

:class:`DynamicGraph` holds the topology (directed multigraph, d3gnn.md §3.1);
:class:`NodeFeatureTable` holds ``x_v`` for ``set_feature`` updates. They are separate
because streaming layers keep their own per-layer inputs and a topology-only stream
needs no features; both apply the same update batches.
"""

from strata.storage.dynamic.features import NodeFeatureTable
from strata.storage.dynamic.graph import ApplyReport, CompactionPolicy, DynamicGraph

__all__ = ["ApplyReport", "CompactionPolicy", "DynamicGraph", "NodeFeatureTable"]
