"""Counter-based random numbers for parallel numba kernels (storage and partition).

``numba``'s ``np.random`` keeps one state per thread, so a ``prange`` loop that draws
from it gives results that depend on how iterations are scheduled. Hashing a counter
instead (SplitMix64's finaliser) makes draw ``i`` a pure function of ``(seed, i)``:
the same seed gives the same graph on any number of threads.

References:
    Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
    OOPSLA 2014 (SplitMix64).
"""

from __future__ import annotations

import numba
import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)


#: SplitMix64's constants: the golden-ratio increment and the finaliser's multipliers.
GOLDEN, MIX1, MIX2 = _GOLDEN, _MIX1, _MIX2


@numba.njit(inline="always", cache=True, nogil=True)
def mix64(z: np.uint64) -> np.uint64:  # pragma: no cover - numba
    """SplitMix64's finaliser: a bijective avalanche of one uint64 word."""
    z = np.uint64(z)
    z = (z ^ (z >> _S30)) * _MIX1
    z = (z ^ (z >> _S27)) * _MIX2
    return z ^ (z >> _S31)


@numba.njit(inline="always", cache=True, nogil=True)
def splitmix64(counter: np.uint64) -> np.uint64:  # pragma: no cover - numba
    """Return the SplitMix64 hash of ``counter`` (a well-mixed uint64)."""
    return mix64(counter + _GOLDEN)


def seed_key(seed: int) -> np.uint64:
    """Turn a user seed into a uint64 stream key (distinct seeds, distinct streams)."""
    rng = np.random.default_rng(seed)
    return np.uint64(rng.integers(0, 2**63, dtype=np.int64))
