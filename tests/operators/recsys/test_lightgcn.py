"""LightGCN propagation against a dense-matrix reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from strata.operators.recsys.lightgcn import (
    LightGCN,
    LightGCNConfig,
    normalised_adjacency,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_propagation_matches_dense_reference() -> None:
    rng = np.random.default_rng(0)
    num_users, num_items = 7, 5
    user = rng.integers(0, num_users, 20)
    item = rng.integers(0, num_items, 20)  # repeats count once
    cfg = LightGCNConfig(dim=4, layers=3)
    torch.manual_seed(0)
    model = LightGCN(num_users, num_items, cfg)
    adjacency = normalised_adjacency(user, item, num_users, num_items)
    users_e, items_e = model(adjacency)

    n = num_users + num_items
    a = np.zeros((n, n))
    a[user, item + num_users] = 1.0
    a[item + num_users, user] = 1.0
    deg = a.sum(1)
    inv = np.where(deg > 0, deg**-0.5, 0.0)
    a_hat = inv[:, None] * a * inv[None, :]
    e = model.embedding.weight.detach().double().numpy()
    layers = [e]
    for _ in range(3):
        layers.append(a_hat @ layers[-1])
    final = np.mean(layers, axis=0)
    np.testing.assert_allclose(users_e.detach().numpy(), final[:num_users], atol=1e-5)
    np.testing.assert_allclose(items_e.detach().numpy(), final[num_users:], atol=1e-5)
