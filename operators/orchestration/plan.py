"""Batch planning for task-data orchestration: group, combine, decide push or pull.

A rank holds a batch of tasks ``(key, payload)``; every key has an owner rank.
:func:`group_by_key` groups the rank's tasks with one stable sort;
:func:`decide` chooses, per group, to run it here (this rank owns the key), to
*push* it (send the payloads to the owner) or to *pull* it (ask the owner for a
copy of the data and run the group here). The threshold ``K`` comes from the
byte break-even of :func:`break_even_k` (tdorch.md §3).

Everything is numpy over int64 keys: planning never loops over tasks in Python
(tdorch.md pitfall 8). The strategies (:class:`PushPull`, :class:`HashPush`,
:class:`PullAll`) share one interface, ``plan(...) -> BatchPlan``, so the
runtime, the counts-only cost model and the graph kernels make identical
decisions.

>>> keys = np.array([7, 3, 7, 7, 5, 7], dtype=np.int64)
>>> owners = np.array([1, 0, 1, 1, 1, 1], dtype=np.int64)
>>> p = PushPull(k=2).plan(keys, owners, rank=0, size=2, kind="read")
>>> p.groups.keys.tolist(), p.decision.local.tolist(), p.decision.pull.tolist()
([3, 5, 7], [True, False, False], [False, False, True])
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

#: What a task does with its key's data (tdorch.md §2). ``read_update`` reads the
#: batch's snapshot of ``data[k]`` (result to the origin) and adds its payload to it.
TaskKind = Literal["read", "update", "rmw", "read_update"]
#: Commutative, associative folds with an identity.
CombineOp = Literal["sum", "min", "max"]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]

_UFUNC = {"sum": np.add, "min": np.minimum, "max": np.maximum}


def mix64(x: npt.ArrayLike) -> npt.NDArray[np.uint64]:
    """The splitmix64 finaliser: a fast, well-spread 64-bit hash of int keys.

    >>> int(mix64(np.array([0, 1]))[1]) != 1
    True
    """
    z = np.asarray(x).astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        z += np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def hash_owner(keys: npt.ArrayLike, size: int) -> IntArray:
    """Owner rank of each key: ``hash(k) mod size``.

    >>> hash_owner(np.arange(6), 1).tolist()
    [0, 0, 0, 0, 0, 0]
    """
    return (mix64(keys) % np.uint64(size)).astype(np.int64)


@dataclass(frozen=True)
class Groups:
    """Tasks grouped by key (one stable sort).

    Attributes:
        keys: Distinct keys, ascending.
        counts: Tasks per key.
        order: Stable argsort of the input keys: ``input[order]`` is grouped,
            each group in input order.
        starts: Where each group begins in ``order`` (``len(keys)`` entries).
        inverse: The group of each input task (input order).
    """

    keys: IntArray
    counts: IntArray
    order: IntArray
    starts: IntArray
    inverse: IntArray

    def __len__(self) -> int:
        return int(self.keys.shape[0])

    @property
    def offsets(self) -> IntArray:
        """``starts`` with the total appended (``len(keys) + 1`` CSR offsets)."""
        return np.append(self.starts, np.int64(self.order.shape[0]))


def group_by_key(keys: npt.ArrayLike) -> Groups:
    """Group task keys with one stable sort.

    >>> g = group_by_key(np.array([5, 2, 5, 9, 2, 5]))
    >>> g.keys.tolist(), g.counts.tolist(), g.order.tolist(), g.starts.tolist()
    ([2, 5, 9], [2, 3, 1], [1, 4, 0, 2, 5, 3], [0, 2, 5])
    >>> g.inverse.tolist()
    [1, 0, 1, 2, 0, 1]
    """
    k = np.asarray(keys, dtype=np.int64)
    order = np.argsort(k, kind="stable").astype(np.int64)
    sk = k[order]
    n = sk.shape[0]
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Groups(empty, empty, order, empty, empty)
    new = np.empty(n, dtype=np.bool_)
    new[0] = True
    np.not_equal(sk[1:], sk[:-1], out=new[1:])
    starts = np.flatnonzero(new).astype(np.int64)
    counts = np.diff(np.append(starts, np.int64(n))).astype(np.int64)
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return Groups(sk[starts], counts, order, starts, inverse)


def fold(values: np.ndarray, groups: Groups, op: CombineOp) -> np.ndarray:
    """Fold ``values`` (aligned with the tasks ``groups`` was built from) per group.

    Each group is folded in input order, so the result is deterministic.

    >>> g = group_by_key(np.array([4, 1, 4]))
    >>> fold(np.array([1.0, 2.0, 3.0]), g, "sum").tolist()
    [2.0, 4.0]
    """
    v = np.asarray(values)
    if len(groups) == 0:
        return v[:0].copy()
    return np.asarray(_UFUNC[op].reduceat(v[groups.order], groups.starts, axis=0))


def combine(
    keys: npt.ArrayLike, values: npt.ArrayLike, op: CombineOp
) -> tuple[IntArray, np.ndarray]:
    """Fold values by key: distinct keys ascending, and one folded value per key.

    ``values`` has one row (or scalar) per key in ``keys``; each key's values are
    folded in input order by one ``reduceat``, so equal inputs give
    bit-identical results (min and max are exact in any order).

    >>> k, v = combine(np.array([3, 1, 3, 3]), np.array([1.0, 5.0, 2.0, 4.0]), "max")
    >>> k.tolist(), v.tolist()
    ([1, 3], [5.0, 4.0])
    """
    g = group_by_key(keys)
    return g.keys, fold(np.asarray(values), g, op)


def break_even_k(
    data_bytes: int,
    task_bytes: int,
    result_bytes: int,
    header_bytes: int = 16,
    k_max: int = 1 << 20,
    *,
    exact: bool = False,
) -> int:
    """The push/pull threshold ``K = ceil((D + H) / (T + R))``, clamped to [1, k_max].

    Pushing a group of c tasks costs ``c (T + R)`` bytes, pulling costs ``D + H``;
    groups larger than K are cheaper to pull. ``exact=True`` gives the largest
    group that is strictly no dearer to push, ``floor((D + H) / (T + R))``, which
    may be 0 (pull every remote group: data smaller than a task and its result).

    >>> break_even_k(64, 8, 8), break_even_k(8, 8, 8, header_bytes=0)
    (5, 1)
    >>> break_even_k(8, 16, 8, header_bytes=8, exact=True)
    0
    """
    per_task = task_bytes + result_bytes
    if per_task <= 0:
        return k_max
    if exact:
        return min(k_max, (data_bytes + header_bytes) // per_task)
    k = math.ceil((data_bytes + header_bytes) / per_task)
    return max(1, min(k_max, k))


@dataclass(frozen=True)
class Decision:
    """Where each group runs (boolean masks over groups; exactly one is set).

    Attributes:
        local: This rank owns the key: run here.
        push: Send the group (its payloads, or its one combined delta) to the owner.
        pull: Ask the owner for a copy of the data; run the group here.
    """

    local: BoolArray
    push: BoolArray
    pull: BoolArray


def decide(
    counts: npt.ArrayLike,
    owners: npt.ArrayLike,
    rank: int,
    k: int,
    *,
    commutative: bool = True,
    combined: bool = False,
) -> Decision:
    """Push groups of at most ``k`` tasks, pull larger ones (tdorch.md §3).

    Args:
        counts: Tasks per group.
        owners: Owner rank of each group's key.
        rank: This rank.
        k: The threshold; groups with ``count > k`` are pulled (0: pull every
            remote group).
        commutative: False for RMW groups: they cannot run on copies, so every
            remote group is pushed and serialised at the owner (pitfall 3).
        combined: UPDATE groups folded into one delta: pushing one delta is
            never dearer than pulling, so every remote group is pushed.

    >>> d = decide([1, 9, 9], [1, 1, 0], rank=0, k=4)
    >>> d.local.tolist(), d.push.tolist(), d.pull.tolist()
    ([False, False, True], [True, False, False], [False, True, False])
    >>> decide([1, 9], [1, 1], rank=0, k=4, commutative=False).pull.tolist()
    [False, False]
    """
    c = np.asarray(counts, dtype=np.int64)
    local = np.asarray(owners, dtype=np.int64) == rank
    remote = ~local
    if combined or not commutative:
        return Decision(local, remote, np.zeros_like(local))
    big = c > k
    return Decision(local, remote & ~big, remote & big)


@dataclass(frozen=True)
class BatchPlan:
    """One rank's plan for one batch.

    Attributes:
        rank: The planning rank.
        size: Ranks in the mesh.
        kind: What the tasks do.
        k: The push/pull threshold used (0 when nothing can be pulled).
        combined: Pushed groups travel as one folded delta (UPDATE + combiner).
        fanout: Fan-out of the hot-key tree, or None for no tree.
        groups: The rank's tasks grouped by key.
        owners: Owner rank of each group.
        decision: Local / push / pull per group.
    """

    rank: int
    size: int
    kind: TaskKind
    k: int
    combined: bool
    fanout: int | None
    groups: Groups
    owners: IntArray
    decision: Decision

    def pushed_items(self) -> IntArray:
        """Items pushed to each peer (tasks, or deltas when combined), by rank."""
        per_group = (
            np.ones(len(self.groups), np.int64) if self.combined else self.groups.counts
        )
        w = np.where(self.decision.push, per_group, 0)
        return np.bincount(self.owners, weights=w, minlength=self.size).astype(np.int64)

    def pull_requests(self) -> IntArray:
        """Pull requests (keys) sent to each peer, by rank."""
        return np.bincount(self.owners[self.decision.pull], minlength=self.size).astype(
            np.int64
        )

    def pulled_tasks(self) -> int:
        """Tasks this rank runs itself on pulled copies."""
        return int(self.groups.counts[self.decision.pull].sum())

    def local_tasks(self) -> int:
        """Tasks on keys this rank owns."""
        return int(self.groups.counts[self.decision.local].sum())


def _plan(
    keys: npt.ArrayLike,
    owners: npt.ArrayLike,
    rank: int,
    size: int,
    kind: TaskKind,
    k: int,
    combined: bool,
    fanout: int | None,
) -> BatchPlan:
    g = group_by_key(keys)
    own = np.asarray(owners, dtype=np.int64)
    if own.shape[0] != g.order.shape[0]:
        raise ValueError("owners must give one owner rank per task")
    go = own[g.order[g.starts]] if len(g) else np.zeros(0, np.int64)
    if kind == "update":
        d = decide(g.counts, go, rank, k, combined=True)
    else:
        d = decide(g.counts, go, rank, k, commutative=kind != "rmw")
    return BatchPlan(rank, size, kind, k, combined, fanout, g, go, d)


class Strategy(Protocol):
    """A way to orchestrate a batch: ``plan(...) -> BatchPlan``."""

    @property
    def name(self) -> str:
        """Short label for reports."""
        ...

    def plan(
        self,
        keys: npt.ArrayLike,
        owners: npt.ArrayLike,
        rank: int,
        size: int,
        kind: TaskKind,
        *,
        data_bytes: int = 8,
        task_bytes: int = 8,
        result_bytes: int = 8,
        header_bytes: int = 16,
    ) -> BatchPlan:
        """Plan this rank's tasks (``keys``, with each task's owner rank)."""
        ...


@dataclass(frozen=True)
class PushPull:
    """TD-Orch push-pull: push groups of at most K tasks, pull larger ones.

    Attributes:
        k: The threshold, or ``"auto"`` for :func:`break_even_k` of the batch's
            sizes (spec: ceil, at least 1), or ``"exact"`` for its floor (may be 0).
        fanout: F of the hot-key tree: a key pulled by more than F ranks is
            forwarded down an F-ary tree (tdorch.md §4).

    The spec's optional count round (keys lukewarm on every rank but hot in
    total) is not built: it is off by default there, and O1/O2 run without it.

    >>> PushPull(k="auto").plan(np.array([1]), np.array([1]), 0, 2, "read",
    ...     data_bytes=64, task_bytes=8, result_bytes=8).k
    5
    """

    k: int | Literal["auto", "exact"] = "auto"
    fanout: int = 16

    @property
    def name(self) -> str:
        """Short label for reports."""
        return f"push-pull(K={self.k},F={self.fanout})"

    def plan(
        self,
        keys: npt.ArrayLike,
        owners: npt.ArrayLike,
        rank: int,
        size: int,
        kind: TaskKind,
        *,
        data_bytes: int = 8,
        task_bytes: int = 8,
        result_bytes: int = 8,
        header_bytes: int = 16,
    ) -> BatchPlan:
        """Plan this rank's tasks (see :class:`Strategy`)."""
        if self.k in ("auto", "exact"):
            k = break_even_k(
                data_bytes, task_bytes, result_bytes, header_bytes,
                exact=self.k == "exact",
            )  # fmt: skip
        else:
            k = int(self.k)
        return _plan(keys, owners, rank, size, kind, k, kind == "update", self.fanout)


