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
from storage.errors import (
    DatasetError,
    FeatureError,
    FormatError,
    GraphError,
    StorageError,
    format_error,
)

__all__ = [
    "CSRGraph",
    "DatasetError",
    "DuplicatePolicy",
    "FeatureError",
    "FormatError",
    "GraphError",
    "SelfLoopPolicy",
    "StorageError",
    "as_tensor",
    "format_error",
    "index_dtype",
]
