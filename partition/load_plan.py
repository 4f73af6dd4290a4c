r"""Deduplicated loading plan for chunked full-graph training (``hongtu.md`` §3.6).

At step s worker g runs a chunk whose sources are ``S[g][s]`` (sorted global ids).
A row crosses the host link once per run of consecutive steps in which some worker
needs it; every other use is served from device memory:

* keep: ``S[g][s] ∩ prev[g]`` stays on worker g (intra-worker reuse);
* a row nobody holds (``U_s \\ R``, ``R`` = rows resident after the last step) is
  loaded from the host exactly once, by its owner when the owner needs it, else by
  the worker with the fewest host loads so far (ties: lower rank), and copied to
  the other workers that need it;
* a row someone holds is copied from its least-busy holder.

Modes (:class:`LoadMode`): ``NAIVE`` (every row from the host), ``INTRA`` (keep
only), ``INTER`` (``prev = ∅``: one host load per distinct row per step, peers for
the rest), ``BOTH`` (default). Row counts equal the closed forms exactly:

* naive: ``sum |S_gs|``; intra: ``sum |S_gs \\ S_g,s-1|``;
* inter: host ``sum_s |U_s|``, peer ``sum |S_gs| - sum_s |U_s|``;
* both: host ``sum_s |U_s \\ U_s-1|``, peer
  ``sum |S_gs \\ S_g,s-1| - sum_s |U_s \\ U_s-1|``.

The backward pass mirrors the plan (host loads become host adds, peer copies
become gradient sends), so its counts equal the forward ones.

Examples:
    >>> import numpy as np
    >>> S = [[np.array([0, 1, 2]), np.array([2, 3])],   # worker 0, steps 0 and 1
    ...      [np.array([1, 2, 4]), np.array([3, 4])]]   # worker 1
    >>> owner = np.array([0, 0, 1, 1, 1])
    >>> plan = plan_loads(S, owner, LoadMode.BOTH)
    >>> plan.host_rows, plan.peer_rows, plan.keep_rows
    (5, 3, 2)
    >>> plan_loads(S, owner, LoadMode.NAIVE).host_rows
    10
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from strata.partition._types import Int64Array
from strata.partition.errors import PartitionError


class LoadMode(enum.Enum):
    """Which reuse the plan exploits."""

    NAIVE = "naive"
    INTRA = "intra"
    INTER = "inter"
    BOTH = "both"


@dataclass(frozen=True, slots=True, eq=False)
class StepPlan:
    """What every worker does before one step.

    Attributes:
        keep: per worker, rows kept from its previous step.
        host: per worker, rows it loads from the host.
        peer: ``(from_worker, to_worker, rows)`` device-to-device copies.
    """

    keep: list[Int64Array]
    host: list[Int64Array]
    peer: list[tuple[int, int, Int64Array]]


@dataclass(frozen=True, slots=True, eq=False)
class LoadPlan:
    """A static plan, built once and reused by every layer and epoch.

    Attributes:
        mode: the reuse mode.
        steps: one :class:`StepPlan` per step.
        host_rows: rows loaded from the host (one layer).
        peer_rows: rows copied between workers.
        keep_rows: rows reused in place.
        host_load: per worker, host rows it loads.
    """

    mode: LoadMode
    steps: list[StepPlan] = field(default_factory=list)
    host_rows: int = 0
    peer_rows: int = 0
    keep_rows: int = 0
    host_load: Int64Array = field(default_factory=lambda: np.zeros(0, np.int64))

    def bytes(self, width: int, itemsize: int = 4) -> tuple[int, int]:
        """``(host, peer)`` bytes for rows of ``width`` elements."""
        return self.host_rows * width * itemsize, self.peer_rows * width * itemsize


_EMPTY = np.empty(0, dtype=np.int64)


def plan_loads(
    sources: Sequence[Sequence[np.ndarray]],
    owner: np.ndarray,
    mode: LoadMode = LoadMode.BOTH,
) -> LoadPlan:
    """Plan row movement for ``sources[g][s]`` (sorted global ids per worker/step).

    Args:
        sources: K lists of the same length (steps); entry ``[g][s]`` = ``S_{g,s}``.
        owner: ``(n,)`` worker that owns each row (its level-1 part).
        mode: reuse mode.

    Returns:
        The :class:`LoadPlan`.

    Raises:
        PartitionError: when workers have different step counts.
    """
    k = len(sources)
    steps = {len(s) for s in sources}
    if len(steps) > 1:
        raise PartitionError.build(
            "sources",
            "plan_loads",
            "the same number of steps per worker",
            str(sorted(steps)),
        )
    nsteps = steps.pop() if steps else 0
    owner = np.asarray(owner, dtype=np.int64)
    prev: list[Int64Array] = [_EMPTY] * k
    host_load = np.zeros(k, dtype=np.int64)
    plan_steps: list[StepPlan] = []
    host_rows = peer_rows = keep_rows = 0
    for s in range(nsteps):
        need = [np.asarray(sources[g][s], dtype=np.int64) for g in range(k)]
        keep: list[Int64Array] = [_EMPTY] * k
        host: list[list[Int64Array]] = [[] for _ in range(k)]
        peer: list[tuple[int, int, Int64Array]] = []
        if mode is LoadMode.NAIVE:
            host = [[need[g]] for g in range(k)]
        elif mode is LoadMode.INTRA:
            for g in range(k):
                keep[g] = np.intersect1d(need[g], prev[g], assume_unique=True)
                host[g].append(np.setdiff1d(need[g], prev[g], assume_unique=True))
        else:
            held = prev if mode is LoadMode.BOTH else [_EMPTY] * k
            fresh = [
                np.setdiff1d(need[g], held[g], assume_unique=True) for g in range(k)
            ]
            for g in range(k):
                keep[g] = np.intersect1d(need[g], held[g], assume_unique=True)
            resident = np.unique(np.concatenate(held)) if k else _EMPTY
            union = np.unique(np.concatenate(need)) if k else _EMPTY
            new = np.setdiff1d(union, resident, assume_unique=True)
            _assign_new(new, fresh, owner, host_load, host, peer)
            _assign_resident(resident, fresh, held, peer)
        step_host = [np.concatenate(h) if h else _EMPTY for h in host]
        if mode in (LoadMode.NAIVE, LoadMode.INTRA):  # others count in _assign_new
            host_load += np.array([h.size for h in step_host], dtype=np.int64)
        plan_steps.append(StepPlan(keep, step_host, peer))
        host_rows += sum(h.size for h in step_host)
        peer_rows += sum(rows.size for _, _, rows in peer)
        keep_rows += sum(x.size for x in keep)
        prev = need
    return LoadPlan(mode, plan_steps, host_rows, peer_rows, keep_rows, host_load)


def _assign_new(
    new: Int64Array,
    fresh: list[Int64Array],
    owner: Int64Array,
    host_load: Int64Array,
    host: list[list[Int64Array]],
    peer: list[tuple[int, int, Int64Array]],
) -> None:
    """Rows nobody holds: one host load each, then copies to the other needers."""
    k = len(fresh)
    if new.size == 0:
        return
    member = np.zeros((k, new.size), dtype=bool)
    for g in range(k):
        member[g] = np.isin(new, fresh[g], assume_unique=True)
    loader = np.full(new.size, -1, dtype=np.int64)
    own = owner[new]
    by_owner = member[own, np.arange(new.size)]
    loader[by_owner] = own[by_owner]
    for g in range(k):
        host_load[g] += int(np.count_nonzero(loader == g))
    for j in np.flatnonzero(~by_owner):  # least host-loaded needer, then rank
        candidates = np.flatnonzero(member[:, j])
        pick = int(candidates[np.argmin(host_load[candidates])])
        loader[j] = pick
        host_load[pick] += 1
    for g in range(k):
        mine = loader == g
        host[g].append(new[mine])
        for h in range(k):
            if h != g:
                rows = new[mine & member[h]]
                if rows.size:
                    peer.append((g, h, rows))


def _assign_resident(
    resident: Int64Array,
    fresh: list[Int64Array],
    held: list[Int64Array],
    peer: list[tuple[int, int, Int64Array]],
) -> None:
    """Rows some worker already holds: one copy from the least-busy holder."""
    k = len(fresh)
    sent = np.zeros(k, dtype=np.int64)
    for g in range(k):
        wanted = np.intersect1d(fresh[g], resident, assume_unique=True)
        if wanted.size == 0:
            continue
        holders = np.zeros((k, wanted.size), dtype=bool)
        for h in range(k):
            holders[h] = np.isin(wanted, held[h], assume_unique=True)
        source = np.empty(wanted.size, dtype=np.int64)
        for j in range(wanted.size):
            candidates = np.flatnonzero(holders[:, j])
            pick = int(candidates[np.argmin(sent[candidates])])
            source[j] = pick
            sent[pick] += 1
        for h in range(k):
            rows = wanted[source == h]
            if rows.size:
                peer.append((h, g, rows))
