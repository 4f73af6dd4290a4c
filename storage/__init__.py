"""Graph and feature storage: CSR graphs, datasets, feature stores, loaders, generators.

A plain library: it never imports the engine.
"""

from storage.csr import (
    CSRGraph,
    DuplicatePolicy,
    SelfLoopPolicy,
    as_tensor,
    index_dtype,
)
from storage.dataset import GraphDataset
from storage.errors import (
    DatasetError,
    FeatureError,
    FormatError,
    GraphError,
    StorageError,
    format_error,
)
from storage.generators import (
    community_features,
    random_geometric,
    rmat,
    rmat_edges,
    sbm,
    split_masks,
)
from storage.loaders import load_planetoid

__all__ = [
    "CSRGraph",
    "DatasetError",
    "DuplicatePolicy",
    "FeatureError",
    "FormatError",
    "GraphDataset",
    "GraphError",
    "SelfLoopPolicy",
    "StorageError",
    "as_tensor",
    "community_features",
    "format_error",
    "index_dtype",
    "load_planetoid",
    "random_geometric",
    "rmat",
    "rmat_edges",
    "sbm",
    "split_masks",
]
