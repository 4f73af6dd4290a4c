"""Retractable per-node aggregators: sum, mean and max over in-edge messages.

Each aggregator keeps, for every node ``v``, what d3gnn.md §3.2 needs to update
``agg_{u -> v} m_u`` exactly under insertions and deletions, as arrays over all
nodes (:class:`AggState`): float64 ``values`` (sums, or maxima) and int64
``counts`` (contributing messages). They follow the house ``Aggregator`` protocol
(``zero / add / remove / merge / result``, STYLE.md), vectorised: one call applies
a whole :class:`Contribution` (many destination rows) with one scatter.

* sum and mean store ``(S, n)``; a windowed partial sum of ``k`` messages arrives
  as one row ``(sum m, k)``. Never a running mean (the D3-GNN mean bug, §2).
* max stores the current maximum. ``remove`` and a decreasing ``replace`` can only
  matter where the removed value *equals* the maximum; those nodes are marked
  ``stale`` (ties and near-ties within 1e-12 relative included, so neither a tie
  nor a message rounded differently when computed again hides a recompute) and
  :meth:`MaxAggregator.refresh` recomputes them from their remaining messages.
  Increases are O(d). ``result`` refuses stale nodes.

Reads follow PyG and DGL: mean and max are 0 where a node has no message.

Examples:
    >>> import numpy as np
    >>> agg = MeanAggregator(dim=2)
    >>> acc = agg.zero(num_nodes=3)
    >>> acc = agg.add(acc, Contribution(np.array([0, 0, 2]),
    ...                                 np.array([[1., 2.], [3., 4.], [5., 5.]])))
    >>> agg.result(acc).tolist()
    [[2.0, 3.0], [0.0, 0.0], [5.0, 5.0]]
    >>> acc = agg.remove(acc, Contribution(np.array([0]), np.array([[1., 2.]])))
    >>> agg.result(acc, np.array([0])).tolist()
    [[3.0, 4.0]]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from strata.operators.errors import OperatorError
from strata.operators.streaming._kernels import (
    gather_scatter_add,
    gather_scatter_max,
    scatter_count,
)

Int64Array = npt.NDArray[np.int64]
Float64Array = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, eq=False)
class Contribution:
    """Message rows for destinations.

    Row ``i`` sends ``values[rows[i]]`` (``values[i]`` without ``rows``) to
    ``dst[i]``; it is the sum of ``counts[i]`` messages (for max: one message value
    sent ``counts[i]`` times). ``counts`` defaults to ones. ``rows`` lets one
    message reach many destinations without materialising a row per edge.
    """

    dst: Int64Array
    values: Float64Array
    counts: Int64Array | None = None
    rows: Int64Array | None = None

    @property
    def size(self) -> int:
        """Number of rows."""
        return int(self.dst.shape[0])

    def row_index(self) -> Int64Array:
        """Index into ``values`` of every row."""
        if self.rows is None:
            return np.arange(self.dst.shape[0], dtype=np.int64)
        return self.rows

    def row_counts(self) -> Int64Array:
        """Messages per row (ones by default)."""
        if self.counts is None:
            return np.ones(self.dst.shape[0], dtype=np.int64)
        return self.counts

    def gathered(self) -> Float64Array:
        """The message of every row, materialised (``[size, dim]``)."""
        values = np.asarray(self.values, dtype=np.float64)
        return values if self.rows is None else values[self.rows]


@dataclass(slots=True, eq=False)
class AggState:
    """Per-node accumulators (mutable; aggregators update them in place).

    Attributes:
        values: float64 ``[capacity, dim]``: sums, or maxima (``-inf`` if none).
        counts: int64 ``[capacity]``: contributing messages per node.
        stale: bool ``[capacity]``: max only; the maximum must be recomputed.
    """

    values: Float64Array
    counts: Int64Array
    stale: npt.NDArray[np.bool_]

    @property
    def capacity(self) -> int:
        """Rows allocated."""
        return int(self.counts.shape[0])

    def state(self) -> dict[str, np.ndarray]:
        """Arrays for a checkpoint (copies)."""
        return {
            "values": self.values.copy(),
            "counts": self.counts.copy(),
            "stale": self.stale.copy(),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> AggState:
        """Inverse of :meth:`state`."""
        return cls(
            np.array(state["values"], dtype=np.float64),
            np.array(state["counts"], dtype=np.int64),
            np.array(state["stale"], dtype=np.bool_),
        )


def scatter_add(
    target: np.ndarray,
    index: Int64Array,
    source: np.ndarray,
    rows: Int64Array | None = None,
) -> None:
    """``target[index[i]] += source[rows[i]]`` (``source[i]`` without ``rows``)."""
    if index.shape[0] == 0:
        return
    if rows is None:
        rows = np.arange(index.shape[0], dtype=np.int64)
    if target.ndim == 1:
        counts = np.asarray(source, dtype=target.dtype)[rows]
        if counts.any():  # a replace changes no count: skip the random writes
            scatter_count(target, index, counts)
        return
    values = np.ascontiguousarray(source, dtype=target.dtype)
    gather_scatter_add(target, index, values, rows)


def scatter_max(
    target: np.ndarray,
    index: Int64Array,
    source: np.ndarray,
    rows: Int64Array | None = None,
) -> None:
    """``target[index[i]] = max(target[index[i]], source[rows[i]])`` elementwise."""
    if index.shape[0] == 0:
        return
    if rows is None:
        rows = np.arange(index.shape[0], dtype=np.int64)
    values = np.ascontiguousarray(source, dtype=target.dtype)
    gather_scatter_max(target, index, values, rows)


class _Aggregator:
    """Shared storage handling; subclasses define the algebra."""

    empty_value = 0.0

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def zero(self, num_nodes: int = 0) -> AggState:
        """Accumulators for ``num_nodes`` nodes, none of which has a message."""
        return AggState(
            np.full((num_nodes, self.dim), self.empty_value, dtype=np.float64),
            np.zeros(num_nodes, dtype=np.int64),
            np.zeros(num_nodes, dtype=np.bool_),
        )

    def grow(self, acc: AggState, num_nodes: int) -> AggState:
        """Make room for ``num_nodes`` nodes (doubling, so growth is amortised)."""
        if num_nodes <= acc.capacity:
            return acc
        bigger = self.zero(max(num_nodes, 2 * acc.capacity))
        n = acc.capacity
        bigger.values[:n], bigger.counts[:n], bigger.stale[:n] = (
            acc.values,
            acc.counts,
            acc.stale,
        )
        acc.values, acc.counts, acc.stale = bigger.values, bigger.counts, bigger.stale
        return acc

    def add(self, acc: AggState, item: Contribution) -> AggState:
        """Add message rows (subclasses define how)."""
        raise NotImplementedError

    def remove(self, acc: AggState, item: Contribution) -> AggState:
        """Remove message rows (subclasses define how)."""
        raise NotImplementedError

    def replace(
        self, acc: AggState, dst: Int64Array, new: Float64Array, old: Float64Array
    ) -> AggState:
        """Swap messages (subclasses define how)."""
        raise NotImplementedError

    def merge(self, a: AggState, b: AggState) -> AggState:
        """Combine two accumulators (subclasses define how)."""
        raise NotImplementedError

    def result(self, acc: AggState, nodes: Int64Array | None = None) -> Float64Array:
        """Read the aggregates (subclasses define how)."""
        raise NotImplementedError

    def count(self, acc: AggState, dst: Int64Array, counts: Int64Array) -> AggState:
        """Change only the message counts (``n += counts``), not the values."""
        if dst.shape[0]:
            self.grow(acc, int(dst.max()) + 1)
        scatter_add(acc.counts, dst, counts)
        return acc

    def _fit(self, acc: AggState, item: Contribution) -> AggState:
        if np.shape(item.values)[1:] != (self.dim,):
            raise OperatorError.build(
                "values",
                type(self).__name__,
                f"rows of width {self.dim}",
                f"shape {item.values.shape}",
            )
        if item.dst.shape[0]:
            self.grow(acc, int(item.dst.max()) + 1)
        return acc

    def __repr__(self) -> str:
        return f"{type(self).__name__}(dim={self.dim})"


class SumAggregator(_Aggregator):
    """``sum_{u -> v} m_u``, retractable (a group: remove is exact subtraction)."""

    def add(self, acc: AggState, item: Contribution) -> AggState:
        """Add message rows (``S += m``, ``n += k``)."""
        self._fit(acc, item)
        scatter_add(acc.values, item.dst, item.values, item.rows)
        scatter_add(acc.counts, item.dst, item.row_counts())
        return acc

    def remove(self, acc: AggState, item: Contribution) -> AggState:
        """Take message rows back (``S -= m``, ``n -= k``)."""
        self._fit(acc, item)
        scatter_add(acc.values, item.dst, -np.asarray(item.values), item.rows)
        scatter_add(acc.counts, item.dst, -item.row_counts())
        return acc

    def replace(
        self, acc: AggState, dst: Int64Array, new: Float64Array, old: Float64Array
    ) -> AggState:
        """Swap one message for another on each row (``S += new - old``)."""
        scatter_add(acc.values, dst, np.asarray(new) - np.asarray(old))
        return acc

    def merge(self, a: AggState, b: AggState) -> AggState:
        """Accumulators of the union of two disjoint message sets."""
        n = max(a.capacity, b.capacity)
        out = self.zero(n)
        for part in (a, b):
            out.values[: part.capacity] += part.values
            out.counts[: part.capacity] += part.counts
        return out

    def result(self, acc: AggState, nodes: Int64Array | None = None) -> Float64Array:
        """The sums of ``nodes`` (default all)."""
        return acc.values if nodes is None else acc.values[nodes]


class MeanAggregator(SumAggregator):
    """``mean_{u -> v} m_u`` from ``(S, n)``; 0 where a node has no message."""

    def result(self, acc: AggState, nodes: Int64Array | None = None) -> Float64Array:
        """``S / n`` of ``nodes`` (default all), 0 where ``n == 0``."""
        values = acc.values if nodes is None else acc.values[nodes]
        counts = acc.counts if nodes is None else acc.counts[nodes]
        safe = np.maximum(counts, 1).astype(np.float64)
        return np.where(counts[:, None] > 0, values / safe[:, None], 0.0)


class MaxAggregator(_Aggregator):
    """Elementwise ``max_{u -> v} m_u`` with recompute-on-demand for deletions."""

    empty_value = -np.inf

    def add(self, acc: AggState, item: Contribution) -> AggState:
        """Raise maxima (O(d) per row)."""
        self._fit(acc, item)
        scatter_max(acc.values, item.dst, item.values, item.rows)
        scatter_add(acc.counts, item.dst, item.row_counts())
        return acc

    def remove(self, acc: AggState, item: Contribution) -> AggState:
        """Remove messages; nodes whose maximum they may attain become stale."""
        self._fit(acc, item)
        hit = _attains(item.gathered(), acc.values[item.dst]).any(axis=1)
        acc.stale[item.dst[hit]] = True
        scatter_add(acc.counts, item.dst, -item.row_counts())
        return acc

    def replace(
        self, acc: AggState, dst: Int64Array, new: Float64Array, old: Float64Array
    ) -> AggState:
        """Swap messages: a decrease where ``old`` attains the max marks the node."""
        new, old = np.asarray(new), np.asarray(old)
        current = acc.values[dst]
        hit = (_attains(old, current) & (new < old)).any(axis=1)
        acc.stale[dst[hit]] = True
        scatter_max(acc.values, dst, new)
        return acc

    def refresh(self, acc: AggState, nodes: Int64Array, item: Contribution) -> AggState:
        """Recompute the maxima of ``nodes`` from ``item``: all their live messages."""
        acc.values[nodes] = -np.inf
        scatter_max(acc.values, item.dst, item.values, item.rows)
        acc.stale[nodes] = False
        return acc

    def merge(self, a: AggState, b: AggState) -> AggState:
        """Accumulators of the union of two disjoint message sets."""
        out = self.zero(max(a.capacity, b.capacity))
        for part in (a, b):
            n = part.capacity
            np.maximum(out.values[:n], part.values, out=out.values[:n])
            out.counts[:n] += part.counts
            out.stale[:n] |= part.stale
        return out

    def result(self, acc: AggState, nodes: Int64Array | None = None) -> Float64Array:
        """Maxima of ``nodes`` (default all), 0 where a node has no message.

        Raises:
            OperatorError: if a requested node is stale (call :meth:`refresh`).
        """
        ids = np.arange(acc.capacity) if nodes is None else nodes
        if acc.stale[ids].any():
            bad = int(ids[np.argmax(acc.stale[ids])])
            raise OperatorError.build(
                "node",
                "MaxAggregator.result",
                "no stale maximum",
                f"node {bad} stale",
                "refresh() stale nodes from their messages first",
            )
        return np.where(acc.counts[ids][:, None] > 0, acc.values[ids], 0.0)


AGGREGATORS: dict[str, type[_Aggregator]] = {
    "sum": SumAggregator,
    "mean": MeanAggregator,
    "max": MaxAggregator,
}


#: Relative slack of "a removed message attains the maximum": a message computed
#: again (for its removal) may differ from the one added in the last bits, as the
#: layer's kernels may round a row differently in a batch of another size.
_TIE = 1e-12


def _attains(old: np.ndarray, current: np.ndarray) -> np.ndarray:
    """Whether removing ``old`` may lower ``current`` (ties and near-ties: yes).

    Conservative: a near-tie marks the node stale, and a refresh recomputes its
    maximum from the live messages, which is exact either way.
    """
    return np.asarray(old >= current - _TIE * np.abs(current))
