"""The synthetic generator of e2egrec.md §4.1: determinism and shape of the data."""

from __future__ import annotations

import numpy as np
import pytest

from strata.operators.recsys.synth import SynthConfig, synth_interactions

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SMALL = SynthConfig(num_users=300, num_items=150)


def test_same_seed_same_data_other_seed_other_data() -> None:
    a, b = synth_interactions(SMALL, 3), synth_interactions(SMALL, 3)
    c = synth_interactions(SMALL, 4)
    for name in ("user", "item", "timestamp", "label", "item_domain"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    np.testing.assert_array_equal(a.user_features, b.user_features)
    assert a.num_interactions != c.num_interactions or not np.array_equal(
        a.item, c.item
    )


def test_draws_are_distinct_per_user_capped_and_heavy_tailed() -> None:
    cfg = SynthConfig(num_users=2000, num_items=1000, max_per_user=60)
    inter = synth_interactions(cfg, 0)
    pairs = inter.user * inter.num_items + inter.item
    assert np.unique(pairs).shape[0] == pairs.shape[0]  # Gumbel top-k: no repeats
    per_user = np.bincount(inter.user, minlength=inter.num_users)
    assert per_user.min() >= 1
    assert per_user.max() <= 60
    assert 12 < per_user.mean() < 18  # about 15 per user
    assert np.median(per_user) < per_user.mean()  # right-skewed
    assert set(np.unique(inter.label).tolist()) == {0.0, 1.0}
    assert inter.user_features is not None
    assert inter.user_features.shape == (2000, 16)


def test_draws_follow_latent_affinity() -> None:
    # Users should pick items of their own community far more than chance (1/32).
    inter = synth_interactions(SMALL, 0)
    assert inter.user_features is not None
    assert inter.item_features is not None
    # Feature similarity of engaged pairs beats random pairs (weak but present).
    rng = np.random.default_rng(0)
    engaged = np.einsum(
        "ij,ij->i", inter.user_features[inter.user], inter.item_features[inter.item]
    ).mean()
    random_items = rng.integers(0, inter.num_items, inter.num_interactions)
    chance = np.einsum(
        "ij,ij->i", inter.user_features[inter.user], inter.item_features[random_items]
    ).mean()
    assert engaged > chance
