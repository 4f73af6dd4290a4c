"""Offline localisation (spec §2.5): who leaves the execution set, and what moves."""

from __future__ import annotations

import numpy as np
import pytest

from strata.storage.geo.errors import GeoError
from strata.storage.geo.layers import LayerTree
from strata.storage.geo.routing import localise
from strata.storage.geo.topology import table1, uniform


def test_heavy_local_data_stays_and_cheap_regions_leave() -> None:
    topo = uniform(2, 100.0, 100.0)
    tree = LayerTree.build(topo)
    src, dst = np.array([0, 1]), np.array([1, 0])  # one cut edge, both ways
    region = np.array([0, 1])
    # Moving 1 MB costs more than 15 rounds of 12-byte messages: nobody leaves.
    big = localise(src, dst, region, np.array([1_000_000, 1_000_000]), tree, topo)
    assert big.execution == (0, 1)
    assert big.migrated_bytes == 0
    small = localise(src, dst, region, np.array([10, 10]), tree, topo)
    assert small.execution == (1,)
    assert small.removed == (0,)
    assert small.vertex_region.tolist() == [1, 1]
    assert small.migrated_bytes == 10


def test_table1_hash_layout_shrinks_and_cuts_fewer_edges() -> None:
    topo = table1()
    tree = LayerTree.build(topo)
    rng = np.random.default_rng(0)
    n = 2000
    src = rng.integers(0, n, 20_000)
    dst = rng.integers(0, n, 20_000)
    region = rng.integers(0, 5, n)
    res = localise(src, dst, region, np.full(n, 64), tree, topo)
    assert 1 <= len(res.execution) < 5
    assert set(res.execution) | set(res.removed) == set(range(5))
    assert set(np.unique(res.vertex_region).tolist()) == set(res.execution)
    before = (region[src] != region[dst]).mean()
    after = (res.vertex_region[src] != res.vertex_region[dst]).mean()
    assert after < before
    # Vertices left in place keep their region; only removed regions' vertices move.
    kept = np.isin(region, res.execution)
    assert np.array_equal(res.vertex_region[kept], region[kept])
    assert res.migrated_vertices == int((~kept).sum())


def test_localise_bad_input() -> None:
    topo = uniform(2, 100.0, 100.0)
    tree = LayerTree.build(topo)
    with pytest.raises(GeoError, match="vertex_region"):
        localise(np.array([0]), np.array([1]), np.array([0, 7]), np.ones(2), tree, topo)
    with pytest.raises(GeoError, match="equal lengths"):
        localise(np.array([0]), np.array([1]), np.array([0]), np.ones(2), tree, topo)
