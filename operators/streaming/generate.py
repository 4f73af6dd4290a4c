"""Seeded synthetic update streams over a starting graph (adds, deletes, features).

:class:`UpdateStream` yields update batches (``strata.storage.updates`` schema) with a
given mix of ``add_edge``, ``remove_edge`` and ``set_feature`` rows:

* deletes remove edges that exist when their batch starts (one copy each, no two
  deletes of one copy in a batch), so none is dropped;
* added edges pick each endpoint from the current edge list with probability
  ``hot`` (degree-proportional: hubs receive and send more, the correlated S1 shape
  of d3gnn.md §4) and uniformly otherwise;
* ``new_nodes`` of the feature rows introduce fresh node ids (they become live
  and later edges may reach them); other feature rows replace an existing node's
  features with Gaussian noise.

Batch ``i`` draws from ``default_rng([seed, i])`` and from the edges the stream
itself produced, so the stream is the same on every run. The generator tracks the
current edge list with swap-removal, vectorised per batch.

Examples:
    >>> import numpy as np
    >>> from strata.storage import CSRGraph
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]))
    >>> stream = UpdateStream(g, feature_dim=4, mix=(0.5, 0.5, 0.0), seed=1)
    >>> batches = list(stream.batches(num_updates=10, batch_size=4))
    >>> [b.num_rows for b in batches], stream.num_edges
    ([4, 4, 2], 5)
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from strata.storage import CSRGraph, UpdateKind, make_updates


class UpdateStream:
    """A seeded stream of update batches over ``graph`` (see the module docstring).

    Args:
        graph: The starting graph (not modified).
        feature_dim: Width of ``set_feature`` rows (0: topology only).
        mix: Fractions of (add_edge, remove_edge, set_feature) rows.
        hot: Probability that an added edge's endpoint is degree-proportional.
        new_nodes: Fraction of ``set_feature`` rows that introduce a fresh node.
        seed: Seed of the stream.
        event_time_ms: Event time of the first batch; later batches add one ms.
    """

    def __init__(
        self,
        graph: CSRGraph,
        *,
        feature_dim: int = 0,
        mix: tuple[float, float, float] = (0.7, 0.2, 0.1),
        hot: float = 0.5,
        new_nodes: float = 0.0,
        seed: int = 0,
        event_time_ms: int = 0,
    ) -> None:
        if len(mix) != 3 or min(mix) < 0 or abs(sum(mix) - 1.0) > 1e-9:
            raise ValueError(f"mix: expected 3 fractions summing to 1, got {mix}")
        if mix[2] > 0 and feature_dim < 1:
            raise ValueError("mix: set_feature rows need feature_dim >= 1")
        src, dst = graph.to_coo()
        self._src = np.asarray(src, dtype=np.int64).copy()
        self._dst = np.asarray(dst, dtype=np.int64).copy()
        self._size = int(self._src.shape[0])
        self.num_nodes = graph.num_nodes
        self.feature_dim = feature_dim
        self.mix = mix
        self.hot = hot
        self.new_nodes = new_nodes
        self.seed = seed
        self.event_time_ms = event_time_ms
        self._index = 0

    @property
    def num_edges(self) -> int:
        """Edges (copies) after the batches drawn so far."""
        return self._size

    def batches(self, num_updates: int, batch_size: int) -> Iterator[pa.RecordBatch]:
        """Yield ``num_updates`` rows in batches of ``batch_size`` (last: the rest)."""
        for start in range(0, num_updates, batch_size):
            yield self.next_batch(min(batch_size, num_updates - start))

    def next_batch(self, rows: int) -> pa.RecordBatch:
        """Draw the next batch of ``rows`` updates."""
        rng = np.random.default_rng([self.seed, self._index])
        kind = rng.choice(
            np.array(
                [UpdateKind.ADD_EDGE, UpdateKind.REMOVE_EDGE, UpdateKind.SET_FEATURE]
            ),
            size=rows,
            p=np.asarray(self.mix, dtype=np.float64),
        ).astype(np.int8)
        src = np.zeros(rows, dtype=np.int64)
        dst = np.zeros(rows, dtype=np.int64)
        node = np.zeros(rows, dtype=np.int64)
        removes = np.flatnonzero(kind == UpdateKind.REMOVE_EDGE)
        k = min(removes.shape[0], self._size)
        kind[removes[k:]] = UpdateKind.ADD_EDGE  # nothing left to delete
        picked = rng.choice(self._size, size=k, replace=False) if k else removes[:0]
        src[removes[:k]], dst[removes[:k]] = self._src[picked], self._dst[picked]
        self._drop(picked)
        adds = np.flatnonzero(kind == UpdateKind.ADD_EDGE)
        src[adds] = self._endpoints(rng, adds.shape[0], self._src)
        dst[adds] = self._endpoints(rng, adds.shape[0], self._dst)
        self._append(src[adds], dst[adds])
        sets = np.flatnonzero(kind == UpdateKind.SET_FEATURE)
        fresh = rng.random(sets.shape[0]) < self.new_nodes
        node[sets] = rng.integers(0, max(self.num_nodes, 1), sets.shape[0])
        node[sets[fresh]] = self.num_nodes + np.arange(int(fresh.sum()))
        self.num_nodes += int(fresh.sum())
        feature = None
        if self.feature_dim:
            feature = rng.normal(size=(rows, self.feature_dim)).astype(np.float32)
        self._index += 1
        return make_updates(
            kind,
            src=src,
            dst=dst,
            node=node,
            feature=feature,
            feature_dim=self.feature_dim,
            event_time=self.event_time_ms + self._index - 1,
        )

    def _endpoints(
        self, rng: np.random.Generator, count: int, side: np.ndarray
    ) -> np.ndarray:
        uniform = rng.integers(0, max(self.num_nodes, 1), count)
        if self._size == 0:
            return uniform
        hot = side[rng.integers(0, self._size, count)]
        return np.where(rng.random(count) < self.hot, hot, uniform)

    def _drop(self, positions: np.ndarray) -> None:
        """Swap-remove edges at ``positions`` (distinct) from the edge list."""
        if positions.shape[0] == 0:
            return
        last = self._size - positions.shape[0]
        doomed = np.zeros(self._size, dtype=np.bool_)
        doomed[positions] = True
        holes = positions[positions < last]
        movers = np.flatnonzero(~doomed[last : self._size]) + last
        self._src[holes], self._dst[holes] = self._src[movers], self._dst[movers]
        self._size = last

    def _append(self, src: np.ndarray, dst: np.ndarray) -> None:
        need = self._size + src.shape[0]
        if need > self._src.shape[0]:
            capacity = max(need, 2 * self._src.shape[0], 16)
            for name in ("_src", "_dst"):
                grown = np.zeros(capacity, dtype=np.int64)
                grown[: self._size] = getattr(self, name)[: self._size]
                setattr(self, name, grown)
        self._src[self._size : need], self._dst[self._size : need] = src, dst
        self._size = need
