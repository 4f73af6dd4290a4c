"""Numba kernels of the graph algorithms, on plain CSR arrays.

Two kinds of kernel live here:

* **Per-superstep pieces** that the distributed runner
  (:mod:`strata.operators.algorithms.distributed`) calls on each rank's partition,
  so one process and P ranks apply the same update maths (tdorch.md §5):

  - :func:`gather_sum` (pull): ``out[v] = sum(values[u] for u in row v)``, parallel
    over rows, no atomics; over an in-CSR (CSC) it is PageRank's per-destination sum.
  - :func:`scatter_sum` (push): ``out[indices[e]] += values[r]`` for every edge ``e``
    of the rows ``rows``; per-destination sums of a rank's local out-edges.
  - :func:`relax_min` (BFS, SSSP, CC): for every edge ``u -> v`` of the rows
    ``rows`` fold ``row_values[i] + w`` (``w`` the edge weight, or ``step`` when there
    are no weights) into ``best[v]`` with ``min``; returns the targets whose value
    fell (the next frontier). BFS: ``step=1``; CC: ``step=0``; SSSP: weights.
  - :func:`pagerank_update`: ``r' = (1-d)/N + d*(sums + dangling/N)`` and its L1
    change, in fixed blocks so the float sums do not depend on the thread count.

* **Whole single-process runs**, the fastest loop found for each algorithm
  (measured in ``benchmarks/operators/algorithms``): pull PageRank
  (:func:`pagerank_run`), a queue BFS (:func:`bfs_run`), Dijkstra with a binary heap
  (:func:`dijkstra_run`) and union-find components (:func:`components_run`).

Every kernel is ``nogil`` and cached; inputs are int64 ``indptr``, int32 or int64
``indices`` and float64 weights or values. Kernels do not validate: the callers in
this package do. The whole-run kernels are called with *unsigned* views of
``indptr`` and ``indices`` (:func:`strata.operators.algorithms._graph.unsigned`):
numba then drops the negative-index wraparound test from every access in the edge
loops (1.2-1.5x faster BFS and PageRank gathers; callers of the superstep kernels
may do the same).

Examples:
    >>> import numpy as np
    >>> indptr, indices = np.array([0, 2, 3, 3]), np.array([1, 2, 2], np.int32)
    >>> gather_sum(indptr, indices, np.array([1.0, 10.0, 100.0])).tolist()
    [110.0, 100.0, 0.0]
    >>> out = np.zeros(3)
    >>> scatter_sum(indptr, indices, np.array([0, 1]), np.array([1.0, 5.0]), out)
    >>> out.tolist()
    [0.0, 1.0, 6.0]
    >>> best = np.array([0, 9, 9])
    >>> relax_min(indptr, indices, np.empty(0), np.array([0]), np.array([0]), 1,
    ...           best).tolist(), best.tolist()
    ([1, 2], [0, 1, 1])
"""

from __future__ import annotations

import numba
import numpy as np

#: Fixed block count of the deterministic parallel reductions (see pagerank_update).
_BLOCKS = 256


@numba.njit(parallel=True, nogil=True, cache=True)
def gather_sum(
    indptr: np.ndarray, indices: np.ndarray, values: np.ndarray
) -> np.ndarray:  # pragma: no cover - numba
    """Pull sums: ``out[r] = sum(values[indices[e]] for e in row r)`` (float64)."""
    n = indptr.shape[0] - 1
    out = np.empty(n, dtype=np.float64)
    for r in numba.prange(n):
        acc = 0.0
        for e in range(indptr[r], indptr[r + 1]):
            acc += values[indices[e]]
        out[r] = acc
    return out


@numba.njit(nogil=True, cache=True)
def scatter_sum(
    indptr: np.ndarray,
    indices: np.ndarray,
    rows: np.ndarray,
    row_values: np.ndarray,
    out: np.ndarray,
) -> None:  # pragma: no cover - numba
    """Push sums, in place: ``out[indices[e]] += row_values[i]`` for row ``rows[i]``.

    Serial, in row then edge order, so the float sums are reproducible.
    """
    for i in range(rows.shape[0]):
        r = rows[i]
        value = row_values[i]
        for e in range(indptr[r], indptr[r + 1]):
            out[indices[e]] += value


@numba.njit(nogil=True, cache=True)
def relax_min(
    indptr: np.ndarray,
    indices: np.ndarray,
    weights: np.ndarray,
    rows: np.ndarray,
    row_values: np.ndarray,
    step: int,
    best: np.ndarray,
) -> np.ndarray:  # pragma: no cover - numba
    """Fold ``row_values[i] + w(e)`` into ``best[v]`` by min over the rows' edges.

    Args:
        indptr: CSR row pointers.
        indices: CSR targets.
        weights: one weight per edge, or an empty array for ``w(e) = step``.
        rows: the frontier's rows (local row ids).
        row_values: the frontier's values (distances, labels), aligned with ``rows``.
        step: the constant edge weight when ``weights`` is empty (BFS 1, CC 0).
        best: the target values, lowered in place.

    Returns:
        The targets whose value fell, each once, in first-lowered order (int64).
    """
    weighted = weights.shape[0] > 0
    touched = np.zeros(best.shape[0], dtype=np.bool_)
    out = np.empty(min(best.shape[0], indices.shape[0]) + 1, dtype=np.int64)
    count = 0
    for i in range(rows.shape[0]):
        r = rows[i]
        base = row_values[i]
        for e in range(indptr[r], indptr[r + 1]):
            v = indices[e]
            cand = base + weights[e] if weighted else base + step
            if cand < best[v]:
                best[v] = cand
                if not touched[v]:
                    touched[v] = True
                    out[count] = v
                    count += 1
    return out[:count]


