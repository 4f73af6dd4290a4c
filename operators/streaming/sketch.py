"""A count-min sketch with exponential time decay: recent update rates per vertex.

The :class:`~strata.operators.streaming.windows.Adaptive` window needs, for every
vertex, how often it was updated lately, without a counter per vertex of an unbounded id
space. A count-min sketch (Cormode and Muthukrishnan, "An Improved Data Stream Summary:
The Count-Min Sketch and its Applications", J. Algorithms 55(1), 2005) keeps ``depth``
rows of ``width`` counters; a key adds 1 to one counter per row (its hash) and its
estimate is the row minimum, which never underestimates. Counters decay by ``exp(-dt /
horizon_ms)``, so an estimate is the number of recent updates weighted by age (D3-GNN's
adaptive windows use the same idea, §2).

Examples:
    >>> import numpy as np
    >>> s = DecayedCountMin(width=64, depth=2, horizon_ms=1000)
    >>> _ = s.add(np.array([7, 7, 7, 3]), now_ms=0)
    >>> s.estimate(np.array([7, 3, 5])).round(3).tolist()
    [3.0, 1.0, 0.0]
    >>> s.estimate(np.array([7]), now_ms=1000).round(3).tolist()  # one horizon later
    [1.104]
"""

from __future__ import annotations

from typing import Any

import numpy as np

_C1 = np.uint64(0xFF51AFD7ED558CCD)
_C2 = np.uint64(0xC4CEB9FE1A85EC53)
_GOLDEN = 0x9E3779B97F4A7C15


def _mix(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser (a fixed, well-spread 64-bit hash)."""
    shift = np.uint64(33)
    x = (x ^ (x >> shift)) * _C1
    x = (x ^ (x >> shift)) * _C2
    return np.asarray(x ^ (x >> shift), dtype=np.uint64)


class DecayedCountMin:
    """Time-decayed count-min sketch over integer keys.

    Args:
        width: Counters per row.
        depth: Rows (independent hashes).
        horizon_ms: Decay time constant.
    """

    def __init__(self, width: int, depth: int, horizon_ms: int) -> None:
        if width < 1 or depth < 1 or horizon_ms <= 0:
            raise ValueError(
                f"DecayedCountMin: expected width, depth >= 1 and horizon_ms > 0, "
                f"got {width}, {depth}, {horizon_ms}"
            )
        self.width = width
        self.depth = depth
        self.horizon_ms = horizon_ms
        self.table = np.zeros((depth, width), dtype=np.float64)
        self.now_ms = 0
        seeds = (
            np.arange(1, depth + 1, dtype=np.uint64) * np.uint64(_GOLDEN)
        ) & np.uint64((1 << 64) - 1)
        self._seeds = seeds

    def _columns(self, keys: np.ndarray) -> np.ndarray:
        k = keys.astype(np.uint64)[None, :] ^ self._seeds[:, None]
        with np.errstate(over="ignore"):
            return (_mix(k) % np.uint64(self.width)).astype(np.int64)

    def _advance(self, now_ms: int | None) -> None:
        if now_ms is not None and now_ms > self.now_ms:
            self.table *= np.exp(-(now_ms - self.now_ms) / self.horizon_ms)
            self.now_ms = now_ms

    def add(self, keys: np.ndarray, now_ms: int) -> np.ndarray:
        """Count one update of each key (repeats count again); return estimates."""
        self._advance(now_ms)
        cols = self._columns(np.asarray(keys))
        for row in range(self.depth):
            np.add.at(self.table[row], cols[row], 1.0)
        found = self.table[np.arange(self.depth)[:, None], cols].min(axis=0)
        return np.asarray(found, dtype=np.float64)

    def estimate(self, keys: np.ndarray, now_ms: int | None = None) -> np.ndarray:
        """Decayed update counts of ``keys`` (never below the true count)."""
        self._advance(now_ms)
        cols = self._columns(np.asarray(keys))
        found = self.table[np.arange(self.depth)[:, None], cols].min(axis=0)
        return np.asarray(found, dtype=np.float64)

    def state(self) -> dict[str, Any]:
        """Counters and clock, for a checkpoint."""
        return {"table": self.table.copy(), "now_ms": self.now_ms}

    def restore(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`state`."""
        self.table = np.array(state["table"], dtype=np.float64)
        self.now_ms = int(state["now_ms"])
