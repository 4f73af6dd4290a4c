"""Per-rank load of a batch: ``load_i = a tasks_i + b bytes_i + c frames_i``.

:func:`model_counts` predicts every rank's tasks, bytes and frames from the
ranks' :class:`~.plan.BatchPlan` objects alone, without running anything (it is
how O1 reaches P = 256); :func:`run_counts` reads the same numbers from a real
run's :class:`~.runtime.Counters` and :class:`~strata.engine.mesh.MeshStats`.
The model mirrors what :func:`~.runtime.run_batch` sends array by array, so
tasks, items and payload bytes agree exactly (tested).

Bytes are payload bytes (array data; frame headers are in ``frames``): a pushed
task or delta carries its key (8) and payload (T), a result R, a request its key
(8), a copy D; a tree copy adds its key and a bitmap of the requesters (P bits).

>>> import numpy as np
>>> from strata.operators.orchestration.plan import HashPush
>>> keys = [np.array([0, 0, 0]), np.array([0])]
>>> plans = [HashPush().plan(k, np.zeros(k.size, np.int64), r, 2, "read")
...          for r, k in enumerate(keys)]
>>> m = model_counts(plans, data_bytes=64, task_bytes=8, result_bytes=8)
>>> m.tasks.tolist(), m.bytes.tolist()
([4, 0], [8, 16])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from strata.engine.mesh.base import MeshStats
from strata.operators.orchestration.plan import BatchPlan, IntArray, group_by_key
from strata.operators.orchestration.runtime import Counters
from strata.operators.orchestration.tree import max_depth, tree_members


@dataclass(frozen=True)
class RankCounts:
    """Counts per rank (arrays of length P) for one batch or a sum of batches.

    Attributes:
        tasks: Tasks run plus deltas applied.
        bytes: Payload bytes sent.
        frames: Messages sent (one per peer per round).
        copies: Data copies sent.
        requests: Pull requests sent.
        max_copies_per_key: Most copies of one key a rank sent.
        rounds: Exchanges per batch.
    """

    tasks: IntArray
    bytes: IntArray
    frames: IntArray
    copies: IntArray
    requests: IntArray
    max_copies_per_key: IntArray
    rounds: int

    def __add__(self, other: RankCounts) -> RankCounts:
        return RankCounts(
            self.tasks + other.tasks,
            self.bytes + other.bytes,
            self.frames + other.frames,
            self.copies + other.copies,
            self.requests + other.requests,
            np.maximum(self.max_copies_per_key, other.max_copies_per_key),
            self.rounds + other.rounds,
        )


@dataclass(frozen=True)
class Weights:
    """Seconds per task (a), per byte (b) and per frame (c); default: task units."""

    a: float = 1.0
    b: float = 0.0
    c: float = 0.0


def load(counts: RankCounts, w: Weights = Weights()) -> np.ndarray:
    """``a tasks + b bytes + c frames`` per rank."""
    return np.asarray(w.a * counts.tasks + w.b * counts.bytes + w.c * counts.frames)


def imbalance(values: np.ndarray) -> float:
    """Max over mean (1.0 is perfectly even; 1.0 for all-zero values).

    >>> imbalance(np.array([1.0, 3.0]))
    1.5
    """
    mean = float(np.mean(values))
    return float(np.max(values)) / mean if mean > 0 else 1.0


def model_counts(
    plans: Sequence[BatchPlan], *, data_bytes: int, task_bytes: int, result_bytes: int
) -> RankCounts:
    """Predict per-rank counts of running ``plans`` (one per rank, in rank order)."""
    size = len(plans)
    kind = plans[0].kind
    reads = kind in ("read", "read_update")
    fanout = plans[0].fanout if max_depth(size, plans[0].fanout) > 1 else None
    depth = max_depth(size, plans[0].fanout)
    key_b, d_b, t_b = 8, data_bytes, task_bytes
    r_b = result_bytes if reads else 0
    tasks = np.zeros(size, np.int64)
    sent = np.zeros(size, np.int64)
    copies = np.zeros(size, np.int64)
    requests = np.zeros(size, np.int64)
    maxc = np.zeros(size, np.int64)
    pk, pr, po = [], [], []  # pulled (key, requester, owner)
    for p in plans:
        g, d, i = p.groups, p.decision, p.rank
        tasks[i] += p.local_tasks() + p.pulled_tasks()
        items = p.pushed_items()
        items[i] = 0
        tasks += items
        sent[i] += int(items.sum()) * (key_b + t_b)
        if reads:
            res = np.bincount(
                p.owners[d.push], weights=g.counts[d.push], minlength=size
            ).astype(np.int64)
            sent += res * r_b
        pulled = np.flatnonzero(d.pull)
        requests[i] += pulled.size
        sent[i] += pulled.size * key_b
        pk.append(g.keys[pulled])
        pr.append(np.full(pulled.size, i, np.int64))
        po.append(p.owners[pulled])
    rounds = 2 + (depth - 1) if reads else 1
    if kind == "read_update":
        rounds += depth  # pulled deltas go up the tree, one level per round
    keys, req, own = np.concatenate(pk), np.concatenate(pr), np.concatenate(po)
    if keys.size:
        grp = group_by_key(keys)
        r_of = grp.counts[grp.inverse]  # requesters of each pair's key
        hot = r_of > fanout if fanout is not None else np.zeros(keys.size, bool)
        # direct copies, plus position arrays where a request list mixes hot and cold
        np.add.at(copies, own[~hot], 1)
        np.add.at(sent, own[~hot], d_b)
        pair = own * size + req
        n_hot = np.bincount(pair[hot], minlength=size * size)
        n_cold = np.bincount(pair[~hot], minlength=size * size)
        mixed = (n_hot > 0) & (n_cold > 0)
        np.add.at(sent, np.arange(size * size) // size, np.where(mixed, n_cold, 0) * 8)
        cold_g = grp.counts <= fanout if fanout is not None else grp.counts > 0
        owner_g = own[grp.order[grp.starts]]
        np.maximum.at(maxc, owner_g[cold_g], grp.counts[cold_g])
        # tree copies: node j (1..R) of key k sends to its children; node 0 = owner
        if hot.any():
            hk, hr, ho = keys[hot], req[hot], own[hot]
            perm = tree_members(hk, hr)
            hk, hr, ho = hk[perm], hr[perm], ho[perm]
            tg = group_by_key(hk)
            big_r = tg.counts[tg.inverse]
            node = np.arange(hk.size) - tg.starts[tg.inverse] + 1
            f = fanout or 1
            kids = np.clip(big_r + 1 - (node * f + 1), 0, f)
            item_b = d_b + 8 + (size + 7) // 8  # key, row, member bitmap
            np.add.at(copies, hr, kids)
            np.add.at(sent, hr, kids * item_b)
            np.maximum.at(maxc, hr, kids)
            root_kids = np.minimum(tg.counts, f)
            owner_of = ho[tg.starts]
            np.add.at(copies, owner_of, root_kids)
            np.add.at(sent, owner_of, root_kids * (d_b + 8 + (size + 7) // 8))
            np.maximum.at(maxc, owner_of, root_kids)
        if kind == "read_update":
            parent = own.copy()
            if hot.any():
                hot_at = np.flatnonzero(hot)[perm]
                up = (node - 1) // f
                inner = up > 0
                parent[hot_at[inner]] = hr[tg.starts[tg.inverse] + up - 1][inner]
            np.add.at(sent, req, key_b + t_b)
            np.add.at(tasks, parent, 1)
    frames = np.full(size, rounds * (size - 1), np.int64)
    return RankCounts(tasks, sent, frames, copies, requests, maxc, rounds)


def run_counts(counters: Sequence[Counters], stats: Sequence[MeshStats]) -> RankCounts:
    """The same counts from a real run (``stats``: each rank's traffic in the batch)."""
    return RankCounts(
        np.array([c.tasks_run for c in counters], np.int64),
        np.array([c.payload_bytes for c in counters], np.int64),
        np.array([s.frames_sent for s in stats], np.int64),
        np.array([c.copies_sent for c in counters], np.int64),
        np.array([c.requests_sent for c in counters], np.int64),
        np.array([c.max_copies_per_key for c in counters], np.int64),
        max(c.rounds for c in counters),
    )
