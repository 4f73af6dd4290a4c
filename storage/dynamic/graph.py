"""DynamicGraph: a directed multigraph that changes, as a CSR base plus deltas.

Semantics (d3gnn.md §3.1): ``add_edge(u, v)`` adds one parallel copy of ``u -> v``;
``remove_edge(u, v)`` removes one copy, and removing an absent edge is a no-op counted
in :attr:`DynamicGraph.dropped_deletes`; adding a node grows ``num_nodes`` (so does an
edge or a feature naming a new id). Updates of one batch apply in row order.

Layout. The base is an immutable :class:`CSRGraph` (its transpose gives in-edges).
Changes since the last compaction are a *delta*: the net copy count per ``(src, dst)``
pair (positive: inserted copies; negative: deleted base copies), kept twice as sorted
int64 keys, ``src << 32 | dst`` for out-neighbours and ``dst << 32 | src`` for
in-neighbours, so one node's delta is one contiguous range. Every query merges base and
delta, so it sees the current graph. ``apply`` is vectorised: a batch costs a few sorts
of its own size plus one ``O(delta)`` array merge, never a Python loop per update.

Compaction folds the delta into a new base (``O(E)``); it runs on :meth:`compact`,
:meth:`snapshot`, or automatically when the delta outgrows
``CompactionPolicy.ratio * num_edges`` (and ``min_delta``), which keeps queries and
merges cheap while amortising the rebuild over many updates.

Examples:
    >>> import numpy as np
    >>> from strata.storage.updates import edge_updates
    >>> from strata.storage.csr import CSRGraph
    >>> g = DynamicGraph(CSRGraph.from_edges(np.array([0, 1]), np.array([1, 2])))
    >>> report = g.apply(edge_updates(np.array([0, 2]), np.array([1, 0]), event_time=0))
    >>> g.out_neighbors(0).tolist(), g.in_neighbors(0).tolist()
    ([1, 1], [2])
    >>> g.apply(edge_updates(np.array([1, 1]), np.array([0, 2]), remove=True,
    ...                      event_time=0)).dropped_deletes
    1
    >>> g.snapshot().indices.tolist(), g.num_edges
    ([1, 1, 0], 3)
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
import pyarrow as pa

from strata.storage._types import IndexArray, Int64Array
from strata.storage.csr import CSRGraph
from strata.storage.dynamic import _pairs as pairs
from strata.storage.dynamic._pairs import PairCounts
from strata.storage.errors import GraphError
from strata.storage.updates import MAX_NODES, UpdateArrays, UpdateKind, decode_updates

_STATE_KEYS = (
    "num_nodes",
    "dropped_deletes",
    "indptr",
    "indices",
    "delta_keys",
    "delta_counts",
)


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """When :meth:`DynamicGraph.apply` folds the delta into a new base.

    Attributes:
        ratio: compact once the delta holds more pairs than ``ratio * base edges``.
        min_delta: ... and more than this many pairs (small graphs rebuild rarely).
        auto: compact automatically; ``False`` leaves it to :meth:`compact`.
    """

    ratio: float = 0.1
    min_delta: int = 1 << 16
    auto: bool = True


@dataclass(frozen=True, slots=True)
class ApplyReport:
    """What one :meth:`DynamicGraph.apply` changed.

    Attributes:
        added_edges: edge copies added.
        removed_edges: edge copies removed.
        dropped_deletes: deletes of absent edges (no-ops).
        added_nodes: growth of ``num_nodes``.
        compacted: whether the call ended with a compaction.
    """

    added_edges: int = 0
    removed_edges: int = 0
    dropped_deletes: int = 0
    added_nodes: int = 0
    compacted: bool = False


def _edge_ops(arrays: UpdateArrays) -> tuple[Int64Array, Int64Array, Int64Array]:
    """Check kinds and ids; return the edge rows' ``(src, dst, step)`` in row order.

    ``step`` is +1 for an add and -1 for a remove.
    """
    where = "DynamicGraph.apply"
    kind = arrays.kind
    is_edge = (kind == UpdateKind.ADD_EDGE) | (kind == UpdateKind.REMOVE_EDGE)
    is_node = (kind == UpdateKind.ADD_NODE) | (kind == UpdateKind.SET_FEATURE)
    if not (is_edge | is_node).all():
        row = int(np.argmax(~(is_edge | is_node)))
        raise GraphError.build(
            "kind", where, "an UpdateKind", f"{int(kind[row])} at row {row}"
        )
    for name, ids, used in (
        ("src", arrays.src, is_edge),
        ("dst", arrays.dst, is_edge),
        ("node", arrays.node, is_node),
    ):
        bad = used & ((ids < 0) | (ids >= MAX_NODES))
        if bad.any():
            row = int(np.argmax(bad))
            raise GraphError.build(
                name, where, f"ids in [0, {MAX_NODES})", f"{int(ids[row])} at row {row}"
            )
    step = np.where(kind[is_edge] == UpdateKind.ADD_EDGE, 1, -1).astype(np.int64)
    return arrays.src[is_edge], arrays.dst[is_edge], step


class DynamicGraph:
    """A mutable directed multigraph: CSR base + sorted insert/delete deltas.

    Args:
        base: the starting graph (weights and edge ids are not carried over);
            default an empty graph.
        num_nodes: at least this many nodes (default: the base's).
        policy: when to compact automatically.

    Raises:
        GraphError: when there would be more than
            ``strata.storage.updates.MAX_NODES`` nodes.
    """

    def __init__(
        self,
        base: CSRGraph | None = None,
        *,
        num_nodes: int = 0,
        policy: CompactionPolicy | None = None,
    ) -> None:
        self.policy = policy or CompactionPolicy()
        base = base or CSRGraph.from_edges(pairs.EMPTY, pairs.EMPTY, num_nodes=0)
        if max(base.num_nodes, num_nodes) > MAX_NODES:
            raise GraphError.build(
                "num_nodes",
                "DynamicGraph",
                f"at most {MAX_NODES} nodes",
                str(max(base.num_nodes, num_nodes)),
            )
        self.dropped_deletes = 0
        self._num_nodes = base.num_nodes
        self._set_base(base)
        self._set_delta(PairCounts())
        self._grow(num_nodes)

    # ------------------------------------------------------------------ internals
    def _set_base(self, base: CSRGraph) -> None:
        src, dst = base.to_coo()
        keys = pairs.pack(src, dst)
        if keys.size > 1 and bool((keys[1:] < keys[:-1]).any()):
            # key lookups need sorted rows; rebuild an unsorted input once
            base = CSRGraph.from_edges(src, dst, base.num_nodes)
            keys = np.sort(keys)
        self._base = base
        self._base_keys = keys

    def _set_delta(self, delta: PairCounts) -> None:
        """Install an out-keyed delta; derive the in-keyed copy and the degrees."""
        self._out_delta = delta
        self._in_delta = delta.swapped()
        capacity = max(self._num_nodes, 1)
        out_deg = np.zeros(capacity, dtype=np.int64)
        in_deg = np.zeros(capacity, dtype=np.int64)
        b = self._base.num_nodes
        out_deg[:b] = self._base.out_degree()
        in_deg[:b] = self._base.in_degree()
        np.add.at(out_deg, pairs.high(delta.keys), delta.counts)
        np.add.at(in_deg, pairs.low(delta.keys), delta.counts)
        self._out_deg, self._in_deg = out_deg, in_deg
        self._num_edges = self._base.num_edges + int(delta.counts.sum())

    def _grow(self, num_nodes: int) -> int:
        """Make sure ``num_nodes`` nodes exist; return how many were added."""
        added = num_nodes - self._num_nodes
        if added <= 0:
            return 0
        if num_nodes > self._out_deg.shape[0]:  # doubling keeps growth amortised O(1)
            capacity = max(num_nodes, 2 * self._out_deg.shape[0])
            for name in ("_out_deg", "_in_deg"):
                old = getattr(self, name)
                new = np.zeros(capacity, dtype=np.int64)
                new[: old.shape[0]] = old
                setattr(self, name, new)
        self._num_nodes = num_nodes
        return added

    def _multiplicity(self, keys: Int64Array) -> Int64Array:
        base = pairs.count_sorted(self._base_keys, keys)
        return base + self._out_delta.lookup(keys)

    def _check_nodes(self, nodes: Int64Array, where: str) -> None:
        bad = (nodes < 0) | (nodes >= self._num_nodes)
        if bad.any():
            pos = int(np.argmax(bad))
            raise GraphError.build(
                "nodes",
                where,
                f"ids in [0, {self._num_nodes})",
                f"{int(nodes[pos])} at position {pos}",
            )

    # ------------------------------------------------------------------ properties
    @property
    def num_nodes(self) -> int:
        """Number of nodes (ids ``0 .. num_nodes - 1``)."""
        return self._num_nodes

    @property
    def num_edges(self) -> int:
        """Number of edges, parallel copies counted."""
        return self._num_edges

    @property
    def delta_size(self) -> int:
        """Distinct ``(src, dst)`` pairs changed since the last compaction."""
        return len(self._out_delta)

    @property
    def base(self) -> CSRGraph:
        """The CSR base as of the last compaction (not the current graph)."""
        return self._base

    # ------------------------------------------------------------------ updating
    def apply(self, batch: pa.RecordBatch | UpdateArrays) -> ApplyReport:
        """Apply an update batch in row order (vectorised).

        ``set_feature`` rows only make their node exist; feature values belong to a
        :class:`~strata.storage.dynamic.features.NodeFeatureTable`.

        Args:
            batch: a batch in the ``strata.storage.updates`` schema, or its
                decoded arrays.

        Returns:
            What changed.

        Raises:
            GraphError: for an unknown kind or an id outside ``[0, MAX_NODES)``;
                the graph is unchanged then.
        """
        arrays = decode_updates(batch) if isinstance(batch, pa.RecordBatch) else batch
        src, dst, step = _edge_ops(arrays)
        kind = arrays.kind
        grows = (kind == UpdateKind.ADD_NODE) | (kind == UpdateKind.SET_FEATURE)
        adds = step > 0
        ids = np.concatenate([src[adds], dst[adds], arrays.node[grows]])
        added_nodes = self._grow(int(ids.max()) + 1) if ids.size else 0
        dropped = self._apply_edges(src, dst, step)
        removes = int(step.shape[0] - adds.sum())
        return ApplyReport(
            added_edges=int(adds.sum()),
            removed_edges=removes - dropped,
            dropped_deletes=dropped,
            added_nodes=added_nodes,
            compacted=self._maybe_compact(),
        )

    def add_edges(self, src: IndexArray, dst: IndexArray) -> ApplyReport:
        """Add one copy of each edge ``src[i] -> dst[i]`` (growing ``num_nodes``)."""
        return self._edges_op(src, dst, UpdateKind.ADD_EDGE)

    def remove_edges(self, src: IndexArray, dst: IndexArray) -> ApplyReport:
        """Remove one copy of each edge, in order; absent ones are counted no-ops."""
        return self._edges_op(src, dst, UpdateKind.REMOVE_EDGE)

    def add_nodes(self, count: int) -> range:
        """Append ``count`` isolated nodes; return their ids."""
        start = self._num_nodes
        if not 0 <= count <= MAX_NODES - start:
            raise GraphError.build(
                "count",
                "DynamicGraph.add_nodes",
                f"0 <= count <= {MAX_NODES - start}",
                str(count),
            )
        self._grow(start + count)
        return range(start, start + count)

    def _edges_op(
        self, src: IndexArray, dst: IndexArray, kind: UpdateKind
    ) -> ApplyReport:
        src64 = np.asarray(src, dtype=np.int64)
        dst64 = np.asarray(dst, dtype=np.int64)
        if src64.shape != dst64.shape or src64.ndim != 1:
            raise GraphError.build(
                "dst", "DynamicGraph", f"shape {src64.shape}", f"shape {dst64.shape}"
            )
        n = src64.shape[0]
        arrays = UpdateArrays(
            kind=np.full(n, kind, dtype=np.int8),
            src=src64,
            dst=dst64,
            node=np.full(n, -1, dtype=np.int64),
            feature=np.zeros((n, 0), dtype=np.float32),
            event_time=np.zeros(n, dtype=np.int64),
        )
        return self.apply(arrays)

    def _apply_edges(self, src: Int64Array, dst: Int64Array, step: Int64Array) -> int:
        """Apply ordered +1/-1 steps per edge; return the number of dropped deletes.

        Per pair, the copy count walks ``m0 + prefix sums`` clamped at zero: a delete
        that would go below zero is dropped. The clamped walk ends at
        ``m0 + total + dropped`` with ``dropped = max(0, -(m0 + lowest prefix))``, so
        each pair needs only its start count, its sum and its lowest prefix sum.
        """
        if src.size == 0:
            return 0
        keys = pairs.pack(src, dst)
        order = np.argsort(keys, kind="stable")  # stable: row order within a pair
        keys, step = keys[order], step[order]
        starts = pairs.group_starts(keys)
        unique = keys[starts]
        total = np.add.reduceat(step, starts)
        dropped = np.zeros(unique.shape[0], dtype=np.int64)
        if (step < 0).any():
            running = np.cumsum(step)
            before = running[starts] - step[starts]  # steps of the pairs before
            sizes = np.diff(np.r_[starts, keys.size])
            lowest = np.minimum.reduceat(running - np.repeat(before, sizes), starts)
            dropped = np.maximum(0, -(self._multiplicity(unique) + lowest))
        net = total + dropped
        changed = net != 0
        unique, net = unique[changed], net[changed]
        if unique.size:
            self._out_delta = self._out_delta.add(unique, net)
            swapped = pairs.swap(unique)
            by_dst = np.argsort(swapped)
            self._in_delta = self._in_delta.add(swapped[by_dst], net[by_dst])
            np.add.at(self._out_deg, pairs.high(unique), net)
            np.add.at(self._in_deg, pairs.low(unique), net)
            self._num_edges += int(net.sum())
        lost = int(dropped.sum())
        self.dropped_deletes += lost
        return lost

    def _maybe_compact(self) -> bool:
        policy = self.policy
        limit = max(policy.min_delta, policy.ratio * self._base.num_edges)
        if policy.auto and self.delta_size > limit:
            self.compact()
            return True
        return False

    # ------------------------------------------------------------------ queries
    def multiplicity(self, src: IndexArray, dst: IndexArray) -> Int64Array:
        """Number of parallel copies of each edge ``src[i] -> dst[i]`` (0 if absent)."""
        src64 = np.asarray(src, dtype=np.int64)
        dst64 = np.asarray(dst, dtype=np.int64)
        out = np.zeros(src64.shape[0], dtype=np.int64)
        inside = (src64 >= 0) & (src64 < self._num_nodes)
        inside &= (dst64 >= 0) & (dst64 < self._num_nodes)
        out[inside] = self._multiplicity(pairs.pack(src64[inside], dst64[inside]))
        return out

    def out_degree(self, nodes: IndexArray | None = None) -> Int64Array:
        """Current out-degree (copies counted) of ``nodes``, or of every node."""
        return self._degree(self._out_deg, nodes)

    def in_degree(self, nodes: IndexArray | None = None) -> Int64Array:
        """Current in-degree (copies counted) of ``nodes``, or of every node."""
        return self._degree(self._in_deg, nodes)

    def _degree(self, degrees: Int64Array, nodes: IndexArray | None) -> Int64Array:
        if nodes is None:
            return degrees[: self._num_nodes].copy()
        ids = np.asarray(nodes, dtype=np.int64)
        self._check_nodes(ids, "DynamicGraph.degree")
        return degrees[ids]

    def out_neighbors(self, node: int) -> Int64Array:
        """Destinations of ``node``'s out-edges, sorted, one entry per copy."""
        return self.out_adjacency(np.array([node], dtype=np.int64))[1]

    def in_neighbors(self, node: int) -> Int64Array:
        """Sources of ``node``'s in-edges, sorted, one entry per copy."""
        return self.in_adjacency(np.array([node], dtype=np.int64))[1]

    def out_adjacency(self, nodes: IndexArray) -> tuple[Int64Array, Int64Array]:
        """Out-neighbours of many nodes at once, as ``(indptr, indices)``.

        Row ``i`` (``indices[indptr[i]:indptr[i + 1]]``) lists the destinations of
        ``nodes[i]``'s out-edges, sorted, one entry per parallel copy.
        """
        ids = np.asarray(nodes, dtype=np.int64)
        self._check_nodes(ids, "DynamicGraph.out_adjacency")
        return _gather(ids, self._base, self._out_delta)

    def in_adjacency(self, nodes: IndexArray) -> tuple[Int64Array, Int64Array]:
        """In-neighbours (sources) of many nodes at once, as ``(indptr, indices)``."""
        ids = np.asarray(nodes, dtype=np.int64)
        self._check_nodes(ids, "DynamicGraph.in_adjacency")
        return _gather(ids, self._base.csc(), self._in_delta)

    def edges(self) -> tuple[Int64Array, Int64Array]:
        """All current edges as ``(src, dst)``, sorted by src then dst."""
        keys = self._out_delta.apply_to(self._base_keys)
        return pairs.high(keys), pairs.low(keys)

    # ------------------------------------------------------------------ compaction
    def compact(self) -> CSRGraph:
        """Fold the delta into a new CSR base (``O(E)``); return the base."""
        if len(self._out_delta) or self._base.num_nodes != self._num_nodes:
            keys = self._out_delta.apply_to(self._base_keys)
            n = self._num_nodes
            indptr = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(np.bincount(pairs.high(keys), minlength=n), out=indptr[1:])
            indices = pairs.low(keys).astype(np.int32)
            self._base = CSRGraph(indptr=indptr, indices=indices, num_nodes=n)
            self._base_keys = keys
            self._set_delta(PairCounts())
        return self._base

    def snapshot(self) -> CSRGraph:
        """The current graph as an immutable :class:`CSRGraph` (compacts first)."""
        return self.compact()

    # ------------------------------------------------------------------ checkpoints
    def state(self) -> dict[str, np.ndarray]:
        """Plain arrays that :meth:`from_state` restores exactly (no compaction).

        Keys: ``num_nodes`` and ``dropped_deletes`` (0-d int64), ``indptr`` and
        ``indices`` (the base), ``delta_keys`` and ``delta_counts`` (the delta, keys
        ``src << 32 | dst``). Base arrays are shared read-only views.
        """
        return {
            "num_nodes": np.array(self._num_nodes, dtype=np.int64),
            "dropped_deletes": np.array(self.dropped_deletes, dtype=np.int64),
            "indptr": self._base.indptr,
            "indices": self._base.indices,
            "delta_keys": self._out_delta.keys.copy(),
            "delta_counts": self._out_delta.counts.copy(),
        }

    @classmethod
    def from_state(
        cls, state: dict[str, np.ndarray], *, policy: CompactionPolicy | None = None
    ) -> DynamicGraph:
        """Rebuild a graph from :meth:`state` arrays.

        Raises:
            GraphError: when arrays are missing or inconsistent (a damaged
                checkpoint); nothing is half-restored.
        """
        where = "DynamicGraph.from_state"
        missing = set(_STATE_KEYS) - set(state)
        if missing:
            raise GraphError.build(
                "state", where, "all state arrays", f"{sorted(missing)} missing"
            )
        indptr = np.asarray(state["indptr"], dtype=np.int64)
        base = CSRGraph(
            indptr=indptr,
            indices=np.asarray(state["indices"]),
            num_nodes=indptr.shape[0] - 1,
        )
        n = int(state["num_nodes"])
        graph = cls(base, num_nodes=n, policy=policy)
        keys = np.asarray(state["delta_keys"], dtype=np.int64)
        counts = np.asarray(state["delta_counts"], dtype=np.int64)
        ok = keys.shape == counts.shape and keys.ndim == 1 and n >= base.num_nodes
        if ok and keys.size:
            ok = bool(np.all(keys[1:] > keys[:-1]) and np.all(counts != 0))
            ok = ok and int(keys[0]) >= 0 and int(pairs.high(keys).max()) < n
            ok = ok and int(pairs.low(keys).max()) < n
            ok = ok and bool(np.all(graph._multiplicity(keys) + counts >= 0))
        if not ok:
            raise GraphError.build(
                "delta_keys",
                where,
                "sorted unique in-range pair keys with nonzero counts that leave no "
                "negative multiplicity",
                f"{keys.shape[0]} keys that do not",
            )
        graph._set_delta(PairCounts(keys, counts))
        graph.dropped_deletes = int(state["dropped_deletes"])
        return graph

    def __repr__(self) -> str:
        return (
            f"DynamicGraph(num_nodes={self._num_nodes}, num_edges={self._num_edges}, "
            f"delta_size={self.delta_size})"
        )


def _gather(
    nodes: Int64Array, base: CSRGraph, delta: PairCounts
) -> tuple[Int64Array, Int64Array]:
    """Rows of ``nodes`` in ``base`` merged with their ``delta`` ranges, as CSR.

    A row with delta entries comes out sorted by neighbour (one entry per copy); a
    row without them is its base row as it is.
    """
    in_base = nodes < base.num_nodes
    clipped = np.minimum(nodes, base.num_nodes)
    starts = np.where(in_base, base.indptr[clipped], 0)
    ends = np.where(in_base, base.indptr[np.minimum(clipped + 1, base.num_nodes)], 0)
    lengths = ends - starts
    lo, hi = delta.rows(nodes)
    indptr = np.zeros(nodes.shape[0] + 1, dtype=np.int64)
    if not (hi > lo).any():  # no delta touches these rows: the base rows as they are
        np.cumsum(lengths, out=indptr[1:])
        return indptr, base.indices[pairs.ranges(starts, lengths)].astype(np.int64)
    # One compiled pass per row (a sort of the row and a merge), not a global sort.
    neighbours = pairs.low(delta.keys)
    sizes = _merged_sizes(starts, lengths, lo, hi, delta.counts)
    np.cumsum(sizes, out=indptr[1:])
    out = np.empty(int(indptr[-1]), dtype=np.int64)
    _merge_rows(
        out, indptr, base.indices, starts, lengths, lo, hi, neighbours, delta.counts
    )
    return indptr, out


@numba.njit(cache=True, nogil=True)
def _merged_sizes(
    starts: np.ndarray,
    lengths: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    counts: np.ndarray,
) -> np.ndarray:  # pragma: no cover - compiled
    """Copies per row once the delta's net counts are added to the base row."""
    sizes = lengths.copy()
    for r in range(starts.shape[0]):
        for k in range(lo[r], hi[r]):
            sizes[r] += counts[k]
    return sizes


@numba.njit(cache=True, nogil=True, parallel=True)
def _merge_rows(
    out: np.ndarray,
    indptr: np.ndarray,
    base_indices: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    neighbours: np.ndarray,
    counts: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Write every row's merged copies into ``out[indptr[r]:indptr[r + 1]]``.

    Delta ranges are sorted by neighbour; a negative count removes that many base
    copies (they exist: the delta never removes more than the base holds).
    """
    for r in numba.prange(starts.shape[0]):  # rows write disjoint ranges
        pos = indptr[r]
        row = base_indices[starts[r] : starts[r] + lengths[r]].astype(np.int64)
        if hi[r] == lo[r]:
            out[pos : pos + row.shape[0]] = row
            continue
        row = np.sort(row)
        i = 0
        k = lo[r]
        while i < row.shape[0] or k < hi[r]:
            if k >= hi[r] or (i < row.shape[0] and row[i] < neighbours[k]):
                v = row[i]
                copies = 0
                while i < row.shape[0] and row[i] == v:
                    copies += 1
                    i += 1
            else:
                v = neighbours[k]
                copies = counts[k]
                k += 1
                while i < row.shape[0] and row[i] == v:
                    copies += 1
                    i += 1
            for _ in range(copies):
                out[pos] = v
                pos += 1
