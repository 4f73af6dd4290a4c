"""NodeFeatureTable: a growable float32 matrix of node features for ``set_feature``.

Row ``v`` holds ``x_v`` once a ``set_feature`` update (or :meth:`NodeFeatureTable.set`)
gave it one; :attr:`NodeFeatureTable.has_feature` says which rows have. Within a batch,
the last update of a node wins, as if the rows were applied in order. Storage grows by
doubling, so a stream of new nodes costs amortised O(1) per row.

Examples:
    >>> import numpy as np
    >>> from strata.storage.updates import feature_updates
    >>> table = NodeFeatureTable(feature_dim=2)
    >>> table.apply(feature_updates(np.array([3, 1, 3]),
    ...                             np.array([[1, 1], [2, 2], [5, 5]]), event_time=0))
    3
    >>> table.num_nodes, table.get(np.array([3, 0])).tolist()
    (4, [[5.0, 5.0], [0.0, 0.0]])
    >>> table.has_feature.tolist()
    [False, True, False, True]
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from strata.storage._types import BoolArray, IndexArray
from strata.storage.errors import FeatureError
from strata.storage.updates import MAX_NODES, UpdateArrays, UpdateKind, decode_updates

Float32Matrix = npt.NDArray[np.float32]


class NodeFeatureTable:
    """Node features ``x_v`` (float32, ``feature_dim`` wide), growable.

    Args:
        feature_dim: width of every feature vector (>= 1).
        num_nodes: rows to start with (all without a feature).
    """

    def __init__(self, feature_dim: int, num_nodes: int = 0) -> None:
        if feature_dim < 1 or not 0 <= num_nodes <= MAX_NODES:
            raise FeatureError.build(
                "feature_dim/num_nodes",
                "NodeFeatureTable",
                f"feature_dim >= 1 and 0 <= num_nodes <= {MAX_NODES}",
                f"{feature_dim}/{num_nodes}",
            )
        self.feature_dim = feature_dim
        self._num_nodes = 0
        self._values: Float32Matrix = np.zeros((0, feature_dim), dtype=np.float32)
        self._has: BoolArray = np.zeros(0, dtype=np.bool_)
        self._grow(num_nodes)

    def _grow(self, num_nodes: int) -> None:
        if num_nodes > self._values.shape[0]:
            capacity = max(num_nodes, 2 * self._values.shape[0])
            values = np.zeros((capacity, self.feature_dim), dtype=np.float32)
            values[: self._num_nodes] = self._values[: self._num_nodes]
            has = np.zeros(capacity, dtype=np.bool_)
            has[: self._num_nodes] = self._has[: self._num_nodes]
            self._values, self._has = values, has
        self._num_nodes = max(self._num_nodes, num_nodes)

    @property
    def num_nodes(self) -> int:
        """Rows in the table (one past the highest node seen)."""
        return self._num_nodes

    @property
    def values(self) -> Float32Matrix:
        """The ``(num_nodes, feature_dim)`` matrix (a view; zeros where unset)."""
        return self._values[: self._num_nodes]

    @property
    def has_feature(self) -> BoolArray:
        """Which nodes have a feature (a view)."""
        return self._has[: self._num_nodes]

    def set(self, nodes: IndexArray, values: npt.ArrayLike) -> None:
        """Set ``x_nodes[i] = values[i]``; for a repeated node the last row wins."""
        ids = np.asarray(nodes, dtype=np.int64)
        rows = np.asarray(values, dtype=np.float32)
        where = "NodeFeatureTable.set"
        if rows.shape != (ids.shape[0], self.feature_dim):
            raise FeatureError.build(
                "values",
                where,
                f"shape ({ids.shape[0]}, {self.feature_dim})",
                f"shape {rows.shape}",
            )
        bad = (ids < 0) | (ids >= MAX_NODES)
        if bad.any():
            pos = int(np.argmax(bad))
            raise FeatureError.build(
                "nodes", where, f"ids in [0, {MAX_NODES})", f"{ids[pos]} at {pos}"
            )
        if ids.size == 0:
            return
        # keep each node's last row: unique over the reversed ids finds last ones
        unique, last_from_end = np.unique(ids[::-1], return_index=True)
        last = ids.shape[0] - 1 - last_from_end
        self._grow(int(unique[-1]) + 1)
        self._values[unique] = rows[last]
        self._has[unique] = True

    def get(self, nodes: IndexArray) -> Float32Matrix:
        """Feature rows of ``nodes`` (a copy; zeros for nodes without one)."""
        ids = np.asarray(nodes, dtype=np.int64)
        bad = (ids < 0) | (ids >= self._num_nodes)
        if bad.any():
            pos = int(np.argmax(bad))
            raise FeatureError.build(
                "nodes",
                "NodeFeatureTable.get",
                f"ids in [0, {self._num_nodes})",
                f"{ids[pos]} at {pos}",
            )
        return self._values[ids]

    def apply(self, batch: pa.RecordBatch | UpdateArrays) -> int:
        """Apply a batch's ``set_feature`` rows; return how many there were.

        Other rows only grow the table to cover their node ids (``add_node``) so it
        stays aligned with a :class:`~strata.storage.dynamic.graph.DynamicGraph` fed the
        same batches; edge rows are ignored.
        """
        arrays = decode_updates(batch) if isinstance(batch, pa.RecordBatch) else batch
        is_set = arrays.kind == UpdateKind.SET_FEATURE
        if is_set.any() and arrays.feature.shape[1] != self.feature_dim:
            raise FeatureError.build(
                "feature",
                "NodeFeatureTable.apply",
                f"width {self.feature_dim}",
                f"width {arrays.feature.shape[1]}",
            )
        added = arrays.node[arrays.kind == UpdateKind.ADD_NODE]
        if added.size:
            self._grow(int(added.max()) + 1)
        self.set(arrays.node[is_set], arrays.feature[is_set])
        return int(is_set.sum())

    def state(self) -> dict[str, np.ndarray]:
        """Plain arrays for a checkpoint: ``values`` and ``has_feature`` (copies)."""
        return {"values": self.values.copy(), "has_feature": self.has_feature.copy()}

    @classmethod
    def from_state(cls, state: dict[str, np.ndarray]) -> NodeFeatureTable:
        """Rebuild a table from :meth:`state` arrays."""
        values = np.asarray(state["values"], dtype=np.float32)
        has = np.asarray(state["has_feature"], dtype=np.bool_)
        if values.ndim != 2 or has.shape != (values.shape[0],):
            raise FeatureError.build(
                "state",
                "NodeFeatureTable.from_state",
                "values (n, d) and has_feature (n,)",
                f"{values.shape} and {has.shape}",
            )
        table = cls(max(values.shape[1], 1), values.shape[0])
        table._values[: values.shape[0]] = values
        table._has[: values.shape[0]] = has
        return table

    def __repr__(self) -> str:
        return (
            f"NodeFeatureTable(num_nodes={self._num_nodes}, "
            f"feature_dim={self.feature_dim}, set={int(self.has_feature.sum())})"
        )
