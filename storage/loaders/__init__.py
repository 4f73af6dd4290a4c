"""Loaders: Planetoid, edge lists, graph folders, node tables, structural features.

Edge lists are CSV, TSV, SNAP text, Parquet, METIS ``.graph`` or MatrixMarket
``.mtx``; a graph folder holds ``edges.parquet`` and ``nodes.parquet``.
"""

from strata.storage.loaders.edgelist import (
    FORMATS,
    EdgeList,
    infer_format,
    load_edge_list,
    read_edges,
)
from strata.storage.loaders.folder import find_edge_file, load_folder
from strata.storage.loaders.matrix import read_matrix
from strata.storage.loaders.nodes import NodeTable, read_node_table
from strata.storage.loaders.planetoid import PLANETOID_NAMES, load_planetoid
from strata.storage.loaders.structural import STRUCTURAL_KINDS, structural_features

__all__ = [
    "FORMATS",
    "PLANETOID_NAMES",
    "STRUCTURAL_KINDS",
    "EdgeList",
    "NodeTable",
    "find_edge_file",
    "infer_format",
    "load_edge_list",
    "load_folder",
    "load_planetoid",
    "read_edges",
    "read_matrix",
    "read_node_table",
    "structural_features",
]
