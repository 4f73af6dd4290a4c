"""StreamingLayer: one GNN layer kept exact under edge and input changes (§3.2-3.4).

The layer holds, for every node, its input ``f`` as last applied, whether it is
*live* (has an input), the cached root ``R`` and the aggregator state over its live
in-edges, plus its own copy of the topology (a :class:`~strata.storage.DynamicGraph`).
:meth:`StreamingLayer.apply` is one *flush*: it applies a :class:`LayerDelta` (edge
operations and new inputs) and returns the record for the next layer: the net
topology diff plus the new outputs of every live vertex whose output may have
changed. Invariant after every flush (tested against the batch layers): for every
node ``v``, ``agg[v]`` and ``n[v]`` equal the aggregate of ``MSG(f[u])`` over the
current in-edges ``u -> v`` with ``u`` live.

One flush, with ``P`` the net edge diff and ``C`` the sources whose message changes
(new inputs; for GCN also every node whose in-degree changed, §3.6)::

    apply P to the topology                  (resolving deletes of absent copies)
    S[v] += c * m_old(u)       for (u, v, c) in P         one scatter
    S[v] += m_new(u) - m_old(u) for u in C, v in out(u)   one scatter (new topology)
    dirty = dst(P) | out(C) | C;  emit read(dirty)         one batched read

Using ``m_old`` for ``P`` and replacing over the *new* out-edges adds each new edge
of a changed source exactly once with its new message (§5, pitfall 4). Everything
is vectorised: a flush costs a few numpy/torch calls whatever its size (pitfall 12).

Examples:
    >>> import numpy as np, torch
    >>> from strata.storage import CSRGraph
    >>> from strata.operators.layers import SAGEConv
    >>> from strata.operators.streaming.rules import LayerRule
    >>> _ = torch.manual_seed(0)
    >>> layer = StreamingLayer(LayerRule.from_module(SAGEConv(3, 2)), last=True)
    >>> g = CSRGraph.from_edges(np.array([0, 1]), np.array([1, 2]), num_nodes=3)
    >>> layer.initialize(g, np.eye(3, dtype=np.float32))
    >>> out = layer.apply(LayerDelta.edges([2], [0], [1]))
    >>> out.nodes.tolist(), out.values.shape  # node 0 got an in-edge
    ([0], (1, 2))
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from strata.operators.streaming._kernels import (
    READ_GCN,
    READ_MEAN,
    READ_SUM,
    read_linear,
)
from strata.operators.streaming.aggregators import (
    AGGREGATORS,
    AggState,
    Contribution,
    MaxAggregator,
)
from strata.operators.streaming.delta import Int64Array, LayerDelta
from strata.operators.streaming.items import Placement
from strata.operators.streaming.rules import Float64Array, LayerRule
from strata.operators.streaming.topology import Topology

_ACTIVATIONS = ("relu", "elu", "identity")


@dataclass(frozen=True, slots=True, eq=False)
class _Changes:
    """Sources whose message changes in a flush (see ``StreamingLayer._changes``).

    ``rows`` index ``sources`` (and ``m_old``, ``m_new``, ``live_old``,
    ``turning``); ``cols`` are the destinations of their out-edge copies in the
    new topology. ``r_new`` holds the new roots, the changed inputs first.
    """

    sources: Int64Array
    rows: Int64Array
    cols: Int64Array
    m_old: Float64Array
    m_new: Float64Array
    r_new: np.ndarray
    live_old: np.ndarray
    turning: Int64Array


def activate(h: Float64Array, act: str) -> Float64Array:
    """Apply the model's activation (``relu``, ``elu`` or ``identity``)."""
    if act == "relu":
        return np.maximum(h, 0.0)
    if act == "elu":
        return np.where(h > 0, h, np.expm1(np.minimum(h, 0.0)))
    return h


