"""A keyed, stateless random number generator for reproducible sampling.

Every random draw is a pure function of its coordinates: ``hash3(key, a, b)`` mixes
three 64-bit words with the SplitMix64 finaliser. A sampler derives one *batch key*
from ``(seed, epoch, rank, batch_index)`` and draws number ``t`` for vertex ``v`` in
layer ``l`` as ``hash3(key, l * num_nodes + v, t)``. No generator state is carried,
so a batch of any epoch can be regenerated alone, and the result does not depend on
call order, threads or ``prange`` (RapidGNN-style deterministic schedules, see
``systems/rapidgnn.md`` §3.2).

The mixing functions are numba-compiled, for use inside sampling kernels; arithmetic
is on ``uint64`` and wraps modulo 2**64. numba returns ``uint64`` results to Python as
``int``: wrap them in ``np.uint64`` before passing them back in.

References:
    Guy L. Steele Jr., Doug Lea, Christine H. Flood. *Fast splittable pseudorandom
    number generators*. OOPSLA 2014 (SplitMix64).
    Daniel Lemire. *Fast random integer generation in an interval*. ACM TOMACS 2019.

Examples:
    >>> key = batch_key(seed=0, epoch=1, batch_index=2)
    >>> bool(key == batch_key(0, 1, 2))
    True
    >>> draw = np.uint64(hash3(key, 5, 0))
    >>> bool(0 <= bounded(draw, 10) < 10)
    True
"""

from __future__ import annotations

import numba
import numpy as np

from strata.storage.generators.hashing import GOLDEN as _GAMMA
from strata.storage.generators.hashing import MIX1 as _MUL1
from strata.storage.generators.hashing import MIX2 as _MUL2
from strata.storage.generators.hashing import mix64

__all__ = ["batch_key", "bounded", "hash3", "mix64"]

_S32 = np.uint64(32)


@numba.njit(cache=True, nogil=True)
def hash3(key: int | np.uint64, a: int | np.integer, b: int | np.integer) -> np.uint64:
    """Mix a key and two coordinates into one uniformly distributed 64-bit word.

    Each input passes through the finaliser before it is combined, so nearby
    coordinates (``v`` and ``v + 1``, draw ``t`` and ``t + 1``) give unrelated words.
    """
    h = mix64(np.uint64(key) + _GAMMA)
    h = mix64(h ^ (np.uint64(a) * _GAMMA + _MUL1))
    return mix64(h ^ (np.uint64(b) * _MUL2 + _GAMMA))


@numba.njit(cache=True, nogil=True)
def bounded(h: int | np.uint64, m: int | np.integer) -> np.int64:
    """Map a random word to ``[0, m)`` for ``0 < m < 2**32`` (Lemire's multiply-shift).

    Uses the high 32 bits, so the bias is below ``m / 2**32``.
    """
    return np.int64(((np.uint64(h) >> _S32) * np.uint64(m)) >> _S32)


@numba.njit(cache=True, nogil=True)
def _batch_key(seed: int, epoch: int, batch_index: int, rank: int) -> np.uint64:
    return hash3(
        hash3(np.uint64(seed), np.uint64(epoch), np.uint64(rank)),
        np.uint64(batch_index),
        np.uint64(0),
    )


def batch_key(seed: int, epoch: int, batch_index: int, rank: int = 0) -> np.uint64:
    """The key of one mini-batch: ``h(h(seed, epoch, rank), batch_index, 0)``.

    Args:
        seed: the run's seed (any integer in ``[0, 2**63)``).
        epoch: epoch number.
        batch_index: position of the batch in its epoch.
        rank: worker rank, for data-parallel gangs (0 on one worker).

    Returns:
        The uint64 key all draws of that batch are derived from (a numpy scalar,
        so it passes to numba functions as ``uint64``).
    """
    return np.uint64(_batch_key(seed, epoch, batch_index, rank))
