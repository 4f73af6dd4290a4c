"""Full-catalogue top-K metrics (``e2egrec.md`` §5) and the long-view AUC.

Every evaluated user is ranked against **every** item; items the user met in
train or validation are excluded (pitfall 2). With the user's test items as the
relevant set:

* Recall@K = hits in the top K / the user's number of test items;
* NDCG@K = DCG@K / IDCG, binary relevance, ``DCG = sum 1 / log2(rank + 1)``
  (rank from 1), the ideal DCG over ``min(K, |test items|)`` hits.

Both are averaged over users. Scores are inner products of a user vector and an
item vector, so a chunk of users is one matrix product and ``torch.topk``; a
model whose score is a sum of inner products (``<t_u, t_i> + a <z_u, z_i>``)
passes concatenated vectors.

Examples:
    >>> import torch
    >>> users = torch.tensor([[1.0, 0.0]])
    >>> items = torch.tensor([[3.0, 0], [2.0, 0], [1.0, 0], [0.0, 0]])
    >>> seen = (np.array([0, 1]), np.array([0]))       # item 0 was seen
    >>> test = (np.array([0, 1]), np.array([2]))       # item 2 is relevant
    >>> m = topk_metrics(users, items, np.array([0]), seen, test, ks=(1, 2))
    >>> m.recall[1], m.recall[2], round(m.ndcg[2], 4)  # ranking: 1, 2, 3
    (0.0, 1.0, 0.6309)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import rankdata

from strata.operators.errors import check
from strata.storage._types import Int64Array

__all__ = ["TopKMetrics", "auc", "topk_metrics"]

UserCSR = tuple[Int64Array, Int64Array]
"""``(indptr, items)`` per user: the rows of a user-item CSR."""


@dataclass(frozen=True, slots=True)
class TopKMetrics:
    """Mean Recall@K and NDCG@K over the evaluated users, and their top lists.

    Attributes:
        recall: ``{K: mean Recall@K}``.
        ndcg: ``{K: mean NDCG@K}``.
        users: the evaluated users.
        top_items: int64 ``[len(users), max K]`` best items per user, best first;
            ``-1`` pads the rows of users with fewer than K unseen items.
        top_scores: float32 scores of ``top_items``.
    """

    recall: dict[int, float]
    ndcg: dict[int, float]
    users: Int64Array
    top_items: Int64Array
    top_scores: np.ndarray


def _rows_mask(
    csr: UserCSR, users: Int64Array, num_items: int, device: torch.device
) -> torch.Tensor:
    """A dense ``[len(users), num_items]`` bool mask of each user's CSR row."""
    indptr, items = csr
    starts, stops = indptr[users], indptr[users + 1]
    lengths = stops - starts
    row = np.repeat(np.arange(users.shape[0]), lengths)
    offsets = np.arange(int(lengths.sum())) - np.repeat(
        np.cumsum(lengths) - lengths, lengths
    )
    cols = items[np.repeat(starts, lengths) + offsets]
    mask = torch.zeros((users.shape[0], num_items), dtype=torch.bool, device=device)
    mask[torch.from_numpy(row).to(device), torch.from_numpy(cols).to(device)] = True
    return mask


def topk_metrics(
    user_vecs: torch.Tensor,
    item_vecs: torch.Tensor,
    users: Int64Array,
    seen: UserCSR,
    test: UserCSR,
    ks: Sequence[int] = (20, 50),
    chunk: int = 1024,
) -> TopKMetrics:
    """Full-catalogue Recall@K and NDCG@K of ``score = <user_vecs[u], item_vecs[i]>``.

    Args:
        user_vecs: ``[num_users, d]`` user vectors (all users; ``users`` selects).
        item_vecs: ``[num_items, d]`` item vectors.
        users: the users to evaluate; each must have >= 1 test item.
        seen: per-user CSR of excluded items (train and validation).
        test: per-user CSR of relevant items (test).
        ks: cut-offs.
        chunk: users scored per matrix product.

    Returns:
        The mean metrics and the top ``max(ks)`` items per user.

    Raises:
        OperatorError: when a user has no test item, or K exceeds the catalogue.
    """
    num_items = int(item_vecs.shape[0])
    k_max = max(ks)
    check(k_max <= num_items, "K", "topk_metrics", f"<= {num_items} items", k_max)
    test_counts = test[0][users + 1] - test[0][users]
    check(
        bool((test_counts > 0).all()),
        "users",
        "topk_metrics",
        "users with >= 1 test item",
        f"{int((test_counts == 0).sum())} users without one",
    )
    device = item_vecs.device
    discounts = 1.0 / torch.log2(torch.arange(2, k_max + 2, dtype=torch.float64))
    ideal = torch.cumsum(discounts, 0)
    recall_sum = dict.fromkeys(ks, 0.0)
    ndcg_sum = dict.fromkeys(ks, 0.0)
    tops: list[np.ndarray] = []
    top_scores: list[np.ndarray] = []
    with torch.no_grad():
        for start in range(0, users.shape[0], chunk):
            batch = users[start : start + chunk]
            scores = user_vecs[torch.from_numpy(batch).to(device)] @ item_vecs.T
            scores = scores.float().masked_fill(
                _rows_mask(seen, batch, num_items, device), float("-inf")
            )
            values, top = torch.topk(scores, k_max, dim=1)
            relevant = _rows_mask(test, batch, num_items, device)
            hits = relevant.gather(1, top).cpu().double()
            n_test = torch.from_numpy(test_counts[start : start + chunk]).double()
            for k in ks:
                recall_sum[k] += float((hits[:, :k].sum(1) / n_test).sum())
                dcg = (hits[:, :k] * discounts[:k]).sum(1)
                idcg = ideal[(torch.clamp(n_test, max=k) - 1).long()]
                ndcg_sum[k] += float((dcg / idcg).sum())
            # A user with fewer than K unseen items: the rest are -1 (no item).
            top = top.masked_fill(torch.isneginf(values), -1)
            tops.append(top.cpu().numpy().astype(np.int64))
            top_scores.append(values.cpu().numpy())
    n = max(int(users.shape[0]), 1)
    return TopKMetrics(
        recall={k: recall_sum[k] / n for k in ks},
        ndcg={k: ndcg_sum[k] / n for k in ks},
        users=users,
        top_items=np.concatenate(tops) if tops else np.zeros((0, k_max), np.int64),
        top_scores=np.concatenate(top_scores) if top_scores else np.zeros((0, k_max)),
    )


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """ROC AUC by the rank-sum (Mann-Whitney U) formula, ties counted half.

    Returns ``nan`` when only one class is present.

    Examples:
        >>> auc(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8]))
        0.75
    """
    labels = np.asarray(labels) > 0.5
    n_pos = int(labels.sum())
    n_neg = int(labels.shape[0] - n_pos)
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(np.asarray(scores, dtype=np.float64))
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