@dataclass(frozen=True)
class HashPush:
    """Baseline: every task runs at its key's owner (owner-computes).

    Attributes:
        combiner: UPDATE tasks are folded per key before sending (one delta).

    >>> HashPush().plan(np.array([1, 1]), np.array([1, 1]), 0, 2, "read").pushed_items()
    array([0, 2])
    """

    combiner: bool = False

    @property
    def name(self) -> str:
        """Short label for reports."""
        return "hash-push+combiner" if self.combiner else "hash-push"

    def plan(
        self,
        keys: npt.ArrayLike,
        owners: npt.ArrayLike,
        rank: int,
        size: int,
        kind: TaskKind,
        *,
        data_bytes: int = 8,
        task_bytes: int = 8,
        result_bytes: int = 8,
        header_bytes: int = 16,
    ) -> BatchPlan:
        """Plan this rank's tasks (see :class:`Strategy`)."""
        combined = self.combiner and kind == "update"
        g = group_by_key(keys)
        own = np.asarray(owners, dtype=np.int64)
        go = own[g.order[g.starts]] if len(g) else np.zeros(0, np.int64)
        local = go == rank
        d = Decision(local, ~local, np.zeros_like(local))
        return BatchPlan(rank, size, kind, 0, combined, None, g, go, d)


@dataclass(frozen=True)
class PullAll:
    """Baseline: every remote read pulls a copy of the data.

    UPDATE batches push one combined delta per key (pulling them would only add
    a round trip); RMW tasks are always pushed.

    >>> PullAll().plan(np.array([1]), np.array([1]), 0, 2, "read").pull_requests()
    array([0, 1])
    """

    @property
    def name(self) -> str:
        """Short label for reports."""
        return "pull-all"

    def plan(
        self,
        keys: npt.ArrayLike,
        owners: npt.ArrayLike,
        rank: int,
        size: int,
        kind: TaskKind,
        *,
        data_bytes: int = 8,
        task_bytes: int = 8,
        result_bytes: int = 8,
        header_bytes: int = 16,
    ) -> BatchPlan:
        """Plan this rank's tasks (see :class:`Strategy`)."""
        # K = 0: every remote group of one or more tasks is pulled.
        return _plan(keys, owners, rank, size, kind, 0, kind == "update", None)
