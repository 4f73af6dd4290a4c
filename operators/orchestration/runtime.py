"""Run a batch plan on a mesh: a key-value store with READ / UPDATE / RMW batches.

One batch is rounds 1-3 of tdorch.md §3, on every rank (SPMD):

1. every rank sends each owner its pushed payloads (or combined deltas) and its
   pull requests;
2. owners run pushed tasks against the batch's snapshot and send the results
   back, with a copy of the data for every pull (down the fan-out tree of
   :mod:`.tree` when more than F ranks asked); tree nodes forward copies in
   ``max_depth - 1`` further rounds; requesters run pulled groups on the copy;
3. (``read_update`` only) the deltas of pulled groups go back to the owner,
   folded up the tree.

Owners apply deltas per sender in sender-rank order and serialise RMW tasks in
``(origin rank, sequence)`` order, so results never depend on arrival order
(pitfall 5). With exact arithmetic (integer-valued payloads, or min / max) a
batch gives the same bits on any number of ranks as on one.

>>> from strata.engine.mesh.sim import run_sim
>>> def go(mesh):
...     store = KeyValueStore(n_keys=10, width=2, task_width=1, rank=mesh.rank,
...                           size=mesh.size)
...     keys = np.array([3, 3, 3, 7]) if mesh.rank == 0 else np.array([3])
...     batch = Batch("read", keys, np.ones((keys.size, 1)))
...     return run_batch(mesh, store, batch, PushPull(k=2)).results[:, 0].tolist()
>>> run_sim(go, 2)
[[43.0, 43.0, 43.0, 99.0], [43.0]]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from strata.engine.mesh.base import Mesh, Tag
from strata.operators.orchestration.plan import (
    BatchPlan,
    CombineOp,
    FloatArray,
    IntArray,
    PushPull,
    Strategy,
    TaskKind,
    combine,
    fold,
    group_by_key,
    hash_owner,
)
from strata.operators.orchestration.tree import (
    children,
    depth_of,
    max_depth,
    tree_members,
)

_UFUNC = {"sum": np.add, "min": np.minimum, "max": np.maximum}
_EMPTY_I = np.zeros(0, np.int64)

#: The RMW task: ``x <- RMW_DECAY * x + payload`` (order matters).
RMW_DECAY = 0.5


def initial_rows(keys: npt.ArrayLike, width: int) -> FloatArray:
    """Deterministic integer-valued start rows: ``row[k, j] = (7k + j) mod 101``.

    >>> initial_rows([0, 1], 3).tolist()
    [[0.0, 1.0, 2.0], [7.0, 8.0, 9.0]]
    """
    k = np.asarray(keys, dtype=np.int64)
    return ((k[:, None] * 7 + np.arange(width)) % 101).astype(np.float64)


def read_value(rows: FloatArray, payloads: FloatArray) -> FloatArray:
    """A READ task's result ``f(data, payload) = data[:T] * payload + data[-T:]``."""
    t = payloads.shape[1]
    return np.asarray(rows[:, :t] * payloads + rows[:, rows.shape[1] - t :])


def wire_sizes(width: int, task_width: int, reads: bool) -> dict[str, int]:
    """The byte sizes the planner's break-even K sees, as :func:`run_batch` sends them.

    A pushed task carries its key and payload, a result ``task_width`` values, a
    pull request one key, a copy the row.

    >>> wire_sizes(8, 1, True)
    {'data_bytes': 64, 'task_bytes': 16, 'result_bytes': 8, 'header_bytes': 8}
    """
    return {
        "data_bytes": 8 * width,
        "task_bytes": 8 + 8 * task_width,
        "result_bytes": 8 * task_width if reads else 0,
        "header_bytes": 8,
    }


