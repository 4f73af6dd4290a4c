"""Datasets: the in-memory :class:`GraphDataset` and the on-disk directory format."""

from storage.dataset.model import GraphDataset

__all__ = ["GraphDataset"]