class StreamingLayer:
    """One incremental layer (see the module docstring).

    Args:
        rule: The layer's message/root/read functions and weights.
        last: Whether this is the model's last layer (no activation after it).
        act: Activation applied to the outputs of non-last layers.
        dtype: dtype of stored inputs and emitted outputs (the model dtype;
            accumulators are float64 regardless).
        placement: Vertex placement when the layer runs as several shards: every
            shard applies every change to its topology, inputs and in-degrees,
            but aggregates and emits only the destinations it owns.
        shard: This shard's index.
    """

    def __init__(
        self,
        rule: LayerRule,
        *,
        last: bool = False,
        act: str = "relu",
        dtype: np.dtype[Any] | type = np.float32,
        placement: Placement | None = None,
        shard: int = 0,
    ) -> None:
        if act not in _ACTIVATIONS:
            raise ValueError(f"act: expected one of {_ACTIVATIONS}, got {act!r}")
        self.rule = rule
        self.placement = placement if placement and placement.shards > 1 else None
        self.shard = shard
        self.last = last
        self.act = act
        self.dtype = np.dtype(dtype)
        self.agg = AGGREGATORS[rule.aggr](rule.msg_dim)
        self.topology = Topology(skips_loops=rule.skips_loops)
        self.num_nodes = 0
        self.f = np.zeros((0, rule.in_dim), dtype=self.dtype)
        self.live = np.zeros(0, dtype=np.bool_)
        self.r = np.zeros((0, rule.root_dim), dtype=self.dtype)
        self.acc: AggState = self.agg.zero()
        self.stats = {"flushes": 0, "agg_rows": 0, "rows_out": 0, "pairs_out": 0}
        bias = rule.bias if rule.bias is not None else np.zeros(rule.out_dim)
        self._bias = np.ascontiguousarray(bias, dtype=np.float64)

    # ------------------------------------------------------------------ setup
    def _grow(self, num_nodes: int) -> None:
        self.topology.grow(num_nodes)
        if num_nodes > self.f.shape[0]:
            capacity = max(num_nodes, 2 * self.f.shape[0])
            n = self.num_nodes
            f = np.zeros((capacity, self.rule.in_dim), dtype=self.dtype)
            live = np.zeros(capacity, dtype=np.bool_)
            r = np.zeros((capacity, self.rule.root_dim), dtype=self.dtype)
            f[:n], live[:n], r[:n] = self.f[:n], self.live[:n], self.r[:n]
            self.f, self.live, self.r = f, live, r
        self.agg.grow(self.acc, num_nodes)
        self.num_nodes = max(self.num_nodes, num_nodes)

    def initialize(
        self,
        graph: Any,
        f: np.ndarray,
        live: np.ndarray | None = None,
    ) -> None:
        """Start from a whole graph and inputs (one vectorised pass, like a forward).

        Args:
            graph: A :class:`~strata.storage.CSRGraph` (the topology at the start).
            f: Layer inputs, one row per node (``[num_nodes, in_dim]``).
            live: Which nodes have an input (default: every row of ``f``).
        """
        n = max(graph.num_nodes, f.shape[0])
        self.topology = Topology.from_graph(graph, skips_loops=self.rule.skips_loops)
        self.num_nodes = 0
        self.f = np.zeros((0, self.rule.in_dim), dtype=self.dtype)
        self.live = np.zeros(0, dtype=np.bool_)
        self.r = np.zeros((0, self.rule.root_dim), dtype=self.dtype)
        self.acc = self.agg.zero()
        self._grow(n)
        rows = f.shape[0]
        self.f[:rows] = f
        self.live[:rows] = True if live is None else np.asarray(live, dtype=np.bool_)
        self.r[:n] = self.rule.root(self.f[:n])
        src, dst = self.topology.edges()
        keep = self.live[src]
        src, dst = src[keep], dst[keep]
        self.acc.counts[:n] = np.bincount(dst, minlength=n)
        m = self._messages(np.arange(n), self.acc.counts[:n])
        self.agg.add(self.acc, Contribution(dst, m, np.zeros_like(dst), rows=src))

    # ------------------------------------------------------------------ queries
    def outputs(self, nodes: Int64Array) -> np.ndarray:
        """Current outputs of ``nodes`` (activated unless last), in ``dtype``.

        Rows of nodes that are not live are meaningless (zero inputs).
        """
        ids = np.asarray(nodes, dtype=np.int64)
        mode = _fused_mode(self.rule, self.act if not self.last else "identity")
        if mode is not None:
            out = np.empty((ids.shape[0], self.rule.out_dim), dtype=self.dtype)
            read_linear(
                out,
                ids,
                self.acc.values,
                self.acc.counts,
                self.r,
                self._bias,
                mode,
                self.rule.loop_weight,
                not self.last and self.act == "relu",
            )
            return out
        h = self.rule.read(
            self.agg.result(self.acc, ids), self.acc.counts[ids], self.r[ids]
        )
        if not self.last:
            h = activate(h, self.act)
        return h.astype(self.dtype, copy=False)

    def live_nodes(self) -> Int64Array:
        """Ids of the live nodes."""
        return np.flatnonzero(self.live[: self.num_nodes])

    def _messages(self, nodes: Int64Array, n: Int64Array) -> Float64Array:
        """Messages of ``nodes`` from their stored inputs (0 for nodes not live)."""
        m = self.rule.message(self.f[nodes], self.r[nodes], n)
        return m * self.live[nodes][:, None]

    # ------------------------------------------------------------------ flush
    def apply(self, delta: LayerDelta) -> LayerDelta:
        """Apply one flush; return the record for the next layer (see module docs)."""
        if delta.num_edge_ops + delta.num_rows >= SERIAL_BELOW:
            return self._apply(delta)
        with numba_threads(1):
            return self._apply(delta)

    def _apply(self, delta: LayerDelta) -> LayerDelta:
        need = max(
            delta.num_nodes,
            int(delta.src.max(initial=-1)) + 1,
            int(delta.dst.max(initial=-1)) + 1,
            int(delta.nodes.max(initial=-1)) + 1,
        )
        self._grow(need)
        changed, values = self._new_inputs(delta)
        psrc, pdst, pcnt = self.topology.apply(delta.src, delta.dst, delta.count)
        asrc, adst, acnt = self.topology.aggregated(psrc, pdst, pcnt)
        src_live = self.live[asrc]
        # m_old of P's sources: inputs and in-degrees are still the old ones here.
        m_pairs = self._messages(asrc, self.acc.counts[asrc])
        ch = self._changes(changed, values, adst, acnt * src_live)
        p_counts = acnt * src_live  # live in-edge changes, per diff pair ...
        c_counts = ch.turning[ch.rows]  # ... and per out-edge of a source turning live
        crows, ccols = ch.rows, ch.cols
        counted: tuple[Int64Array, Int64Array] | None = (p_counts, c_counts)
        if self.placement is not None:
            # A shard keeps in-degrees of every node (GCN reads its sources'), but
            # aggregates, re-reads and emits only the destinations it owns.
            self.agg.count(self.acc, adst, p_counts)
            self.agg.count(self.acc, ccols, c_counts)
            own = self._owned(adst)
            adst, acnt, src_live, m_pairs = (
                adst[own],
                acnt[own],
                src_live[own],
                m_pairs[own],
            )
            own = self._owned(ccols)
            crows, ccols = crows[own], ccols[own]
            counted = None
        if isinstance(self.agg, MaxAggregator):
            self._flush_max(
                adst, acnt, src_live, m_pairs, ch, crows, ccols, counted is not None
            )
        else:
            p_counts = counted[0] if counted else np.zeros_like(adst)
            c_counts = counted[1] if counted else np.zeros_like(ccols)
            self.agg.add(
                self.acc,
                Contribution(adst, m_pairs * acnt[:, None], p_counts),
            )
            self.agg.add(
                self.acc,
                Contribution(ccols, ch.m_new - ch.m_old, c_counts, rows=crows),
            )
        k = changed.shape[0]
        self.f[changed], self.live[changed] = values, True
        self.r[changed] = ch.r_new[:k]
        if isinstance(self.agg, MaxAggregator):
            self._refresh_max(np.concatenate([adst, ccols]))
        self.stats["agg_rows"] += int(adst.shape[0] + ccols.shape[0])
        touched = np.concatenate([adst, ccols, ch.sources])
        if self.placement is not None:
            touched = touched[self._owned(touched)]
            own = self._owned(pdst)
            psrc, pdst, pcnt = psrc[own], pdst[own], pcnt[own]
        return self._emit(delta, psrc, pdst, pcnt, touched)

    def _owned(self, nodes: Int64Array) -> np.ndarray:
        assert self.placement is not None
        return self.placement.owned(nodes, self.shard)

    def _changes(
        self,
        changed: Int64Array,
        values: np.ndarray,
        adst: Int64Array,
        steps: Int64Array,
    ) -> _Changes:
        """Sources whose message changes, their old/new messages and out-edges.

        ``changed`` get new inputs; for a degree-dependent rule (GCN) every node
        whose live in-degree changes joins them with its input unchanged (§3.6).
        ``steps`` are the live in-edge changes of ``adst`` from the diff.
        """
        was_live = self.live[changed]
        rows, cols = self.topology.out_edges(changed)
        turning = (~was_live[rows]).astype(np.int64)  # sources turning live
        degree_keys = np.concatenate([adst, cols[turning > 0]])
        degree_steps = np.concatenate([steps, turning[turning > 0]])
        extra = np.zeros(0, dtype=np.int64)
        if self.rule.degree_dependent and degree_keys.size:
            nodes, sums = _group_sum(degree_keys, degree_steps)
            extra = np.setdiff1d(nodes[sums != 0], changed, assume_unique=True)
            erows, ecols = self.topology.out_edges(extra)
            rows = np.concatenate([rows, erows + changed.shape[0]])
            cols = np.concatenate([cols, ecols])
        sources = np.concatenate([changed, extra])
        n_old = self.acc.counts[sources]
        n_new = n_old + _lookup_sum(degree_keys, degree_steps, sources)
        f_new = np.concatenate([values, self.f[extra]])
        # Roots are stored in the model dtype (half the bytes a re-read touches
        # in float32); messages use the stored, rounded root (GCN), so a later
        # replace takes back exactly what is added here.
        r_new = np.concatenate([self.rule.root(values), self.r[extra]])
        r_new = r_new.astype(self.dtype, copy=False)
        live_new = np.concatenate(
            [np.ones(changed.shape[0], np.bool_), self.live[extra]]
        )
        live_old = np.concatenate([was_live, self.live[extra]])
        return _Changes(
            sources=sources,
            rows=rows,
            cols=cols,
            m_old=self._messages(sources, n_old),
            m_new=self.rule.message(f_new, r_new, n_new) * live_new[:, None],
            r_new=r_new,
            live_old=live_old,
            turning=(live_new & ~live_old).astype(np.int64),
        )

    def _new_inputs(self, delta: LayerDelta) -> tuple[Int64Array, np.ndarray]:
        """New input rows, last per node, without rows that change nothing."""
        if delta.num_rows == 0:
            return np.zeros(0, np.int64), np.zeros((0, self.rule.in_dim), self.dtype)
        # The last row of each node: unique over the reversed order.
        reverse = delta.nodes[::-1]
        nodes, first = np.unique(reverse, return_index=True)
        values = np.asarray(delta.values)[::-1][first].astype(self.dtype, copy=False)
        same = self.live[nodes] & (self.f[nodes] == values).all(axis=1)
        return nodes[~same], values[~same]

    def _emit(
        self,
        delta: LayerDelta,
        psrc: Int64Array,
        pdst: Int64Array,
        pcnt: Int64Array,
        touched: Int64Array,
    ) -> LayerDelta:
        dirty = _unique(touched, self.num_nodes)
        dirty = dirty[self.live[dirty]]
        self.stats["flushes"] += 1
        self.stats["rows_out"] += int(dirty.shape[0])
        self.stats["pairs_out"] += int(psrc.shape[0])
        return LayerDelta(
            src=psrc,
            dst=pdst,
            count=pcnt,
            nodes=dirty,
            values=self.outputs(dirty),
            num_nodes=self.num_nodes,
            updates=delta.updates,
            arrivals=delta.arrivals,
            first_offset=delta.first_offset,
            end_offset=delta.end_offset,
        )

    # ------------------------------------------------------------------ max
    def _flush_max(
        self,
        adst: Int64Array,
        acnt: Int64Array,
        src_live: np.ndarray,
        m_pairs: Float64Array,
        ch: _Changes,
        rows: Int64Array,
        cols: Int64Array,
        counted: bool,
    ) -> None:
        """Max: removals mark, additions raise, replaces raise or mark (§3.3).

        ``rows``/``cols`` are the out-edges of ``ch`` to update; ``counted``: also
        update in-degrees (False when a shard counted them already).
        """
        agg = self.agg
        assert isinstance(agg, MaxAggregator)
        k = 1 if counted else 0
        neg = (acnt < 0) & src_live
        pos = (acnt > 0) & src_live
        agg.remove(self.acc, Contribution(adst[neg], m_pairs[neg], -k * acnt[neg]))
        agg.add(self.acc, Contribution(adst[pos], m_pairs[pos], k * acnt[pos]))
        kept = ch.live_old[rows]  # a live source swaps its message ...
        agg.replace(self.acc, cols[kept], ch.m_new[rows[kept]], ch.m_old[rows[kept]])
        fresh = ch.turning[rows] > 0  # ... one turning live adds it
        counts = np.full(int(fresh.sum()), k, dtype=np.int64)
        agg.add(self.acc, Contribution(cols[fresh], ch.m_new, counts, rows=rows[fresh]))

    def _refresh_max(self, candidates: Int64Array) -> None:
        """Recompute the stale maxima among ``candidates`` from their in-edges."""
        nodes = np.unique(candidates)
        stale = nodes[self.acc.stale[nodes]]
        if stale.size == 0:
            return
        rows, src = self.topology.in_edges(stale)
        live = self.live[src]
        m = self._messages(src[live], self.acc.counts[src[live]])
        assert isinstance(self.agg, MaxAggregator)
        self.agg.refresh(self.acc, stale, Contribution(stale[rows[live]], m))

    # ------------------------------------------------------------------ state
    def snapshot(self) -> dict[str, Any]:
        """The layer's state as arrays and scalars (copies; checkpoint-friendly)."""
        n = self.num_nodes
        state: dict[str, Any] = {
            "num_nodes": n,
            "f": self.f[:n].copy(),
            "live": self.live[:n].copy(),
            "r": self.r[:n].copy(),
            "stats": dict(self.stats),
        }
        for key, value in self.acc.state().items():
            state[f"acc.{key}"] = value[:n]
        for key, value in self.topology.state().items():
            state[f"topology.{key}"] = value
        return state

    def restore(self, state: dict[str, Any]) -> None:
        """Replace the layer's state with a :meth:`snapshot`."""
        n = int(state["num_nodes"])
        prefix = "topology."
        topo = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
        self.topology = Topology.from_state(topo, skips_loops=self.rule.skips_loops)
        self.f = np.array(state["f"], dtype=self.dtype).reshape(n, self.rule.in_dim)
        self.live = np.array(state["live"], dtype=np.bool_)
        self.r = np.array(state["r"], dtype=self.dtype).reshape(n, self.rule.root_dim)
        self.acc = AggState.from_state(
            {k: state[f"acc.{k}"] for k in ("values", "counts", "stale")}
        )
        self.acc.values = self.acc.values.reshape(n, self.rule.msg_dim)
        self.num_nodes = n
        self.stats = {k: int(v) for k, v in dict(state["stats"]).items()}

    def __repr__(self) -> str:
        return f"StreamingLayer({self.rule!r}, num_nodes={self.num_nodes})"


