"""Graph and feature storage: CSR graphs, datasets, feature stores, loaders, generators.

A plain library: it never imports the engine.

* :class:`CSRGraph`: the graph type every layer reads.
* :class:`GraphDataset` and the dataset directory format: :func:`save_dataset`,
  :func:`open_dataset` (memory-mapped), :func:`save_arrays` / :func:`load_arrays`
  (auxiliary array groups such as partition books).
* Feature stores keyed by (group, attr): :class:`InMemoryFeatureStore`,
  :class:`ArrowFeatureStore`.
* Loaders and generators: :func:`load_planetoid`, :func:`read_edges`,
  :func:`load_edge_list`, :func:`rmat`, :func:`sbm`, :func:`random_geometric`.
* Graph specs (``planetoid:cora``, ``rmat:scale=16``, a path): :func:`load_graph`.
* Converters (scipy, networkx, PyG, DGL): :mod:`strata.storage.interop`.
"""

from strata.storage.csr import (
    CSRGraph,
    DuplicatePolicy,
    SelfLoopPolicy,
    as_tensor,
    index_dtype,
)
from strata.storage.dataset import (
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
from strata.storage.dynamic import (
    ApplyReport,
    CompactionPolicy,
    DynamicGraph,
    NodeFeatureTable,
)
from strata.storage.errors import (
    DatasetError,
    FeatureError,
    FormatError,
    GraphError,
    StorageError,
    format_error,
)
from strata.storage.features import (
    ArrowFeatureStore,
    FeatureSchema,
    FeatureStore,
    InMemoryFeatureStore,
    Key,
)
from strata.storage.generators import (
    community_features,
    random_geometric,
    rmat,
    rmat_edges,
    sbm,
    split_masks,
)
from strata.storage.loaders import EdgeList, load_edge_list, load_planetoid, read_edges
from strata.storage.spec import GraphSpec, load_graph, parse_spec
from strata.storage.update_log import (
    DEFAULT_MAX_LOG_BYTES,
    AppendResult,
    LogConfig,
    LogCorruptError,
    LogError,
    LogFullError,
    LogRecord,
    LogSeqGapError,
    RecoveryReport,
    UpdateLog,
)
from strata.storage.updates import (
    MAX_NODES,
    UpdateArrays,
    UpdateError,
    UpdateKind,
    UpdateLimits,
    decode_updates,
    edge_updates,
    feature_updates,
    make_updates,
    update_schema,
    validate_updates,
)

__all__ = [
    "DEFAULT_MAX_LOG_BYTES",
    "MAX_NODES",
    "AppendResult",
    "ApplyReport",
    "ArrowFeatureStore",
    "CSRGraph",
    "CompactionPolicy",
    "DatasetError",
    "DuplicatePolicy",
    "DynamicGraph",
    "EdgeList",
    "FeatureError",
    "FeatureSchema",
    "FeatureStore",
    "FormatError",
    "GraphDataset",
    "GraphError",
    "GraphSpec",
    "InMemoryFeatureStore",
    "Key",
    "LogConfig",
    "LogCorruptError",
    "LogError",
    "LogFullError",
    "LogRecord",
    "LogSeqGapError",
    "Manifest",
    "NodeFeatureTable",
    "RecoveryReport",
    "SelfLoopPolicy",
    "StorageError",
    "UpdateArrays",
    "UpdateError",
    "UpdateKind",
    "UpdateLimits",
    "UpdateLog",
    "as_tensor",
    "community_features",
    "decode_updates",
    "delete_arrays",
    "edge_updates",
    "feature_updates",
    "format_error",
    "index_dtype",
    "load_arrays",
    "load_edge_list",
    "load_graph",
    "load_planetoid",
    "make_updates",
    "open_dataset",
    "parse_spec",
    "random_geometric",
    "read_edges",
    "read_manifest",
    "rmat",
    "rmat_edges",
    "save_arrays",
    "save_columns",
    "save_dataset",
    "sbm",
    "split_masks",
    "update_schema",
    "validate_updates",
    "verify_dataset",
]
