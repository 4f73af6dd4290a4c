"""LayerDelta: what a streaming layer applies in one flush, and what it emits.

One type carries both directions of d3gnn.md §3.4: a layer *receives* edge changes
and new inputs (from the update stream at layer 1, from the layer below otherwise)
and *emits* the same kind of record to the layer above: the net topology diff it
applied plus the new output rows of its live dirty vertices.

* ``src, dst, count``: edge operations in order. ``count`` is ``+k`` (add ``k``
  parallel copies) or ``-k`` (remove ``k``). Raw updates arrive as ``+1``/``-1``
  rows, where a delete of an absent copy is dropped; emitted diffs are net counts
  per ``(src, dst)`` pair, already resolved against the sender's topology.
* ``nodes, values``: new layer inputs, one row per node (the last row of a node
  wins); a node becomes *live* at its first row.
* ``num_nodes``: node ids below this exist (lets isolated new nodes grow arrays).
* ``updates``: update rows of the stream this record accounts for (layer 1 counts
  them; later layers pass the sum on), and ``arrivals``: the wall-clock arrival
  time (ms) of each of them, for latency percentiles. In a layer-1 record they are
  *attached* (``attached``): the first ``num_edge_ops`` arrivals belong to the edge
  operations, the next ``num_rows`` to the input rows, the rest (``add_node`` rows)
  to neither, so a per-vertex window that flushes part of a record accounts for
  exactly the updates it applied.
* ``first_offset, end_offset``: the log offsets ``[first, end)`` it covers (``-1``
  when unknown), the sink's watermark.

It is a plain frozen dataclass of numpy arrays; :meth:`to_wire` / :meth:`from_wire`
turn it into a dict the process executor can send (never pickled).

Examples:
    >>> import numpy as np
    >>> d = LayerDelta.edges(np.array([0, 1]), np.array([1, 2]), np.array([1, -1]))
    >>> e = LayerDelta.features(np.array([2]), np.ones((1, 3)))
    >>> both = LayerDelta.concat([d, e])
    >>> both.num_edge_ops, both.num_rows, both.num_nodes
    (2, 1, 3)
    >>> LayerDelta.from_wire(both.to_wire()).dst.tolist()
    [1, 2]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from strata.storage.updates import UpdateKind, decode_updates

Int64Array = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.floating[Any]]

_EMPTY = np.zeros(0, dtype=np.int64)


def _ids(values: npt.ArrayLike) -> Int64Array:
    return np.ascontiguousarray(values, dtype=np.int64).reshape(-1)


@dataclass(frozen=True, slots=True, eq=False)
class LayerDelta:
    """Edge operations and new inputs for one layer (see the module docstring)."""

    src: Int64Array = field(default_factory=lambda: _EMPTY)
    dst: Int64Array = field(default_factory=lambda: _EMPTY)
    count: Int64Array = field(default_factory=lambda: _EMPTY)
    nodes: Int64Array = field(default_factory=lambda: _EMPTY)
    values: FloatArray = field(default_factory=lambda: np.zeros((0, 0)))
    num_nodes: int = 0
    updates: int = 0
    arrivals: Int64Array = field(default_factory=lambda: _EMPTY)
    first_offset: int = -1
    end_offset: int = -1
    attached: bool = False

    # ------------------------------------------------------------------ builders
    @classmethod
    def edges(
        cls, src: npt.ArrayLike, dst: npt.ArrayLike, count: npt.ArrayLike
    ) -> LayerDelta:
        """Edge operations only (``count`` +k adds, -k removes copies)."""
        s, d, c = _ids(src), _ids(dst), _ids(count)
        top = int(max(s.max(initial=-1), d.max(initial=-1))) + 1
        return cls(src=s, dst=d, count=c, num_nodes=top)

    @classmethod
    def features(cls, nodes: npt.ArrayLike, values: npt.ArrayLike) -> LayerDelta:
        """New inputs only: ``values[i]`` becomes the input of ``nodes[i]``."""
        ids = _ids(nodes)
        rows = np.asarray(values)
        return cls(nodes=ids, values=rows, num_nodes=int(ids.max(initial=-1)) + 1)

    @classmethod
    def from_updates(
        cls,
        batch: pa.RecordBatch,
        *,
        first_offset: int = -1,
        arrival_ms: int | None = None,
    ) -> LayerDelta:
        """The layer-1 record of an update batch (``strata.storage.updates`` schema).

        ``add_edge``/``remove_edge`` rows become ``+1``/``-1`` edge operations,
        ``set_feature`` rows new inputs, ``add_node`` rows only grow ``num_nodes``.

        Args:
            batch: A validated update batch.
            first_offset: Log offset of its first row (``-1`` if not from a log).
            arrival_ms: Wall-clock arrival (ms) of every row, for latency.
        """
        u = decode_updates(batch)
        is_edge = (u.kind == UpdateKind.ADD_EDGE) | (u.kind == UpdateKind.REMOVE_EDGE)
        is_set = u.kind == UpdateKind.SET_FEATURE
        top = max(
            int(u.src.max(initial=-1)),
            int(u.dst.max(initial=-1)),
            int(u.node.max(initial=-1)),
        )
        rows = len(u)
        arrivals = np.full(rows, -1 if arrival_ms is None else arrival_ms, np.int64)
        order = np.concatenate(  # attached: edge ops, then inputs, then the rest
            [
                np.flatnonzero(is_edge),
                np.flatnonzero(is_set),
                np.flatnonzero(~(is_edge | is_set)),
            ]
        )
        return cls(
            src=u.src[is_edge],
            dst=u.dst[is_edge],
            count=np.where(u.kind[is_edge] == UpdateKind.ADD_EDGE, 1, -1),
            nodes=u.node[is_set],
            values=u.feature[is_set],
            num_nodes=top + 1,
            updates=rows,
            arrivals=arrivals[order],
            first_offset=first_offset,
            end_offset=first_offset + rows if first_offset >= 0 else -1,
            attached=True,
        )

    @classmethod
    def concat(cls, parts: Sequence[LayerDelta]) -> LayerDelta:
        """Join records in order (edge ops and input rows keep their order)."""
        if not parts:
            return cls()
        if len(parts) == 1:
            return parts[0]
        widths = {p.values.shape[1] for p in parts if p.values.shape[0]}
        width = widths.pop() if len(widths) == 1 else 0
        values = [p.values for p in parts if p.values.shape[0]]
        firsts = [p.first_offset for p in parts if p.first_offset >= 0]
        # an empty record (a fresh buffer) carries nothing to attach
        attached = all(p.attached for p in parts if p.updates or not p.is_empty)
        if attached:  # keep the layout: every edge op's, every row's, the rest
            pieces = [p._arrival_parts() for p in parts]
            arrivals = np.concatenate([piece[k] for k in range(3) for piece in pieces])
        else:
            arrivals = np.concatenate([p.arrivals for p in parts])
        return cls(
            src=np.concatenate([p.src for p in parts]),
            dst=np.concatenate([p.dst for p in parts]),
            count=np.concatenate([p.count for p in parts]),
            nodes=np.concatenate([p.nodes for p in parts]),
            values=np.concatenate(values) if values else np.zeros((0, width)),
            num_nodes=max(p.num_nodes for p in parts),
            updates=sum(p.updates for p in parts),
            arrivals=arrivals,
            first_offset=min(firsts) if firsts else -1,
            end_offset=max(p.end_offset for p in parts),
            attached=attached,
        )

    def _arrival_parts(self) -> tuple[Int64Array, Int64Array, Int64Array]:
        """Attached arrivals split into (edge ops, input rows, the rest)."""
        e, r = self.num_edge_ops, self.num_rows
        return self.arrivals[:e], self.arrivals[e : e + r], self.arrivals[e + r :]

    # ------------------------------------------------------------------ views
    @property
    def num_edge_ops(self) -> int:
        """Edge operation rows (not copies)."""
        return int(self.src.shape[0])

    @property
    def num_rows(self) -> int:
        """Input rows."""
        return int(self.nodes.shape[0])

    @property
    def is_empty(self) -> bool:
        """No edge operation and no input row."""
        return self.num_edge_ops == 0 and self.num_rows == 0

    def split(
        self, edge_mask: npt.NDArray[np.bool_], row_mask: npt.NDArray[np.bool_]
    ) -> tuple[LayerDelta, LayerDelta]:
        """Split into (selected, rest) by masks over edge ops and input rows.

        Offsets go with the selected part only when everything is selected. The
        updates and arrivals of an attached record follow their operations (those
        of ``add_node`` rows stay with the rest); otherwise they stay with the rest
        until it is all selected, so a partial flush never claims updates it did
        not apply.
        """
        take_all = bool(edge_mask.all() and row_mask.all())
        if take_all:
            return self, LayerDelta(num_nodes=self.num_nodes)
        if self.attached:
            edges, rows, other = self._arrival_parts()
            mine = np.concatenate([edges[edge_mask], rows[row_mask]])
            left = np.concatenate([edges[~edge_mask], rows[~row_mask], other])
        else:
            mine, left = _EMPTY, self.arrivals

        def part(
            e: np.ndarray, r: np.ndarray, arrivals: Int64Array, rest: bool
        ) -> LayerDelta:
            return LayerDelta(
                src=self.src[e],
                dst=self.dst[e],
                count=self.count[e],
                nodes=self.nodes[r],
                values=self.values[r],
                num_nodes=self.num_nodes,
                updates=int(arrivals.shape[0])
                if self.attached
                else (self.updates if rest else 0),
                arrivals=arrivals,
                first_offset=self.first_offset if rest else -1,
                end_offset=self.end_offset if rest else -1,
                attached=self.attached,
            )

        return part(edge_mask, row_mask, mine, False), part(
            ~edge_mask, ~row_mask, left, True
        )

    # ------------------------------------------------------------------ wire
    def to_wire(self) -> dict[str, Any]:
        """A dict of numpy arrays and ints (the process executor's wire format)."""
        return {
            "src": self.src,
            "dst": self.dst,
            "count": self.count,
            "nodes": self.nodes,
            "values": self.values,
            "num_nodes": self.num_nodes,
            "updates": self.updates,
            "arrivals": self.arrivals,
            "first_offset": self.first_offset,
            "end_offset": self.end_offset,
            "attached": self.attached,
        }

    @classmethod
    def from_wire(cls, item: dict[str, Any]) -> LayerDelta:
        """Inverse of :meth:`to_wire`."""
        return cls(
            src=_ids(item["src"]),
            dst=_ids(item["dst"]),
            count=_ids(item["count"]),
            nodes=_ids(item["nodes"]),
            values=np.asarray(item["values"]),
            num_nodes=int(item["num_nodes"]),
            updates=int(item["updates"]),
            arrivals=_ids(item["arrivals"]),
            first_offset=int(item["first_offset"]),
            end_offset=int(item["end_offset"]),
            attached=bool(item.get("attached", False)),
        )

    def __repr__(self) -> str:
        return (
            f"LayerDelta(edge_ops={self.num_edge_ops}, rows={self.num_rows}, "
            f"num_nodes={self.num_nodes}, updates={self.updates})"
        )