class KeyValueStore:
    """One rank's share of ``n_keys`` fixed-width float64 rows.

    Key k (``0 <= k < n_keys``) lives at ``owner(k) = hash(k) mod size``, or at
    ``book[k]`` when a placement book is given. Rows are ``width`` float64 values
    (D = 8 width bytes); tasks carry ``task_width`` values (T = 8 task_width).

    Attributes:
        keys: The keys this rank owns, ascending.
        rows: Their rows, ``(len(keys), width)``.
    """

    def __init__(
        self,
        n_keys: int,
        width: int,
        task_width: int,
        rank: int,
        size: int,
        book: IntArray | None = None,
    ) -> None:
        if not 1 <= task_width <= width:
            raise ValueError("task_width must be between 1 and width")
        self.n_keys, self.width, self.task_width = n_keys, width, task_width
        self.rank, self.size, self.book = rank, size, book
        all_keys = np.arange(n_keys, dtype=np.int64)
        self.keys: IntArray = all_keys[self.owners(all_keys) == rank]
        self.rows: FloatArray = initial_rows(self.keys, width)

    def owners(self, keys: npt.ArrayLike) -> IntArray:
        """Owner rank of each key."""
        k = np.asarray(keys, dtype=np.int64)
        if self.book is not None:
            return np.asarray(self.book[k], dtype=np.int64)
        return hash_owner(k, self.size)

    def locate(self, keys: npt.ArrayLike) -> IntArray:
        """Row index of each owned key."""
        k = np.asarray(keys, dtype=np.int64)
        at = np.searchsorted(self.keys, k).astype(np.int64)
        if k.size and (at.max() >= self.keys.size or (self.keys[at] != k).any()):
            raise KeyError(f"rank {self.rank} does not own every key it was sent")
        return at


@dataclass(frozen=True)
class Batch:
    """One rank's tasks for one batch, in sequence order.

    Attributes:
        kind: What every task does (tdorch.md §2).
        keys: Each task's key.
        payloads: ``(len(keys), task_width)`` float64.
        op: The UPDATE fold (``read_update`` always sums).
    """

    kind: TaskKind
    keys: IntArray
    payloads: FloatArray
    op: CombineOp = "sum"


@dataclass(slots=True)
class Counters:
    """What one rank did in one batch (the cost model predicts the same numbers).

    Attributes:
        tasks_run: Tasks run here (local, pushed here, pulled) plus deltas applied.
        pushed_sent: Tasks (or combined deltas) pushed to owners.
        results_sent: READ results returned to origins.
        requests_sent: Pull requests sent.
        copies_sent: Data copies sent (answers and tree forwards).
        deltas_sent: Deltas of pulled groups sent towards owners.
        max_copies_per_key: Most copies of one key this rank sent.
        payload_bytes: Array bytes sent to other ranks (no framing).
        rounds: Exchanges this batch used.
    """

    tasks_run: int = 0
    pushed_sent: int = 0
    results_sent: int = 0
    requests_sent: int = 0
    copies_sent: int = 0
    deltas_sent: int = 0
    max_copies_per_key: int = 0
    payload_bytes: int = 0
    rounds: int = 0


@dataclass
class BatchOutcome:
    """A batch's results on one rank.

    Attributes:
        results: READ results ``(len(keys), task_width)`` in task order (None for
            UPDATE and RMW batches).
        counters: What this rank did.
        plan: The plan it ran.
    """

    results: FloatArray | None
    counters: Counters
    plan: BatchPlan


def _split(owner: IntArray, size: int) -> list[IntArray]:
    """Positions of ``owner`` grouped by value 0..size-1 (stable)."""
    order = np.argsort(owner, kind="stable").astype(np.int64)
    bounds = np.searchsorted(owner[order], np.arange(size + 1))
    return [order[bounds[p] : bounds[p + 1]] for p in range(size)]