@numba.njit(parallel=True, nogil=True, cache=True)
def pagerank_update(
    sums: np.ndarray,
    rank: np.ndarray,
    dangling_mass: float,
    damping: float,
    num_nodes: int,
    out: np.ndarray,
) -> float:  # pragma: no cover - numba
    """One PageRank update: ``out = (1-d)/N + d*(sums + dangling_mass/N)``.

    Args:
        sums: per-vertex ``sum(r_u / outdeg(u))`` over in-edges.
        rank: the previous ranks (for the L1 change).
        dangling_mass: ``sum(r_u)`` over vertices without out-edges.
        damping: ``d``.
        num_nodes: ``N`` (all ranks' vertices together).
        out: the new ranks, written in place (may not alias ``rank``).

    Returns:
        ``sum(|out - rank|)``, summed in fixed blocks.
    """
    n = sums.shape[0]
    base = (1.0 - damping) / num_nodes + damping * dangling_mass / num_nodes
    partial = np.zeros(_BLOCKS, dtype=np.float64)
    size = (n + _BLOCKS - 1) // _BLOCKS
    for b in numba.prange(_BLOCKS):
        acc = 0.0
        for v in range(b * size, min(n, (b + 1) * size)):
            new = base + damping * sums[v]
            out[v] = new
            acc += abs(new - rank[v])
        partial[b] = acc
    total = 0.0
    for b in range(_BLOCKS):
        total += partial[b]
    return total


@numba.njit(parallel=True, nogil=True, cache=True)
def _pull_update(
    in_indptr: np.ndarray,
    in_indices: np.ndarray,
    contrib: np.ndarray,
    rank: np.ndarray,
    inv_outdeg: np.ndarray,
    base: float,
    damping: float,
    out: np.ndarray,
    out_contrib: np.ndarray,
) -> tuple[float, float]:  # pragma: no cover - numba
    """One fused PageRank iteration (one parallel region).

    ``out[v] = base + d*sum(contrib[in(v)])``, and the next iteration's
    ``out_contrib[v] = out[v] / outdeg(v)`` while ``out[v]`` is in a register.

    Returns:
        ``(L1 change, dangling mass of out)``, each summed in fixed blocks.
    """
    n = rank.shape[0]
    l1 = np.zeros(_BLOCKS, dtype=np.float64)
    dangling = np.zeros(_BLOCKS, dtype=np.float64)
    size = (n + _BLOCKS - 1) // _BLOCKS
    for b in numba.prange(_BLOCKS):
        acc = 0.0
        lost = 0.0
        for v in range(b * size, min(n, (b + 1) * size)):
            s = 0.0
            for e in range(in_indptr[v], in_indptr[v + 1]):
                s += contrib[in_indices[e]]
            new = base + damping * s
            out[v] = new
            w = inv_outdeg[v]
            out_contrib[v] = new * w
            if w == 0.0:
                lost += new
            acc += abs(new - rank[v])
        l1[b] = acc
        dangling[b] = lost
    change = 0.0
    mass = 0.0
    for b in range(_BLOCKS):
        change += l1[b]
        mass += dangling[b]
    return change, mass


@numba.njit(nogil=True, cache=True)
def pagerank_run(
    in_indptr: np.ndarray,
    in_indices: np.ndarray,
    inv_outdeg: np.ndarray,
    damping: float,
    max_iterations: int,
    l1_stop: float,
) -> tuple[np.ndarray, int, float]:  # pragma: no cover - numba
    """Pull PageRank from the uniform start ``1/N``.

    Call it with ``numba.set_parallel_chunksize(1)`` in effect (as
    :func:`strata.operators.algorithms.pagerank` does): blocks are then handed out
    one at a time, so on a shared machine a descheduled thread's blocks go to the
    other thread instead of holding up the iteration. (Setting it inside the
    kernel would stop numba caching it.)

    Stops after ``max_iterations``, or once the L1 change falls below ``l1_stop``
    (pass ``-1.0`` for fixed iterations).

    Returns:
        ``(rank, iterations, last L1 change)``.
    """
    n = inv_outdeg.shape[0]
    rank = np.full(n, 1.0 / n)
    new = np.empty(n, dtype=np.float64)
    contrib = rank * inv_outdeg
    next_contrib = np.empty(n, dtype=np.float64)
    mass = 0.0
    for u in range(n):
        if inv_outdeg[u] == 0.0:
            mass += rank[u]
    change = 0.0
    done = 0
    for _ in range(max_iterations):
        base = (1.0 - damping) / n + damping * mass / n
        change, mass = _pull_update(
            in_indptr,
            in_indices,
            contrib,
            rank,
            inv_outdeg,
            base,
            damping,
            new,
            next_contrib,
        )
        rank, new = new, rank
        contrib, next_contrib = next_contrib, contrib
        done += 1
        if change < l1_stop:
            break
    return rank, done, change


