"""A load plan as index arrays for one worker: :class:`StepIndex` per step.

:func:`strata.partition.plan_loads` says, per step, which rows each worker keeps, loads
from the host and copies to or from which peer (global ids). A worker needs
positions instead: where each row sits in its previous step's buffer (rows of
``S_{g,s-1}``), its current one (``S_{g,s}``), the host table and the send and
receive buffers of the step's one ``all_to_all``. :func:`step_indices` turns a
plan into those positions once, in the parent; :func:`pack_steps` flattens them
into two int64 arrays for the shared segment.

Ordering rules that make sender and receiver agree: a peer's rows are the plan's
``(sender, receiver, rows)`` entries for that pair, concatenated in plan order;
a row a sender held in the previous step is sent from that buffer (``BOTH`` and
``INTRA`` keep rows), every other row from the rows it loaded this step.

The backward pass runs the same arrays in reverse (``hongtu.md`` §3.6): a host
load becomes a host add of the row's gradient, a peer copy ``h -> g`` a gradient
sent ``g -> h`` and added where ``h`` sent the row from, a keep an add into the
previous step's gradient.

Examples:
    >>> import numpy as np
    >>> from strata.partition import LoadMode, plan_loads
    >>> S = [[np.array([0, 1, 2]), np.array([2, 3])],
    ...      [np.array([1, 2, 4]), np.array([3, 4])]]
    >>> plan = plan_loads(S, np.array([0, 0, 1, 1, 1]), LoadMode.BOTH)
    >>> steps = step_indices(plan, S, rank=0)
    >>> steps[1].keep_cur.tolist(), steps[1].host_ids.tolist()  # keeps 2
    ([0], [])
    >>> unpack_steps(*pack_steps(steps))[1].recv_splits.tolist()  # 3 from worker 1
    [0, 1]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from strata.partition import LoadMode, LoadPlan

_EMPTY = np.empty(0, dtype=np.int64)


@dataclass(frozen=True, slots=True, eq=False)
class StepIndex:
    """One worker's part of one step (int64 arrays; positions, not ids).

    Attributes:
        keep_prev: kept rows' positions in the previous step's buffer.
        keep_cur: their positions in this step's buffer.
        host_ids: global ids loaded from the host.
        host_cur: their positions in this step's buffer.
        send_prev_slot: send-buffer slots filled from the previous buffer.
        send_prev_pos: the rows' positions there.
        send_cur_slot: send-buffer slots filled from this step's buffer.
        send_cur_pos: the rows' positions there.
        send_splits: rows sent to each peer (``K``).
        recv_cur: received rows' positions in this step's buffer (by peer).
        recv_splits: rows received from each peer (``K``).
    """

    keep_prev: np.ndarray
    keep_cur: np.ndarray
    host_ids: np.ndarray
    host_cur: np.ndarray
    send_prev_slot: np.ndarray
    send_prev_pos: np.ndarray
    send_cur_slot: np.ndarray
    send_cur_pos: np.ndarray
    send_splits: np.ndarray
    recv_cur: np.ndarray
    recv_splits: np.ndarray

    @property
    def sent(self) -> int:
        """Rows this worker sends in the step."""
        return int(self.send_splits.sum())

    @property
    def received(self) -> int:
        """Rows this worker receives in the step."""
        return int(self.recv_splits.sum())


_FIELDS = [f.name for f in fields(StepIndex)]


def holds_previous(mode: LoadMode) -> bool:
    """Whether a worker keeps its previous step's rows into the next step."""
    return mode in (LoadMode.BOTH, LoadMode.INTRA)


def step_indices(
    plan: LoadPlan, sources: Sequence[Sequence[np.ndarray]], rank: int
) -> list[StepIndex]:
    """``rank``'s :class:`StepIndex` for every step of ``plan``.

    Args:
        plan: the load plan.
        sources: ``sources[g][s]``, the sorted global ids ``S_{g,s}`` it was
            planned for.
        rank: the worker.
    """
    k = len(sources)
    hold = holds_previous(plan.mode)
    out = []
    for s, step in enumerate(plan.steps):
        cur = np.asarray(sources[rank][s], dtype=np.int64)
        prev = np.asarray(sources[rank][s - 1], dtype=np.int64) if s else _EMPTY
        keep = step.keep[rank]
        host = step.host[rank]
        sends = [_pair(step.peer, rank, peer) for peer in range(k)]
        recvs = [_pair(step.peer, peer, rank) for peer in range(k)]
        send_ids = np.concatenate(sends) if sends else _EMPTY
        recv_ids = np.concatenate(recvs) if recvs else _EMPTY
        # send_ids repeats a row sent to several peers: no assume_unique here
        # (with it, numpy's sorting path marked such rows "held from prev").
        from_prev = np.isin(send_ids, prev) if hold else None
        if from_prev is None:
            from_prev = np.zeros(send_ids.shape[0], dtype=bool)
        out.append(
            StepIndex(
                keep_prev=np.searchsorted(prev, keep),
                keep_cur=np.searchsorted(cur, keep),
                host_ids=np.asarray(host, dtype=np.int64),
                host_cur=np.searchsorted(cur, host),
                send_prev_slot=np.flatnonzero(from_prev),
                send_prev_pos=np.searchsorted(prev, send_ids[from_prev]),
                send_cur_slot=np.flatnonzero(~from_prev),
                send_cur_pos=np.searchsorted(cur, send_ids[~from_prev]),
                send_splits=np.array([len(x) for x in sends], dtype=np.int64),
                recv_cur=np.searchsorted(cur, recv_ids),
                recv_splits=np.array([len(x) for x in recvs], dtype=np.int64),
            )
        )
    return out


def _pair(
    peer: list[tuple[int, int, np.ndarray]], sender: int, receiver: int
) -> np.ndarray:
    rows = [r for a, b, r in peer if a == sender and b == receiver]
    return np.concatenate(rows).astype(np.int64) if rows else _EMPTY


def pack_steps(steps: Sequence[StepIndex]) -> tuple[np.ndarray, np.ndarray]:
    """Flatten steps into ``(data, offsets)``; ``offsets`` is ``[steps, fields+1]``."""
    parts: list[np.ndarray] = []
    offsets = np.zeros((len(steps), len(_FIELDS) + 1), dtype=np.int64)
    total = 0
    for s, step in enumerate(steps):
        offsets[s, 0] = total
        for f, name in enumerate(_FIELDS):
            array = np.asarray(getattr(step, name), dtype=np.int64)
            parts.append(array)
            total += array.shape[0]
            offsets[s, f + 1] = total
    data = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return data, offsets


def unpack_steps(data: np.ndarray, offsets: np.ndarray) -> list[StepIndex]:
    """Inverse of :func:`pack_steps` (views into ``data``)."""
    steps = []
    for row in offsets:
        arrays = {name: data[row[f] : row[f + 1]] for f, name in enumerate(_FIELDS)}
        steps.append(StepIndex(**arrays))
    return steps
