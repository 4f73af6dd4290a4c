"""Seeded synthetic graphs, features and splits for tests and benchmarks at scale.

* :func:`rmat` / :func:`rmat_edges`: skewed RMAT graphs (Graph500 parameters).
* :func:`sbm`: planted-community graphs, with the community of every node.
* :func:`random_geometric`: 2-D random geometric graphs (high locality).
* :func:`zipf_source_graph`: source-skewed graphs (Zipf sources, uniform targets).
* :func:`community_features` and :func:`split_masks`: features correlated with
  communities and Planetoid-shaped masks, so GNN accuracy on generated graphs means
  something.

Every generator is deterministic given its ``seed``, on any thread count.
"""

from strata.storage.generators.features import community_features, split_masks
from strata.storage.generators.rgg import random_geometric
from strata.storage.generators.rmat import (
    GRAPH500_ABCD,
    rmat,
    rmat_edges,
    rmat_edges_reference,
)
from strata.storage.generators.sbm import sbm
from strata.storage.generators.zipf import zipf_source_graph

__all__ = [
    "GRAPH500_ABCD",
    "community_features",
    "random_geometric",
    "rmat",
    "rmat_edges",
    "rmat_edges_reference",
    "sbm",
    "split_masks",
    "zipf_source_graph",
]