@numba.njit(nogil=True, cache=True)
def bfs_run(
    indptr: np.ndarray, indices: np.ndarray, source: int
) -> tuple[np.ndarray, int]:  # pragma: no cover - numba
    """Queue BFS: hop distances (int64, ``-1`` unreachable) and the level count.

    The traversal marks a one-byte ``seen`` array (an eighth of int64 distances,
    so the random accesses stay in cache) and records where each level ends in
    the queue; distances are written afterwards, level by level.
    """
    n = indptr.shape[0] - 1
    seen = np.zeros(n, dtype=np.uint8)
    queue = np.empty(n, dtype=indices.dtype)
    ends = np.empty(n + 1, dtype=np.int64)
    seen[source] = 1
    queue[0] = source
    head, tail, level_end, levels = 0, 1, 1, 0
    while head < tail:
        if head == level_end:
            ends[levels] = level_end
            levels += 1
            level_end = tail
        u = queue[head]
        head += 1
        for e in range(indptr[u], indptr[u + 1]):
            v = indices[e]
            if seen[v] == 0:
                seen[v] = 1
                queue[tail] = v
                tail += 1
    ends[levels] = tail
    levels += 1
    dist = np.full(n, -1, dtype=np.int64)
    begin = 0
    for level in range(levels):
        for i in range(begin, ends[level]):
            dist[queue[i]] = level
        begin = ends[level]
    return dist, levels


@numba.njit(nogil=True, cache=True)
def _sift_down(
    keys: np.ndarray, vals: np.ndarray, size: int
) -> None:  # pragma: no cover - numba
    i = 0
    key, val = keys[0], vals[0]
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and keys[child + 1] < keys[child]:
            child += 1
        if keys[child] >= key:
            break
        keys[i], vals[i] = keys[child], vals[child]
        i = child
    keys[i], vals[i] = key, val


@numba.njit(nogil=True, cache=True)
def dijkstra_run(
    indptr: np.ndarray, indices: np.ndarray, weights: np.ndarray, source: int
) -> tuple[np.ndarray, int]:  # pragma: no cover - numba
    """Dijkstra with a binary heap (lazy deletion); ``inf`` unreachable.

    Weights are float64 and ``>= 0`` (checked by the caller). Returns the distances
    and the number of vertices settled.
    """
    n = indptr.shape[0] - 1
    dist = np.full(n, np.inf)
    done = np.zeros(n, dtype=np.bool_)
    cap = indices.shape[0] + 1
    keys = np.empty(cap, dtype=np.float64)
    vals = np.empty(cap, dtype=np.int64)
    dist[source] = 0.0
    keys[0], vals[0] = 0.0, source
    size = 1
    settled = 0
    while size > 0:
        d, u = keys[0], vals[0]
        size -= 1
        if size > 0:
            keys[0], vals[0] = keys[size], vals[size]
            _sift_down(keys, vals, size)
        if done[u]:
            continue
        done[u] = True
        settled += 1
        for e in range(indptr[u], indptr[u + 1]):
            v = indices[e]
            cand = d + weights[e]
            if cand < dist[v]:
                dist[v] = cand
                i = size  # sift up
                size += 1
                while i > 0:
                    parent = (i - 1) // 2
                    if keys[parent] <= cand:
                        break
                    keys[i], vals[i] = keys[parent], vals[parent]
                    i = parent
                keys[i], vals[i] = cand, v
    return dist, settled


@numba.njit(nogil=True, cache=True)
def _find(parent: np.ndarray, x: int) -> int:  # pragma: no cover - numba
    root = x
    while parent[root] != root:
        root = parent[root]
    while parent[x] != root:  # path compression
        nxt = parent[x]
        parent[x] = root
        x = nxt
    return root


@numba.njit(nogil=True, cache=True)
def components_run(
    indptr: np.ndarray, indices: np.ndarray
) -> np.ndarray:  # pragma: no cover - numba
    """Weak components by union-find; label = the smallest vertex id of each.

    Linking the larger root under the smaller keeps every root its component's
    minimum, so no relabelling pass is needed. Edge direction is ignored, so a
    directed CSR gives weak components without symmetrising.
    """
    n = indptr.shape[0] - 1
    parent = np.empty(n, dtype=indices.dtype)  # int32 halves the cache footprint
    for v in range(n):
        parent[v] = v
    for u in range(n):
        for e in range(indptr[u], indptr[u + 1]):
            v = indices[e]
            ru = _find(parent, u)
            rv = _find(parent, v)
            if ru < rv:
                parent[rv] = ru
            elif rv < ru:
                parent[ru] = rv
    labels = np.empty(n, dtype=np.int64)
    for v in range(n):  # roots are minima, and parent[x] < x for non-roots
        labels[v] = labels[parent[v]] if parent[v] != v else v
    return labels
