"""A small deterministic random stream for sequential numba kernels.

State is a one-element ``uint64`` array advanced by SplitMix64, so kernels draw from an
explicit stream (never numba's global ``np.random``, which other packages' kernels
share): the same seed gives the same partition whatever else ran before. The mixing
function is storage's counter hash (``strata.storage.generators.hashing.splitmix64``):
draw i of a stream is the hash of its i-th counter value.

References:
    Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
    OOPSLA 2014 (SplitMix64).
"""

from __future__ import annotations

import numpy as np

from strata.partition._jit import njit
from strata.partition._types import Int64Array
from strata.storage.generators.hashing import splitmix64

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_S11 = np.uint64(11)


def new_state(seed: int, stream: int = 0) -> np.ndarray:
    """A fresh state for ``(seed, stream)``; distinct streams do not overlap."""
    mixed = np.random.SeedSequence([seed & 0xFFFFFFFF, stream]).generate_state(
        1, dtype=np.uint64
    )
    return np.array([mixed[0]], dtype=np.uint64)


@njit(inline="always", cache=True)
def next_u64(state: np.ndarray) -> np.uint64:
    """Advance ``state`` and return 64 random bits (SplitMix64's next())."""
    z = splitmix64(state[0])  # mixes state + golden, the value next() stores
    state[0] += _GOLDEN
    return np.uint64(z)


@njit(inline="always", cache=True)
def rand_below(state: np.ndarray, bound: int) -> int:
    """Uniform integer in ``[0, bound)`` (``bound >= 1``)."""
    return int(next_u64(state) % np.uint64(bound))


@njit(inline="always", cache=True)
def rand_unit(state: np.ndarray) -> float:
    """Uniform float in ``[0, 1)``."""
    return float(next_u64(state) >> _S11) * (1.0 / 9007199254740992.0)


@njit(cache=True)
def shuffle(state: np.ndarray, values: np.ndarray) -> None:
    """Fisher-Yates shuffle of ``values`` in place."""
    for i in range(values.shape[0] - 1, 0, -1):
        j = rand_below(state, i + 1)
        tmp = values[i]
        values[i] = values[j]
        values[j] = tmp


@njit(cache=True)
def permutation(state: np.ndarray, n: int) -> Int64Array:
    """A random permutation of ``0..n-1``."""
    perm = np.arange(n, dtype=np.int64)
    shuffle(state, perm)
    return perm


@njit(cache=True)
def partial_permutation(state: np.ndarray, n: int) -> Int64Array:
    """METIS's cheap shuffle: ``n / 8`` random swaps of 4-element blocks.

    About a third of the positions keep their input order, so locality in the
    input numbering survives (and costs less than a full Fisher-Yates).
    """
    perm = np.arange(n, dtype=np.int64)
    if n < 10:
        for _ in range(n):
            a = rand_below(state, n)
            b = rand_below(state, n)
            tmp = perm[a]
            perm[a] = perm[b]
            perm[b] = tmp
        return perm
    for _ in range(n // 8):
        a = rand_below(state, n - 3)
        b = rand_below(state, n - 3)
        for off in range(4):
            x = a + off
            y = b + (off + 2) % 4
            tmp = perm[x]
            perm[x] = perm[y]
            perm[y] = tmp
    return perm
