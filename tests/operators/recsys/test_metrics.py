"""Full-catalogue Recall@K / NDCG@K against hand-computed values and a brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from strata.operators.recsys.metrics import auc, topk_metrics
from strata.operators.recsys.split import items_by_user

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _csr(pairs: list[tuple[int, int]], num_users: int) -> tuple[np.ndarray, np.ndarray]:
    u = np.array([p[0] for p in pairs], dtype=np.int64)
    i = np.array([p[1] for p in pairs], dtype=np.int64)
    return items_by_user(u, i, num_users)


def test_hand_computed_case() -> None:
    # One user, 6 items scored 6..1 (item 0 best). Item 0 was seen (excluded),
    # so the ranking is 1, 2, 3, 4, 5. Relevant: items 2 and 5 (ranks 2 and 5).
    users = torch.tensor([[1.0]])
    items = torch.tensor([[6.0], [5.0], [4.0], [3.0], [2.0], [1.0]])
    seen = _csr([(0, 0)], 1)
    test = _csr([(0, 2), (0, 5)], 1)
    m = topk_metrics(users, items, np.array([0]), seen, test, ks=(1, 2, 5))
    assert m.recall == {1: 0.0, 2: 0.5, 5: 1.0}
    idcg2 = 1 + 1 / math.log2(3)
    assert m.ndcg[2] == pytest.approx((1 / math.log2(3)) / idcg2)
    assert m.ndcg[5] == pytest.approx((1 / math.log2(3) + 1 / math.log2(6)) / idcg2)
    # Ideal DCG over min(K, |test|) = 1 hit at K = 1.
    assert m.ndcg[1] == 0.0
    assert m.top_items[0].tolist() == [1, 2, 3, 4, 5]


def _brute_force(
    scores: np.ndarray,
    seen: set[tuple[int, int]],
    test: set[tuple[int, int]],
    users: np.ndarray,
    k: int,
) -> tuple[float, float]:
    recalls, ndcgs = [], []
    for u in users:
        candidates = [i for i in range(scores.shape[1]) if (u, i) not in seen]
        ranked = sorted(candidates, key=lambda i: (-scores[u, i], i))[:k]
        relevant = {i for (v, i) in test if v == u}
        hits = [1.0 if i in relevant else 0.0 for i in ranked]
        recalls.append(sum(hits) / len(relevant))
        dcg = sum(h / math.log2(r + 2) for r, h in enumerate(hits))
        idcg = sum(1 / math.log2(r + 2) for r in range(min(k, len(relevant))))
        ndcgs.append(dcg / idcg)
    return float(np.mean(recalls)), float(np.mean(ndcgs))


def test_matches_brute_force_on_random_data() -> None:
    rng = np.random.default_rng(7)
    num_users, num_items, d = 40, 60, 5
    user_vecs = rng.normal(size=(num_users, d)).astype(np.float32)
    item_vecs = rng.normal(size=(num_items, d)).astype(np.float32)
    pairs = {
        (int(u), int(i))
        for u, i in zip(
            rng.integers(0, num_users, 900),
            rng.integers(0, num_items, 900),
            strict=True,
        )
    }
    pairs_list = sorted(pairs)
    rng.shuffle(pairs_list)
    seen = set(pairs_list[: len(pairs_list) // 2])
    test = set(pairs_list[len(pairs_list) // 2 :])
    users = np.array(sorted({u for u, _ in test}), dtype=np.int64)
    m = topk_metrics(
        torch.from_numpy(user_vecs),
        torch.from_numpy(item_vecs),
        users,
        _csr(sorted(seen), num_users),
        _csr(sorted(test), num_users),
        ks=(5, 20),
        chunk=7,  # several chunks
    )
    scores = user_vecs @ item_vecs.T
    for k in (5, 20):
        recall, ndcg = _brute_force(scores, seen, test, users, k)
        assert m.recall[k] == pytest.approx(recall, abs=1e-9)
        assert m.ndcg[k] == pytest.approx(ndcg, abs=1e-9)


def test_auc_counts_ties_half_and_matches_pair_count() -> None:
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 2, 200)
    scores = rng.integers(0, 10, 200).astype(float)  # many ties
    pos, neg = scores[labels == 1], scores[labels == 0]
    pairs = (pos[:, None] > neg[None, :]).sum() + 0.5 * (
        pos[:, None] == neg[None, :]
    ).sum()
    assert auc(labels, scores) == pytest.approx(pairs / (pos.size * neg.size))
    assert math.isnan(auc(np.ones(3), np.arange(3.0)))
