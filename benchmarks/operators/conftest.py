"""Fixtures for the GNN operator benchmarks: the RMAT datasets on disk."""

from __future__ import annotations

from pathlib import Path

import pytest
from gnn_dataset import write_rmat_dataset

LARGE_SCALE = 18
SMOKE_SCALE = 10


@pytest.fixture(scope="session")
def rmat_large(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """RMAT scale 18, edge factor 16, 128 features, 16 classes (gnn_dataset.py)."""
    return write_rmat_dataset(tmp_path_factory.mktemp("rmat18"), LARGE_SCALE)


@pytest.fixture(scope="session")
def rmat_smoke(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same recipe at scale 10, for the quick smoke runs."""
    return write_rmat_dataset(
        tmp_path_factory.mktemp("rmat10"), SMOKE_SCALE, num_train=2048
    )
