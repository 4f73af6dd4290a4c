"""Node pairs packed into int64 keys, and sorted per-pair copy counts.

A pair ``(high, low)`` of node ids below 2**31 packs into ``high << 32 | low``; sorting
keys sorts by ``high`` then ``low``, so all pairs of one ``high`` node form one
contiguous range. :class:`PairCounts` keeps sorted unique keys with a nonzero count
each; it is the delta of :class:`~strata.storage.dynamic.graph.DynamicGraph`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from strata.storage._types import IndexArray, Int64Array

SHIFT = np.int64(32)
LOW = np.int64((1 << 32) - 1)
EMPTY = np.zeros(0, dtype=np.int64)
EMPTY.flags.writeable = False


def pack(high: IndexArray, low: IndexArray) -> Int64Array:
    """Pack id pairs into sortable int64 keys."""
    return (high.astype(np.int64) << SHIFT) | low.astype(np.int64)


def high(keys: Int64Array) -> Int64Array:
    """First ids of packed keys."""
    return keys >> SHIFT


def low(keys: Int64Array) -> Int64Array:
    """Second ids of packed keys."""
    return keys & LOW


def swap(keys: Int64Array) -> Int64Array:
    """Keys of the reversed pairs (``(a, b)`` becomes ``(b, a)``), unsorted."""
    return pack(low(keys), high(keys))


def ranges(starts: Int64Array, lengths: Int64Array) -> Int64Array:
    """Concatenate ``arange(s, s + n)`` for every ``(s, n)`` without a Python loop."""
    total = int(lengths.sum())
    if total == 0:
        return EMPTY
    ends = np.cumsum(lengths)
    shift = np.repeat(starts - (ends - lengths), lengths)
    out: Int64Array = np.arange(total, dtype=np.int64) + shift
    return out


def group_starts(sorted_keys: Int64Array) -> Int64Array:
    """Positions where a run of equal keys starts in a sorted array."""
    if sorted_keys.size == 0:
        return EMPTY
    return np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])


def count_sorted(sorted_keys: Int64Array, query: Int64Array) -> Int64Array:
    """How often each query key occurs in a sorted array (with repeats)."""
    left = np.searchsorted(sorted_keys, query, "left")
    return np.searchsorted(sorted_keys, query, "right") - left


@dataclass(frozen=True, slots=True)
class PairCounts:
    """Sorted unique pair keys, each with a nonzero int64 count. Immutable."""

    keys: Int64Array = field(default_factory=lambda: EMPTY)
    counts: Int64Array = field(default_factory=lambda: EMPTY)

    def __len__(self) -> int:
        return int(self.keys.shape[0])

    def lookup(self, query: Int64Array) -> Int64Array:
        """Count of each query key (0 where absent)."""
        if self.keys.size == 0:
            return np.zeros(query.shape[0], dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.keys, query), self.keys.size - 1)
        return np.where(self.keys[pos] == query, self.counts[pos], 0)

    def add(self, keys: Int64Array, counts: Int64Array) -> PairCounts:
        """Return a copy with ``counts`` added at sorted unique ``keys``.

        Costs ``O(len(self) + len(keys) log len(self))``: existing keys are found by
        binary search, new ones inserted in one pass; pairs reaching 0 are dropped.
        """
        pos = np.searchsorted(self.keys, keys)
        hit = pos < self.keys.size
        hit[hit] = self.keys[pos[hit]] == keys[hit]
        merged = self.counts.copy()
        merged[pos[hit]] += counts[hit]
        merged_keys = self.keys
        miss = ~hit
        if miss.any():
            merged_keys = np.insert(merged_keys, pos[miss], keys[miss])
            merged = np.insert(merged, pos[miss], counts[miss])
        zero = merged == 0
        if zero.any():
            merged_keys, merged = merged_keys[~zero], merged[~zero]
        return PairCounts(merged_keys, merged)

    def rows(self, nodes: Int64Array) -> tuple[Int64Array, Int64Array]:
        """Index ranges ``[lo, hi)`` of the pairs whose first id is each node."""
        lo = np.searchsorted(self.keys, nodes << SHIFT)
        hi = np.searchsorted(self.keys, (nodes + 1) << SHIFT)
        return lo, hi

    def swapped(self) -> PairCounts:
        """The same counts keyed by reversed pairs (sorted again)."""
        keys = swap(self.keys)
        order = np.argsort(keys)
        return PairCounts(keys[order], self.counts[order])

    def apply_to(self, base_keys: Int64Array) -> Int64Array:
        """Sorted keys (one per copy) of ``base_keys`` with these counts applied.

        ``base_keys`` is sorted with repeats; a negative count removes that many
        copies (they must exist), a positive one inserts copies.
        """
        if self.keys.size == 0:
            return base_keys
        gone = self.counts < 0
        if gone.any():
            first = np.searchsorted(base_keys, self.keys[gone], "left")
            keep = np.ones(base_keys.shape[0], dtype=np.bool_)
            keep[ranges(first, -self.counts[gone])] = False
            base_keys = base_keys[keep]
        new = self.counts > 0
        inserted = np.repeat(self.keys[new], self.counts[new])
        return np.insert(base_keys, np.searchsorted(base_keys, inserted), inserted)
