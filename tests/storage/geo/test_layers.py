"""The layered tree on Table I (spec §2.2 worked example) and pitfall 3."""

from __future__ import annotations

import numpy as np
import pytest

from strata.storage.geo.errors import GeoError
from strata.storage.geo.layers import LayerTree, cross_region_pairs
from strata.storage.geo.topology import table1, uniform

USE, USW, LON, SGP, BJS = range(5)


def test_table1_layer_tree() -> None:
    tree = LayerTree.build(table1())
    assert tree.depth == 2
    assert [c.regions for c in tree.clusters(1)] == [(USE, USW, LON), (SGP, BJS)]
    assert [c.regions for c in tree.clusters(2)] == [(0, 1, 2, 3, 4)]
    assert tree.bounds_ms == (
        100.0,
        200.0,
    )  # the >= 200 ms layer merges nothing: dropped
    assert [c.regions for c in tree.ancestors(LON)] == [(0, 1, 2), (0, 1, 2, 3, 4)]


def test_pair_belongs_to_merge_layer_not_its_bucket() -> None:
    # Pitfall 3: USW-LON is 136 ms (bucket 2), but both join cluster A at layer 1.
    tree = LayerTree.build(table1())
    assert table1().rtt_ms[USW, LON] == 136.0
    assert tree.merge_layer(USW, LON) == 1
    assert tree.merge_layer(USW, BJS) == 2
    assert tree.merge_layer(SGP, SGP) == 0


def test_cross_pairs_limit_merging() -> None:
    # Only USE-SGP shares edges: nothing merges below 200 ms, then a root is added.
    pairs = np.zeros((5, 5), dtype=bool)
    pairs[USE, SGP] = pairs[SGP, USE] = True
    tree = LayerTree.build(table1(), pairs)
    assert tree.depth == 2
    assert [c.regions for c in tree.clusters(1)] == [(0, 3), (1,), (2,), (4,)]
    assert tree.clusters(2)[0].regions == (0, 1, 2, 3, 4)


def test_cross_region_pairs_from_edges() -> None:
    m = cross_region_pairs(np.array([0, 0, 2]), np.array([0, 1, 1]), 3)
    assert m.astype(int).tolist() == [[0, 1, 0], [1, 0, 1], [0, 1, 0]]


def test_uniform_is_one_layer_and_bad_bounds() -> None:
    assert LayerTree.build(uniform(4, 70.0, 90.0)).depth == 1
    with pytest.raises(GeoError, match="bounds_ms"):
        LayerTree.build(table1(), bounds_ms=(200.0, 100.0))
    with pytest.raises(GeoError, match=r"0\.\.4"):
        LayerTree.build(table1()).ancestors(9)