#: A flush of fewer edge operations and input rows than this runs its numba code
#: (the streaming kernels and the topology's) on this thread only. Measured on
#: RMAT-18 at B=100 on the shared 2-core machine: 15.6 ms of CPU per batch on one
#: thread against 47 ms with a 2-thread pool, whose workers, woken by a parallel
#: region, spin and take the core the serial work needs.
SERIAL_BELOW = 1 << 16


@contextmanager
def numba_threads(count: int) -> Iterator[None]:
    """Run the block with at most ``count`` numba threads.

    The setting is per thread, so other threads are not affected.
    """
    before = numba.get_num_threads()
    if count >= before:
        yield
        return
    numba.set_num_threads(count)
    try:
        yield
    finally:
        numba.set_num_threads(before)


def _fused_mode(rule: LayerRule, act: str) -> int | None:
    """The :func:`read_linear` mode of a rule; None: it needs the generic path."""
    if rule.aggr == "max" or rule.normalize or act not in ("relu", "identity"):
        return None
    if rule.kind == "gcn":
        return READ_GCN
    return READ_MEAN if rule.aggr == "mean" else READ_SUM


def _unique(ids: Int64Array, num_nodes: int) -> Int64Array:
    """Sorted unique ids; a dense mark beats hashing once ``ids`` is large."""
    if ids.shape[0] < num_nodes // 16:
        return np.unique(ids)
    mark = np.zeros(num_nodes, dtype=np.bool_)
    mark[ids] = True
    return np.flatnonzero(mark)


def _group_sum(keys: Int64Array, values: Int64Array) -> tuple[Int64Array, Int64Array]:
    """Unique keys and the sum of their values."""
    nodes, inverse = np.unique(keys, return_inverse=True)
    sums = np.bincount(inverse, weights=values, minlength=nodes.shape[0])
    return nodes, np.rint(sums).astype(np.int64)


def _lookup_sum(keys: Int64Array, values: Int64Array, query: Int64Array) -> Int64Array:
    """For each ``query`` id, the sum of ``values`` whose key equals it."""
    if keys.size == 0 or query.size == 0:
        return np.zeros(query.shape[0], dtype=np.int64)
    nodes, sums = _group_sum(keys, values)
    pos = np.minimum(np.searchsorted(nodes, query), nodes.shape[0] - 1)
    return np.where(nodes[pos] == query, sums[pos], 0)
