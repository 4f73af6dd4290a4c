"""Small fixture graphs for partitioner tests (drawable, or seeded generators)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from partition_helpers import from_networkx, simple

from strata.storage import CSRGraph
from strata.storage.generators import random_geometric, rmat, sbm


# 0 ── 1 ── 2 ── 3      RING8: 8 nodes, 8 undirected edges
# │              │
# 7 ── 6 ── 5 ── 4
@pytest.fixture(scope="session")
def ring8() -> CSRGraph:
    src = np.arange(8)
    return CSRGraph.from_edges(src, (src + 1) % 8)


@pytest.fixture(scope="session")
def grid() -> CSRGraph:
    """A 30 x 30 grid: 900 nodes, 1740 edges."""
    return from_networkx(nx.grid_2d_graph(30, 30))


@pytest.fixture(scope="session")
def community() -> CSRGraph:
    """Planted partition: 8 blocks of 250 nodes, ~85% of edges inside a block."""
    graph, _ = sbm(2000, 8, avg_degree=12, intra_fraction=0.85, seed=3)
    return graph


@pytest.fixture(scope="session")
def geometric() -> CSRGraph:
    graph, _ = random_geometric(3000, 0.035, seed=2)
    return graph


@pytest.fixture(scope="session")
def powerlaw() -> CSRGraph:
    """RMAT scale 11 (isolated vertices included, as the generator makes them)."""
    return simple(rmat(11, 8, seed=5))
