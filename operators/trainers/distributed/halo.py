"""Halo exchange: boundary rows to the workers that read them, gradients back.

In partition-parallel training worker ``g`` owns the rows of its part and reads,
in every layer, the rows of its *halo*: vertices owned elsewhere with an edge into
its part. :func:`halo_exchange` sends each owned row that some peer's halo holds
to that peer with one ``all_to_all_single`` and returns the received rows in halo
order. It is a ``torch.autograd.Function``: backward is the reverse exchange
(each halo row's gradient goes back to its owner) followed by a scatter-add into
the owned rows' gradient, so a row read by several peers sums their gradients.

API (what a partition-parallel loop, Emma's included, calls):

* :class:`HaloPlan` -- who sends which rows to whom, for one worker.
  :meth:`HaloPlan.from_book` builds it from a :class:`~strata.partition.PartitionBook`
  (local ids: owned rows ``0..n_g-1``, then the halo); :meth:`HaloPlan.restrict`
  keeps only the rows whose *global id* is active, deciding on both sides from
  the id alone, so no mask is exchanged (Emma's source chunking: the halo
  buffer keeps its shape and inactive rows read as zeros);
  :meth:`HaloPlan.from_lists` builds any other plan.
* :func:`halo_exchange` ``(x_owned, plan, counters=..., phase=..., layer=...)``
  returns ``[plan.num_out, ...]`` halo rows, differentiable in ``x_owned``.
* :func:`all_to_all_rows` -- the one collective underneath: rows grouped by
  destination in, rows grouped by source out (zero-length groups allowed).
* Counters (:class:`~strata.operators.trainers.distributed.counters.TransferCounters`):
  :class:`~strata.operators.trainers.distributed.counters.Traffic`'s
  ``halo_send_rows``, ``halo_recv_rows``, ``halo_send_bytes`` and
  ``halo_recv_bytes`` per peer, under ``phase`` in forward and ``Phase.BWD`` in
  backward, at ``layer``.

With one worker there is nothing to exchange and no collective runs. On CUDA
with NCCL the plan's index tensors must be on the device (:meth:`HaloPlan.to`).

Example (inside a gang worker, ``book`` a ``PartitionBook``)::

    plan = HaloPlan.from_book(book, ctx.rank)
    x_local = torch.cat([x_owned, halo_exchange(x_owned, plan, layer=1)])
    # x_local's rows are the worker's local ids: owned, then halo

Examples:
    >>> import dataclasses, numpy as np
    >>> from strata.storage import CSRGraph
    >>> from strata.partition import RandomPartitioner, build_book
    >>> ring = CSRGraph.from_edges(np.arange(4), (np.arange(4) + 1) % 4)  # i -> i+1
    >>> halves = dataclasses.replace(RandomPartitioner(k=2).partition(ring),
    ...                              assignment=np.array([0, 0, 1, 1], np.int32))
    >>> book = build_book(ring, halves)
    >>> plan = HaloPlan.from_book(book, rank=0)   # part 0 owns 0, 1; reads 3
    >>> plan.send_ids.tolist(), plan.recv_ids.tolist(), plan.num_out
    ([1], [3], 1)
    >>> plan.restrict(torch.tensor([True, False, True, True])).send_ids.tolist()
    []
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from strata.operators.trainers.distributed.counters import (
    Phase,
    Traffic,
    TransferCounters,
)
from strata.partition import PartitionBook


@dataclass(frozen=True, slots=True, eq=False)
class HaloPlan:
    """One worker's side of an exchange of rows with its peers.

    Attributes:
        rank: this worker.
        world_size: workers in the gang.
        send_index: int64 positions in the input rows of the rows to send,
            grouped by destination peer (peer order), each group in
            ``send_ids`` order.
        send_splits: rows sent to each peer (0 to itself).
        recv_index: int64 positions in the output buffer of the received rows,
            grouped by source peer.
        recv_splits: rows received from each peer.
        num_out: rows of the output buffer (the halo size).
        send_ids: int64 global ids of the sent rows (``send_index`` order).
        recv_ids: int64 global ids of the received rows (``recv_index`` order).
    """

    rank: int
    world_size: int
    send_index: torch.Tensor
    send_splits: tuple[int, ...]
    recv_index: torch.Tensor
    recv_splits: tuple[int, ...]
    num_out: int
    send_ids: torch.Tensor
    recv_ids: torch.Tensor

    @classmethod
    def from_book(cls, book: PartitionBook, rank: int) -> HaloPlan:
        """The halo exchange of part ``rank`` of ``book`` (rows in local-id order).

        Sends, to every peer ``p``, the rows of ``rank``'s part in ``p``'s halo
        (ascending global id); receives ``rank``'s halo, grouped by owner.
        """
        sends: list[tuple[np.ndarray, np.ndarray]] = []
        recvs: list[tuple[np.ndarray, np.ndarray]] = []
        halo = book.halo(rank)
        owners = book.owner_of(halo)
        for peer in range(book.k):
            if peer == rank:
                empty = np.empty(0, np.int64)
                sends.append((empty, empty))
                recvs.append((empty, empty))
                continue
            theirs = book.halo(peer)
            mine = theirs[book.owner_of(theirs) == rank]
            sends.append((book.local_id[mine].astype(np.int64), mine))
            where = np.flatnonzero(owners == peer)
            recvs.append((where, halo[where]))
        return cls.from_lists(rank, book.k, sends, recvs, int(halo.shape[0]))

    @classmethod
    def from_lists(
        cls,
        rank: int,
        world_size: int,
        sends: Sequence[tuple[np.ndarray, np.ndarray]],
        recvs: Sequence[tuple[np.ndarray, np.ndarray]],
        num_out: int,
    ) -> HaloPlan:
        """Build a plan from per-peer ``(positions, global_ids)`` pairs.

        Args:
            rank: this worker.
            world_size: workers in the gang.
            sends: per peer, positions in the input rows and their global ids.
            recvs: per peer, positions in the output buffer and their global ids;
                peer ``q``'s entry must list the rows ``q`` sends here, in the
                order it sends them.
            num_out: rows of the output buffer.
        """

        def flat(parts: Sequence[tuple[np.ndarray, np.ndarray]], i: int) -> Any:
            arrays = [np.asarray(p[i], dtype=np.int64) for p in parts]
            return torch.from_numpy(np.concatenate(arrays) if arrays else np.empty(0))

        return cls(
            rank,
            world_size,
            flat(sends, 0),
            tuple(len(s[0]) for s in sends),
            flat(recvs, 0),
            tuple(len(r[0]) for r in recvs),
            int(num_out),
            flat(sends, 1),
            flat(recvs, 1),
        )

    @property
    def send_rows(self) -> int:
        """Rows this worker sends per exchange."""
        return sum(self.send_splits)

    @property
    def recv_rows(self) -> int:
        """Rows this worker receives per exchange."""
        return sum(self.recv_splits)

    def restrict(self, active: torch.Tensor) -> HaloPlan:
        """The plan for the active rows only (``active``: bool over global ids).

        Both sides decide from the global id, so peers agree without talking.
        The output buffer keeps ``num_out`` rows; inactive ones stay zero.
        """
        keep_send = active[self.send_ids]
        keep_recv = active[self.recv_ids]
        return replace(
            self,
            send_index=self.send_index[keep_send],
            send_splits=_splits(self.send_splits, keep_send),
            recv_index=self.recv_index[keep_recv],
            recv_splits=_splits(self.recv_splits, keep_recv),
            send_ids=self.send_ids[keep_send],
            recv_ids=self.recv_ids[keep_recv],
        )

    def to(self, device: torch.device) -> HaloPlan:
        """The plan with its index tensors on ``device``."""
        return replace(
            self,
            send_index=self.send_index.to(device),
            recv_index=self.recv_index.to(device),
        )


def _splits(splits: tuple[int, ...], keep: torch.Tensor) -> tuple[int, ...]:
    counts = [int(part.sum()) for part in torch.split(keep, list(splits))]
    return tuple(counts)


def all_to_all_rows(
    rows: torch.Tensor,
    send_splits: Sequence[int],
    recv_splits: Sequence[int],
) -> torch.Tensor:
    """Send ``rows`` (grouped by destination) to the peers; return what arrives.

    Args:
        rows: ``[sum(send_splits), ...]``, peer ``p``'s rows in group ``p``.
        send_splits: rows for each peer (0 for this worker and for idle peers).
        recv_splits: rows from each peer.

    Returns:
        ``[sum(recv_splits), ...]`` grouped by source peer.
    """
    import torch.distributed as dist

    out = rows.new_empty((sum(recv_splits), *rows.shape[1:]))
    if len(send_splits) == 1:  # one worker: nobody to talk to
        return out
    dist.all_to_all_single(out, rows.contiguous(), list(recv_splits), list(send_splits))
    return out


def _count(
    counters: TransferCounters | None,
    plan_splits: tuple[tuple[int, ...], tuple[int, ...]],
    row_bytes: int,
    phase: Phase,
    layer: int,
) -> None:
    if counters is None:
        return
    sent, received = plan_splits
    for peer, (s, r) in enumerate(zip(sent, received, strict=True)):
        if s or r:
            traffic = Traffic(
                halo_send_rows=s,
                halo_send_bytes=s * row_bytes,
                halo_recv_rows=r,
                halo_recv_bytes=r * row_bytes,
            )
            counters.add(phase, traffic, layer=layer, peer=peer)


class _HaloExchange(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        plan: HaloPlan,
        counters: TransferCounters | None,
        phase: Phase,
        layer: int,
    ) -> torch.Tensor:
        ctx.plan, ctx.counters, ctx.layer = plan, counters, layer
        ctx.num_rows = x.shape[0]
        row_bytes = x[0].numel() * x.element_size() if x.dim() else 0
        ctx.row_bytes = row_bytes
        received = all_to_all_rows(
            x.index_select(0, plan.send_index), plan.send_splits, plan.recv_splits
        )
        _count(counters, (plan.send_splits, plan.recv_splits), row_bytes, phase, layer)
        out = x.new_zeros((plan.num_out, *x.shape[1:]))
        out.index_copy_(0, plan.recv_index, received)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        plan: HaloPlan = ctx.plan
        # The reverse exchange: each received row's gradient goes to its sender.
        returned = all_to_all_rows(
            grad.index_select(0, plan.recv_index), plan.recv_splits, plan.send_splits
        )
        _count(
            ctx.counters,
            (plan.recv_splits, plan.send_splits),
            ctx.row_bytes,
            Phase.BWD,
            ctx.layer,
        )
        grad_x = grad.new_zeros((ctx.num_rows, *grad.shape[1:]))
        grad_x.index_add_(0, plan.send_index, returned)
        return grad_x, None, None, None, None


def halo_exchange(
    x: torch.Tensor,
    plan: HaloPlan,
    *,
    counters: TransferCounters | None = None,
    phase: Phase = Phase.FWD,
    layer: int = 0,
) -> torch.Tensor:
    """Exchange halo rows (see the module docstring); differentiable in ``x``.

    Args:
        x: ``[rows, ...]`` this worker's rows (what ``plan.send_index`` indexes).
        plan: this worker's :class:`HaloPlan`.
        counters: where to count rows and bytes (optional).
        phase: the forward pass's counter phase (``Phase.FWD``, ``EVAL``,
            ``REFRESH`` or ``SETUP``); backward counts under ``Phase.BWD``.
        layer: the layer, for the counters.

    Returns:
        ``[plan.num_out, ...]``: the received rows at ``plan.recv_index``,
        zeros elsewhere.
    """
    result: torch.Tensor = _HaloExchange.apply(x, plan, counters, phase, layer)
    return result
