"""Directed heat diffusion: pitfall 1 (scaling, cap) and pitfall 2 (5-vertex path)."""

from __future__ import annotations

import numpy as np
import pytest

from strata.storage.geo.errors import GeoError
from strata.storage.geo.heat import HeatConfig, diffuse

PATH_SRC = np.array([0, 1, 2, 3])
PATH_DST = np.array([1, 2, 3, 4])


def test_heat_falls_with_distance_from_one_hot_end() -> None:
    out = diffuse(5, PATH_SRC, PATH_DST, np.ones(4), np.array([100.0, 0, 0, 0, 0]))
    h = out.heat
    assert all(h[i] > h[i + 1] for i in range(3)), h
    assert h[4] >= 0.0


def test_flow_is_undirected() -> None:
    # Reverse the edge direction and heat the other end: the mirror image.
    a = diffuse(5, PATH_SRC, PATH_DST, np.ones(4), np.array([100.0, 0, 0, 0, 0])).heat
    b = diffuse(5, PATH_DST, PATH_SRC, np.ones(4), np.array([0, 0, 0, 0, 100.0])).heat
    np.testing.assert_allclose(a, b[::-1])


def test_middle_is_hotter_with_two_hot_ends() -> None:
    one = diffuse(5, PATH_SRC, PATH_DST, np.ones(4), np.array([100.0, 0, 0, 0, 0])).heat
    two = diffuse(
        5, PATH_SRC, PATH_DST, np.ones(4), np.array([100.0, 0, 0, 0, 100.0])
    ).heat
    assert two[2] > one[2] > 0
    assert two[1] == pytest.approx(two[3])


def test_n_cooler_counts_cooler_neighbours_only() -> None:
    # Star: hot centre 0 with two cooler leaves and one hotter leaf. The centre's
    # outflow is split over its 2 cooler neighbours (not its degree 3), so after one
    # step each cooler leaf gets alpha * a * (H0 - 0) / 2.
    src, dst = np.array([0, 0, 0]), np.array([1, 2, 3])
    cfg = HeatConfig(max_steps=1, gamma=0.1)
    init = np.array([10.0, 0.0, 0.0, 50.0])
    out = diffuse(4, src, dst, np.ones(3), init, config=cfg)
    # Scaled conductance: bound / (2 * max weighted degree 3).
    a = cfg.safety * cfg.gamma / ((1 - cfg.gamma) * cfg.alpha) / 6.0
    leaf = (1 - cfg.gamma) * (cfg.alpha * a * 10.0 / 2)
    assert out.heat[1] == pytest.approx(leaf)
    assert out.heat[2] == pytest.approx(leaf)


def test_raw_counts_do_not_diverge_and_cap_at_50_steps() -> None:
    rng = np.random.default_rng(0)
    n = 200
    src = rng.integers(0, n, 2000)
    dst = rng.integers(0, n, 2000)
    cond = rng.integers(1, 10_000, 2000).astype(float)  # raw access counts
    init = rng.integers(0, 1_000_000, n).astype(float)
    out = diffuse(n, src, dst, cond, init)
    assert out.steps <= 50
    assert np.all(np.isfinite(out.heat))
    assert out.heat.min() >= 0.0
    assert out.heat.sum() <= init.sum() + 1e-6  # no source: heat only decays


def test_bad_inputs() -> None:
    with pytest.raises(GeoError, match="one length"):
        diffuse(3, np.array([0]), np.array([1, 2]), np.ones(1), np.zeros(3))
    with pytest.raises(GeoError, match="conductance"):
        diffuse(3, np.array([0]), np.array([1]), -np.ones(1), np.zeros(3))
