"""Ranking metrics of link prediction: AUC, MRR and Hits@K.

* :func:`roc_auc`: the area under the ROC curve by the rank formula
  (Mann-Whitney U): with midranks ``r`` of all scores pooled,
  ``AUC = (sum of the positives' ranks - P (P + 1) / 2) / (P N)``. This is the
  probability that a random positive outscores a random negative, ties counting
  one half, in ``O((P + N) log(P + N))`` instead of the ``O(P N)`` pair count.
* :func:`ranks`: each positive's rank among its own candidate negatives, as
  OGB's evaluator computes it (the mean of the optimistic and pessimistic ranks,
  so ties count one half); :func:`mrr` and :func:`hits_at` average over it.

Examples:
    >>> import torch
    >>> pos, neg = torch.tensor([0.9, 0.4]), torch.tensor([0.5, 0.1, 0.4])
    >>> round(roc_auc(pos, neg), 4)  # pairs won: 3 + 1.5 of 6
    0.75
    >>> r = ranks(pos, torch.tensor([[0.1, 0.2], [0.5, 0.6]]))
    >>> r.tolist(), mrr(r), hits_at(r, 1)
    ([1.0, 3.0], 0.6666666666666666, 0.5)

References:
    Weihua Hu et al. *Open Graph Benchmark: Datasets for Machine Learning on
    Graphs*. NeurIPS 2020, arXiv:2005.00687 (MRR and Hits@K).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

import numpy as np
import torch

__all__ = ["SplitMetrics", "hits_at", "mrr", "ranks", "roc_auc"]


class SplitMetrics(NamedTuple):
    """Loss and score on one split (NaN when the split has no example).

    ``accuracy`` is the task's headline score: accuracy for node classification,
    R² for node regression, ROC AUC for link prediction. ``scores`` holds the
    task's named metrics (``auc``, ``mrr``, ``hits@20``; ``mse``, ``mae``, ``r2``),
    which a run's result reports as ``val_<name>`` and ``test_<name>``.
    """

    loss: float
    accuracy: float
    scores: Mapping[str, float] = MappingProxyType({})


def roc_auc(pos: torch.Tensor, neg: torch.Tensor) -> float:
    """Area under the ROC curve of positive scores ``pos`` against ``neg``.

    Returns:
        NaN when either side is empty.
    """
    p, n = pos.numel(), neg.numel()
    if p == 0 or n == 0:
        return math.nan
    scores = torch.cat([pos.flatten(), neg.flatten()]).double().cpu().numpy()
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)  # 1-based rank of each distinct value's last copy
    midranks = ends - (counts - 1) / 2.0
    rank_sum = float(midranks[inverse[:p]].sum())
    return (rank_sum - p * (p + 1) / 2.0) / (p * n)


def ranks(pos: torch.Tensor, neg: torch.Tensor) -> torch.Tensor:
    """1-based rank of each positive among its negatives (ties: half).

    Shapes:
        pos: ``[m]``; neg: ``[m, k]`` (row ``i`` are positive ``i``'s candidates);
        returns ``[m]`` float64.
    """
    pos = pos.reshape(-1, 1)
    optimistic = (neg > pos).sum(dim=1)
    pessimistic = (neg >= pos).sum(dim=1)
    return 0.5 * (optimistic + pessimistic).double() + 1.0


def mrr(rank: torch.Tensor) -> float:
    """Mean reciprocal rank (NaN for no positive)."""
    return (1.0 / rank).mean().item() if rank.numel() else math.nan


def hits_at(rank: torch.Tensor, k: int) -> float:
    """Fraction of positives ranked within the top ``k`` (NaN for no positive)."""
    return (rank <= k).double().mean().item() if rank.numel() else math.nan
