"""Chunk ordering: chain each part's chunks by the largest shared source sets.

Consecutive chunks that share sources ``S_a ∩ S_b`` let a worker keep those rows on
the device instead of loading them again (the intra-worker reuse of the load plan).
:func:`order_chunks` builds, for every part, a greedy chain: from each possible start,
repeatedly append the unvisited chunk with the largest overlap with the last one;
the chain with the largest total consecutive overlap wins, and the natural order
is kept unless the chain is strictly better (so ordering never lowers the total).

References:
    Wang, Chen, Wong and He, "HongTu: Scalable Full-Graph GNN Training on
    Multiple GPUs", PACMMOD 1(4), 2023, arXiv:2311.14898 (chunk reuse); the greedy
    chain is Strata's heuristic (``hongtu.md`` §3.7).

Examples:
    >>> import numpy as np
    >>> overlaps = np.array([[0, 1, 5], [1, 0, 2], [5, 2, 0]])
    >>> chain_order(overlaps).tolist()  # 0-2 share 5, 2-1 share 2
    [0, 2, 1]
    >>> int(total_overlap(overlaps, np.array([0, 2, 1])))
    7
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from strata.partition._types import Int64Array
from strata.partition.chunking import ChunkSchedule


def overlap_matrix(schedule: ChunkSchedule, part: int) -> Int64Array:
    """``|S_a ∩ S_b|`` between the chunks of one part (chunk-id order)."""
    m = schedule.chunks_per_part
    ids = [schedule.src_of(part * m + j) for j in range(m)]
    out = np.zeros((m, m), dtype=np.int64)
    for a in range(m):
        for b in range(a + 1, m):
            shared = np.intersect1d(ids[a], ids[b], assume_unique=True).size
            out[a, b] = out[b, a] = shared
    return out


def total_overlap(overlaps: np.ndarray, order: np.ndarray) -> int:
    """Sum of overlaps between consecutive chunks of ``order``."""
    return int(sum(overlaps[order[i], order[i + 1]] for i in range(len(order) - 1)))


def chain_order(overlaps: np.ndarray) -> Int64Array:
    """Best greedy chain over all starts; the identity unless strictly better."""
    m = overlaps.shape[0]
    best: Int64Array = np.arange(m, dtype=np.int64)
    best_total = total_overlap(overlaps, best)
    for start in range(m):
        chain = [start]
        left = set(range(m)) - {start}
        while left:
            last = chain[-1]
            nxt = max(sorted(left), key=lambda j: overlaps[last, j])
            chain.append(nxt)
            left.remove(nxt)
        candidate = np.array(chain, dtype=np.int64)
        total = total_overlap(overlaps, candidate)
        if total > best_total:
            best, best_total = candidate, total
    return best


def order_chunks(schedule: ChunkSchedule) -> ChunkSchedule:
    """Reorder every part's chunks by :func:`chain_order` (a new schedule)."""
    m = schedule.chunks_per_part
    order = np.empty((schedule.num_parts, m), dtype=np.int64)
    for p in range(schedule.num_parts):
        order[p] = p * m + chain_order(overlap_matrix(schedule, p))
    return replace(schedule, order=order)
