"""Loaders: Planetoid raw files and edge lists (CSV, TSV, SNAP text, Parquet)."""

from strata.storage.loaders.edgelist import (
    FORMATS,
    EdgeList,
    infer_format,
    load_edge_list,
    read_edges,
)
from strata.storage.loaders.planetoid import PLANETOID_NAMES, load_planetoid

__all__ = [
    "FORMATS",
    "PLANETOID_NAMES",
    "EdgeList",
    "infer_format",
    "load_edge_list",
    "load_planetoid",
    "read_edges",
]
