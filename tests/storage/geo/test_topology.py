"""Topology, prices and item-space validation (spec §2.6, bad inputs)."""

from __future__ import annotations

import numpy as np
import pytest

from strata.storage.geo.errors import GeoError
from strata.storage.geo.items import ItemSpace, Placement, popcount32
from strata.storage.geo.topology import Prices, Topology, table1, uniform


def test_table1_matches_spec() -> None:
    t = table1()
    assert t.regions == ("USE", "USW", "LON", "SGP", "BJS")
    assert t.link("USE", "USW") == (69.0, 96.0)
    assert t.link("LON", "BJS") == (256.0, 42.0)
    assert t.link("SGP", "BJS") == (75.0, 96.0)
    assert t.link("BJS", "USW") == (145.0, 77.0)
    assert np.array_equal(t.rtt_ms, t.rtt_ms.T)
    assert t.link(2, 2) == (1.0, 10_000.0)
    assert t.prices == Prices(0.016, 0.10, 1.40, 0.043)
    assert Prices.aws().put_usd_per_million == 5.0


def test_uniform_preset() -> None:
    u = uniform(4, 70.0, 90.0)
    off = ~np.eye(4, dtype=bool)
    assert (u.rtt_ms[off] == 70.0).all()
    assert (u.bw_mbps[off] == 90.0).all()


def test_asymmetric_rtt_is_rejected() -> None:
    rtt = np.array([[0, 70.0], [71.0, 0]])
    with pytest.raises(GeoError, match=r"rtt_ms.*symmetric.*rtt_ms\[0,1\]=70.0"):
        Topology(("a", "b"), rtt, np.full((2, 2), 10.0))


def test_non_positive_and_bad_diagonal_rejected() -> None:
    with pytest.raises(GeoError, match="positive"):
        Topology(("a", "b"), np.array([[0, -5.0], [-5.0, 0]]), np.full((2, 2), 1.0))
    with pytest.raises(GeoError, match="diagonal"):
        Topology(("a", "b"), np.array([[3.0, 5.0], [5.0, 0]]), np.full((2, 2), 1.0))


def test_too_many_regions_rejected() -> None:
    with pytest.raises(GeoError, match=r"1\.\.32"):
        uniform(33, 50.0, 100.0)
    with pytest.raises(GeoError, match=r"1\.\.32"):
        Topology(
            tuple(f"r{i}" for i in range(33)), np.ones((33, 33)), np.ones((33, 33))
        )


def test_unknown_region_rejected() -> None:
    t = table1()
    with pytest.raises(GeoError, match=r"one of \['USE'.*got 'PAR'"):
        t.index("PAR")
    with pytest.raises(GeoError, match=r"0\.\.4"):
        t.link(0, 7)


def test_negative_item_sizes_rejected() -> None:
    with pytest.raises(GeoError, match=r"item_bytes.*sizes >= 0.*-3 at item 1"):
        ItemSpace(2, 0, np.array([10, -3]), np.array([0, 0]))
    with pytest.raises(GeoError, match="home"):
        ItemSpace(1, 0, np.array([10]), np.array([40]))


def test_placement_bitmask_operations() -> None:
    space = ItemSpace(3, 1, np.array([10, 20, 30, 32]), np.array([0, 1, 2, 0]))
    p = Placement.home_only(space)
    assert p.replicas().tolist() == [1, 1, 1, 1]
    p.add(4, np.array([0, 3]))
    assert p.holds(4).tolist() == [True, False, False, True]
    assert p.storage_bytes(space, 5).tolist() == [42.0, 20.0, 30.0, 0.0, 42.0]
    q = p.copy()
    q.add(1, np.array([0]))
    assert p.replicas()[0] == 2
    assert q.replicas()[0] == 3
    p.check(space)
    bad = Placement(np.zeros(4, dtype=np.uint32))
    with pytest.raises(GeoError, match="home bit"):
        bad.check(space)
    assert popcount32(np.array([0xFFFF_FFFF], np.uint32)).tolist() == [32]
