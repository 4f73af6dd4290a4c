"""Fixtures for the kernel micro-benchmarks: RMAT graphs as DeviceGraphs."""

from __future__ import annotations

import pytest
import torch

from strata.operators.kernels import DeviceGraph, as_device_graph
from strata.storage import DuplicatePolicy, SelfLoopPolicy
from strata.storage.generators import rmat


def rmat_device_graph(scale: int) -> DeviceGraph:
    """The operator benchmarks' graph recipe (symmetric, simple), on CPU."""
    graph = rmat(
        scale,
        16,
        seed=0,
        symmetrize=True,
        self_loops=SelfLoopPolicy.REMOVE,
        duplicates=DuplicatePolicy.REMOVE,
    )
    dg = as_device_graph(graph, torch.device("cpu"))
    dg.transpose()  # built outside every timer
    return dg


@pytest.fixture(scope="session")
def rmat18() -> DeviceGraph:
    """RMAT scale 18, edge factor 16: 262,144 nodes, 7,612,712 edges."""
    return rmat_device_graph(18)


@pytest.fixture(scope="session")
def rmat10() -> DeviceGraph:
    """RMAT scale 10 for smoke runs."""
    return rmat_device_graph(10)


@pytest.fixture(autouse=True)
def _two_threads():
    torch.set_num_threads(2)
    import numba

    numba.set_num_threads(2)
