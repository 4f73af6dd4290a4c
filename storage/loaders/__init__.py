"""Loaders: Planetoid raw files and edge lists (CSV, TSV, SNAP text, Parquet)."""

from storage.loaders.planetoid import load_planetoid

__all__ = ["load_planetoid"]
