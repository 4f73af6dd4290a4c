"""Synthetic key-value batches: Zipf(alpha) keys over N keys, tasks on every rank.

>>> keys = zipf_keys(10_000, n_keys=1000, alpha=1.5, seed=0)
>>> int(np.bincount(keys).argmax()), bool(keys.max() < 1000)
(0, True)
"""

from __future__ import annotations

import numpy as np

from strata.operators.orchestration.plan import FloatArray, IntArray


def zipf_keys(n_tasks: int, *, n_keys: int, alpha: float, seed: int) -> IntArray:
    """``n_tasks`` keys with ``P(key = r) ~ (r + 1) ** -alpha`` over ``0..n_keys-1``.

    ``alpha = 0`` is uniform. Seeded and vectorised (inverse CDF).
    """
    weights = np.arange(1, n_keys + 1, dtype=np.float64) ** -alpha
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    u = np.random.default_rng(seed).random(n_tasks)
    return np.minimum(np.searchsorted(cdf, u, side="right"), n_keys - 1).astype(
        np.int64
    )


def rank_share(n_tasks: int, rank: int, size: int) -> slice:
    """The contiguous share of a global task list that ``rank`` originates.

    >>> rank_share(10, 1, 3)
    slice(3, 6, None)
    """
    return slice(rank * n_tasks // size, (rank + 1) * n_tasks // size)


def payloads(n_tasks: int, width: int, *, seed: int) -> FloatArray:
    """Small integer-valued payloads (sums stay exact in any order)."""
    rng = np.random.default_rng(seed + 1)
    return rng.integers(-4, 5, size=(n_tasks, width)).astype(np.float64)