class _Exchange:
    """Counts what a rank sends through its mesh."""

    def __init__(self, mesh: Mesh, superstep: int, counters: Counters) -> None:
        self.mesh, self.superstep, self.counters = mesh, superstep, counters
        self.round = 0

    def __call__(self, out: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        self.round += 1
        self.counters.rounds += 1
        me = self.mesh.rank
        self.counters.payload_bytes += sum(
            a.nbytes for p, arrays in enumerate(out) if p != me for a in arrays
        )
        return self.mesh.exchange(out, Tag(self.superstep, self.round))


def run_batch(
    mesh: Mesh,
    store: KeyValueStore,
    batch: Batch,
    strategy: Strategy | None = None,
    *,
    superstep: int = 0,
) -> BatchOutcome:
    """Run one batch on every rank of ``mesh`` (call it on every rank).

    Args:
        mesh: This rank's mesh end.
        store: This rank's share of the data (updated in place).
        batch: This rank's tasks.
        strategy: How to orchestrate (default :class:`PushPull`).
        superstep: Tag of the batch; increase it from batch to batch.
    """
    strategy = strategy or PushPull()
    rank, size = mesh.rank, mesh.size
    kind, tw, width = batch.kind, store.task_width, store.width
    keys = np.asarray(batch.keys, dtype=np.int64)
    pay = np.asarray(batch.payloads, dtype=np.float64).reshape(keys.size, tw)
    reads = kind in ("read", "read_update")
    plan = strategy.plan(
        keys,
        store.owners(keys),
        rank,
        size,
        kind,
        **wire_sizes(width, tw, reads),
    )
    c = Counters()
    ex = _Exchange(mesh, superstep, c)
    g, d = plan.groups, plan.decision
    depth = max_depth(size, plan.fanout)
    fanout = plan.fanout if depth > 1 else None
    results = np.zeros((keys.size, tw)) if reads else None
    op: CombineOp = "sum" if kind == "read_update" else batch.op
    task_group = g.inverse
    grouped = g.order  # tasks grouped by key, input order within a key

    # Per-sender deltas (RMW: tasks) that the owner applies in sender-rank order.
    pending: list[list[tuple[IntArray, FloatArray]]] = [[] for _ in range(size)]

    # ---- keys this rank owns
    local_tasks = grouped[d.local[task_group[grouped]]]
    c.tasks_run += local_tasks.size
    if results is not None and local_tasks.size:
        rows = store.rows[store.locate(keys[local_tasks])]
        results[local_tasks] = read_value(rows, pay[local_tasks])
    if kind != "read" and local_tasks.size:
        lk, lv = keys[local_tasks], pay[local_tasks]
        pending[rank].append((lk, lv) if kind == "rmw" else combine(lk, lv, op))

    # ---- round 1: pushed payloads (or one delta per key) and pull requests
    if plan.combined:
        deltas = fold(pay, g, op)
        pushed_groups = np.flatnonzero(d.push)
        by_peer = _split(plan.owners[pushed_groups], size)
        push_msgs = [
            (g.keys[pushed_groups[i]], deltas[pushed_groups[i]]) for i in by_peer
        ]
        pushed_by_peer = [_EMPTY_I] * size
    else:
        pushed = grouped[d.push[task_group[grouped]]]
        pushed_by_peer = [
            pushed[i] for i in _split(plan.owners[task_group[pushed]], size)
        ]
        push_msgs = [(keys[t], pay[t]) for t in pushed_by_peer]
    pulled_groups = np.flatnonzero(d.pull)
    asked_by_peer = [pulled_groups[i] for i in _split(plan.owners[pulled_groups], size)]
    out: list[list[np.ndarray]] = [[] for _ in range(size)]
    for p in range(size):
        if p != rank:
            out[p] = [push_msgs[p][0], push_msgs[p][1], g.keys[asked_by_peer[p]]]
            c.pushed_sent += push_msgs[p][0].size
            c.requests_sent += asked_by_peer[p].size
    incoming = ex(out)

    # ---- owner: run pushed tasks, keep deltas, answer pulls
    out = [[] for _ in range(size)]
    requests: list[IntArray] = [_EMPTY_I] * size
    for s in range(size):
        if s == rank:
            continue
        pk, pv, requests[s] = incoming[s]
        c.tasks_run += pk.size
        if kind == "rmw":
            pending[s].append((pk, pv))
        elif kind != "read":
            pending[s].append(combine(pk, pv, op))
        res = read_value(store.rows[store.locate(pk)], pv) if reads else pv[:0, :0]
        out[s] = [np.ascontiguousarray(res)]
        c.results_sent += res.shape[0]
    if not reads:  # UPDATE and RMW never pull and return nothing: one round
        _apply(store, kind, op, pending)
        return BatchOutcome(None, c, plan)
    _answer_pulls(store, requests, fanout, out, c)

    # ---- round 2 (+ tree forwards): results and copies
    copy_rows = np.zeros((len(g), width))
    incoming = ex(out)
    for p in range(size):
        if p == rank:
            continue
        res, direct, pos = incoming[p][:3]
        if results is not None and pushed_by_peer[p].size:
            results[pushed_by_peer[p]] = res
        asked = asked_by_peer[p]
        if direct.shape[0]:
            copy_rows[asked[pos] if pos.size else asked] = direct
    received = _received(incoming, rank, 3)
    mine = [received]
    for _ in range(depth - 1):
        out = [[] for _ in range(size)]
        _send_down(received, received.node, fanout or 1, out, c)
        received = _received(ex(out), rank, 0)
        mine.append(received)
    for items in mine:
        if items.keys.size:
            copy_rows[np.searchsorted(g.keys, items.keys)] = items.rows

    # ---- requester: run pulled groups on the copies
    pulled = grouped[d.pull[task_group[grouped]]]
    c.tasks_run += pulled.size
    if results is not None and pulled.size:
        results[pulled] = read_value(copy_rows[task_group[pulled]], pay[pulled])

    # ---- round 3 (read_update): deltas of pulled groups, folded up the tree
    if kind == "read_update":
        dk, dv = combine(keys[pulled], pay[pulled], "sum")
        _merge_up(store, ex, mine, dk, dv, depth, fanout or 1, pending, c)

    _apply(store, kind, op, pending)
    return BatchOutcome(results, c, plan)


@dataclass(frozen=True)
class _Items:
    """Tree copies: one per key, with the key's requesters in tree order."""

    keys: IntArray
    rows: FloatArray
    counts: IntArray  # requesters of each key (R); its tree has R + 1 nodes
    members: IntArray  # the requesters, concatenated in tree order
    node: IntArray  # the holding rank's heap node in each key's tree

    @property
    def starts(self) -> IntArray:
        return np.cumsum(self.counts) - self.counts


def _segments(starts: IntArray, counts: IntArray) -> IntArray:
    """Concatenated ``arange(starts[i], starts[i] + counts[i])``."""
    total = int(counts.sum())
    offs = np.cumsum(counts) - counts
    return np.repeat(starts - offs, counts) + np.arange(total, dtype=np.int64)


def _received(
    incoming: Sequence[Sequence[np.ndarray]], rank: int, start: int
) -> _Items:
    """Tree items (``[keys, rows, member bitmaps]`` at ``start`` of each message).

    A copy carries its tree's requesters as a bitmap of ranks (``ceil(P / 8)``
    bytes); every node rebuilds the tree order from it with ``hash(k, rank)``.
    """
    parts = [m[start : start + 3] for p, m in enumerate(incoming) if p != rank]
    parts = [part for part in parts if len(part) == 3]
    if not parts:
        return _Items(_EMPTY_I, np.zeros((0, 0)), _EMPTY_I, _EMPTY_I, _EMPTY_I)
    keys = np.concatenate([p[0] for p in parts]).astype(np.int64)
    rows = np.concatenate([p[1] for p in parts])
    bits = np.concatenate([p[2] for p in parts])
    by_key = np.argsort(keys, kind="stable")  # a rank holds one copy of a key
    keys, rows, bits = keys[by_key], rows[by_key], bits[by_key]
    item, member = np.nonzero(np.unpackbits(bits, axis=1))
    perm = tree_members(keys[item], member)  # by key (= item), then tree order
    members = member[perm].astype(np.int64)
    counts = np.bincount(item, minlength=keys.size).astype(np.int64)
    hit = np.flatnonzero(members == rank)
    node = np.zeros(keys.size, np.int64)
    seg = item[perm][hit]
    node[seg] = hit - (np.cumsum(counts) - counts)[seg] + 1
    return _Items(keys, rows, counts, members, node)


def _send_down(
    items: _Items, node: IntArray, fanout: int, out: list[list[np.ndarray]], c: Counters
) -> None:
    """Send each item's copy to the children of ``node`` (3 arrays to such peers)."""
    size = len(out)
    which, child = children(node, items.counts + 1, fanout)
    dest = items.members[items.starts[which] + child - 1]
    for p, sel in enumerate(_split(dest, size)):
        if not sel.size:
            continue  # no tree arrays for this peer (a rank is never its own child)
        w = which[sel]
        bits = np.zeros((w.size, size), np.bool_)
        at = np.repeat(np.arange(w.size), items.counts[w])
        bits[at, items.members[_segments(items.starts[w], items.counts[w])]] = True
        out[p].extend([items.keys[w], items.rows[w], np.packbits(bits, axis=1)])
    c.copies_sent += int(dest.size)
    if which.size:
        c.max_copies_per_key = max(c.max_copies_per_key, int(np.bincount(which).max()))


def _answer_pulls(
    store: KeyValueStore,
    requests: list[IntArray],
    fanout: int | None,
    out: list[list[np.ndarray]],
    c: Counters,
) -> None:
    """Owner: a copy for each pull; keys asked by more than F ranks go down a tree.

    Each peer's message gets ``[direct rows, their positions in its request
    list (empty: all, in order)]`` and, if it is a tree child, ``[keys, rows,
    member bitmaps]``.
    """
    size, rank = store.size, store.rank
    every = np.concatenate(requests)
    who = np.repeat(np.arange(size, dtype=np.int64), [r.size for r in requests])
    grp = group_by_key(every)
    hot_keys = grp.keys[grp.counts > fanout] if fanout is not None else _EMPTY_I
    cold = grp.counts if fanout is None else grp.counts[grp.counts <= fanout]
    if cold.size:
        c.max_copies_per_key = max(c.max_copies_per_key, int(cold.max()))
    for s in range(size):
        if s == rank:
            continue
        direct = np.flatnonzero(~np.isin(requests[s], hot_keys))
        rows = store.rows[store.locate(requests[s][direct])]
        pos = _EMPTY_I if direct.size == requests[s].size else direct
        out[s].extend([rows, pos])
        c.copies_sent += direct.size
    hot = np.isin(every, hot_keys)
    hk, hw = every[hot], who[hot]
    perm = tree_members(hk, hw)
    tree = group_by_key(hk[perm])
    rows = store.rows[store.locate(tree.keys)]
    items = _Items(
        tree.keys, rows, tree.counts, hw[perm], np.zeros(len(tree), np.int64)
    )
    _send_down(items, items.node, fanout or 1, out, c)


def _merge_up(
    store: KeyValueStore,
    ex: _Exchange,
    mine: list[_Items],
    keys: IntArray,
    deltas: FloatArray,
    depth: int,
    fanout: int,
    pending: list[list[tuple[IntArray, FloatArray]]],
    c: Counters,
) -> None:
    """Send pulled groups' deltas to their parents, deepest tree level first."""
    rank, size = store.rank, store.size
    acc = deltas.copy()
    parent = store.owners(keys)
    level = np.ones(keys.size, np.int64)
    for items in mine:
        if not items.keys.size:
            continue
        at = np.searchsorted(keys, items.keys)
        up = (items.node - 1) // fanout
        interior = up > 0
        par = np.asarray(parent[at])
        par[interior] = items.members[items.starts[interior] + up[interior] - 1]
        parent[at] = par
        level[at] = depth_of(items.node, fanout)
    for lv in range(depth, 0, -1):
        out: list[list[np.ndarray]] = [[] for _ in range(size)]
        now = np.flatnonzero(level == lv)
        for p, sel in enumerate(_split(parent[now], size)):
            if p != rank:
                out[p] = [keys[now[sel]], np.ascontiguousarray(acc[now[sel]])]
                c.deltas_sent += sel.size
        incoming = ex(out)
        for s in range(size):
            if s == rank:
                continue
            k, v = incoming[s]
            c.tasks_run += k.size
            owned = store.owners(k) == rank
            if owned.any():
                pending[s].append((k[owned], v[owned]))
            if (~owned).any():
                at = np.searchsorted(keys, k[~owned])
                acc[at] += v[~owned]


def _apply(
    store: KeyValueStore,
    kind: TaskKind,
    op: CombineOp,
    pending: list[list[tuple[IntArray, FloatArray]]],
) -> None:
    """Owner: apply deltas per sender in rank order; RMW in (origin, seq) order."""
    tw = store.task_width
    if kind == "rmw":
        parts = [kv for per_sender in pending for kv in per_sender]
        if not parts:
            return
        k = np.concatenate([p[0] for p in parts])
        v = np.concatenate([p[1] for p in parts])
        g = group_by_key(k)  # stable: per key, (origin rank, seq) order
        loc = store.locate(g.keys)
        for j in range(int(g.counts.max())):
            live = np.flatnonzero(g.counts > j)
            t = g.order[g.starts[live] + j]
            x = store.rows[loc[live], :tw]
            store.rows[loc[live], :tw] = x * RMW_DECAY + v[t]
        return
    ufunc = _UFUNC[op]
    for per_sender in pending:
        for k, v in per_sender:
            loc = store.locate(k)
            store.rows[loc, :tw] = ufunc(store.rows[loc, :tw], v)
