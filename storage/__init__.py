"""Graph and feature storage: CSR graphs, datasets, feature stores, loaders, generators.

A plain library: it never imports the engine.

* :class:`CSRGraph`: the graph type every layer reads.
* :class:`GraphDataset` and the dataset directory format: :func:`save_dataset`,
  :func:`open_dataset` (memory-mapped), :func:`save_arrays` / :func:`load_arrays`
  (auxiliary array groups such as partition books).
* Feature stores keyed by (group, attr): :class:`InMemoryFeatureStore`,
  :class:`ArrowFeatureStore`.
* Loaders and generators: :func:`load_planetoid`, :func:`rmat`, :func:`sbm`,
  :func:`random_geometric`.
"""

from storage.csr import (
    CSRGraph,
    DuplicatePolicy,
    SelfLoopPolicy,
    as_tensor,
    index_dtype,
)
from storage.dataset import (
    GraphDataset,
    Manifest,
    delete_arrays,
    load_arrays,
    open_dataset,
    read_manifest,
    save_arrays,
    save_columns,
    save_dataset,
    verify_dataset,
)
from storage.errors import (
    DatasetError,
    FeatureError,
    FormatError,
    GraphError,
    StorageError,
    format_error,
)
from storage.features import (
    ArrowFeatureStore,
    FeatureSchema,
    FeatureStore,
    InMemoryFeatureStore,
    Key,
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
    "ArrowFeatureStore",
    "CSRGraph",
    "DatasetError",
    "DuplicatePolicy",
    "FeatureError",
    "FeatureSchema",
    "FeatureStore",
    "FormatError",
    "GraphDataset",
    "GraphError",
    "InMemoryFeatureStore",
    "Key",
    "Manifest",
    "SelfLoopPolicy",
    "StorageError",
    "as_tensor",
    "community_features",
    "delete_arrays",
    "format_error",
    "index_dtype",
    "load_arrays",
    "load_planetoid",
    "open_dataset",
    "random_geometric",
    "read_manifest",
    "rmat",
    "rmat_edges",
    "save_arrays",
    "save_columns",
    "save_dataset",
    "sbm",
    "split_masks",
    "verify_dataset",
]
