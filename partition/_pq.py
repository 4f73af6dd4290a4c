"""An indexed binary max-heap over vertex ids, for FM and greedy refinement.

The heap lives in plain arrays so numba kernels can own it without a jitclass:
``heap`` (vertex per slot), ``keys`` (key per slot), ``pos`` (slot per vertex, -1 when
absent) and ``size`` (a one-element array). Ties go to the vertex inserted or
updated earlier (strict comparisons), so results are deterministic.
"""

from __future__ import annotations

import numpy as np

from strata.partition._jit import njit


@njit(cache=True)
def pq_new(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Empty heap for vertex ids ``0..n-1``: ``(heap, keys, pos, size)``."""
    return (
        np.empty(n, dtype=np.int32),
        np.empty(n, dtype=np.float64),
        np.full(n, -1, dtype=np.int32),
        np.zeros(1, dtype=np.int64),
    )


@njit(inline="always", cache=True)
def _sift_up(heap: np.ndarray, keys: np.ndarray, pos: np.ndarray, i: int) -> None:
    v = heap[i]
    key = keys[i]
    while i > 0:
        parent = (i - 1) >> 1
        if keys[parent] < key:
            heap[i] = heap[parent]
            keys[i] = keys[parent]
            pos[heap[i]] = i
            i = parent
        else:
            break
    heap[i] = v
    keys[i] = key
    pos[v] = i


@njit(inline="always", cache=True)
def _sift_down(
    heap: np.ndarray, keys: np.ndarray, pos: np.ndarray, i: int, size: int
) -> None:
    v = heap[i]
    key = keys[i]
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and keys[child + 1] > keys[child]:
            child += 1
        if keys[child] > key:
            heap[i] = heap[child]
            keys[i] = keys[child]
            pos[heap[i]] = i
            i = child
        else:
            break
    heap[i] = v
    keys[i] = key
    pos[v] = i


@njit(cache=True)
def pq_insert(
    heap: np.ndarray,
    keys: np.ndarray,
    pos: np.ndarray,
    size: np.ndarray,
    v: int,
    key: float,
) -> None:
    """Insert vertex ``v`` (absent) with ``key``."""
    i = size[0]
    size[0] += 1
    heap[i] = v
    keys[i] = key
    pos[v] = i
    _sift_up(heap, keys, pos, i)


@njit(cache=True)
def pq_pop(
    heap: np.ndarray, keys: np.ndarray, pos: np.ndarray, size: np.ndarray
) -> int:
    """Remove and return the vertex with the largest key (-1 when empty)."""
    if size[0] == 0:
        return -1
    top = heap[0]
    pos[top] = -1
    size[0] -= 1
    last = size[0]
    if last > 0:
        heap[0] = heap[last]
        keys[0] = keys[last]
        pos[heap[0]] = 0
        _sift_down(heap, keys, pos, 0, last)
    return int(top)


@njit(cache=True)
def pq_delete(
    heap: np.ndarray, keys: np.ndarray, pos: np.ndarray, size: np.ndarray, v: int
) -> None:
    """Remove vertex ``v`` (present)."""
    i = pos[v]
    pos[v] = -1
    size[0] -= 1
    last = size[0]
    if i == last:
        return
    heap[i] = heap[last]
    old = keys[i]
    keys[i] = keys[last]
    pos[heap[i]] = i
    if keys[i] > old:
        _sift_up(heap, keys, pos, i)
    else:
        _sift_down(heap, keys, pos, i, last)


@njit(cache=True)
def pq_update(
    heap: np.ndarray,
    keys: np.ndarray,
    pos: np.ndarray,
    size: np.ndarray,
    v: int,
    key: float,
) -> None:
    """Change the key of vertex ``v`` (present)."""
    i = pos[v]
    old = keys[i]
    keys[i] = key
    if key > old:
        _sift_up(heap, keys, pos, i)
    elif key < old:
        _sift_down(heap, keys, pos, i, size[0])


@njit(cache=True)
def pq_clear(heap: np.ndarray, pos: np.ndarray, size: np.ndarray) -> None:
    """Empty the heap, resetting the positions of the vertices still in it."""
    for i in range(size[0]):
        pos[heap[i]] = -1
    size[0] = 0
