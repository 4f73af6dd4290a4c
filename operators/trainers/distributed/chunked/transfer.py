"""Every row chunked training moves, and its count: :class:`Transfers`.

This is the only code that moves rows between the host store, the device arena
and the peers, so every counter is taken at its call site as
``rows * width * 4`` bytes (``hongtu.md`` §3.8), as typed
:class:`~strata.operators.trainers.distributed.counters.Traffic`:

* :meth:`Transfers.load` runs one forward step of a load plan
  (:class:`~strata.operators.trainers.distributed.chunked.steps.StepIndex`): kept rows
  are copied from the previous step's buffer (``reuse_rows``), fresh rows are
  gathered from the host (``h2d_rows``, ``h2d_bytes``; dropout applied once, here),
  and one ``all_to_all`` copies rows between workers (``peer_send_*``,
  ``peer_recv_*``).
* :meth:`Transfers.flush` runs the same step mirrored for gradients: the rows
  received from peers send their gradients back, which are added where the
  peer sent them from; kept rows add into the previous step's gradient; loaded
  rows are added to the host gradient table (``d2h_bytes``), one writer per row.
* :meth:`Transfers.read` / :meth:`Transfers.write` move destination rows
  (outputs, cached aggregates, output gradients), counted as their caller says, and
  :meth:`Transfers.topology` accounts a chunk's graph.

Every tensor brought to the device is registered, as a named
:class:`~strata.operators.trainers.distributed.chunked.arena.Buffer`, in the
:class:`~strata.operators.trainers.distributed.chunked.arena.DeviceArena`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from strata.operators.trainers.distributed.chunked.arena import Buffer, DeviceArena
from strata.operators.trainers.distributed.chunked.steps import StepIndex
from strata.operators.trainers.distributed.counters import (
    Phase,
    Traffic,
    TransferCounters,
)
from strata.operators.trainers.distributed.halo import all_to_all_rows
from strata.operators.trainers.distributed.programs import SliceTensors

#: Applies dropout in place to rows with the given global ids.
DropFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _t(array: object, device: torch.device) -> torch.Tensor:
    return torch.as_tensor(array, dtype=torch.int64, device=device)


class Transfers:
    """Moves and counts rows for one worker (see the module docstring).

    Args:
        arena: the worker's device arena.
        counters: the worker's transfer counters.
    """

    def __init__(self, arena: DeviceArena, counters: TransferCounters) -> None:
        self.arena = arena
        self.counters = counters
        self.device = arena.device

    def load(
        self,
        step: StepIndex,
        prev: torch.Tensor | None,
        table: torch.Tensor,
        num_rows: int,
        *,
        phase: Phase,
        layer: int,
        cur_ids: torch.Tensor,
        drop: DropFn | None = None,
    ) -> torch.Tensor:
        """This step's rows ``[num_rows, d]`` (``S_{g,s}`` order), as ``Buffer.ROWS``.

        Args:
            step: this worker's index arrays of the step.
            prev: the previous step's rows (None at the first step or when the
                plan keeps nothing).
            table: the host table to load from (``[n, d]``).
            num_rows: ``|S_{g,s}|``.
            phase: counter phase.
            layer: counter layer.
            cur_ids: global ids of this step's rows (for dropout).
            drop: dropout for freshly loaded rows (None: none).
        """
        count = self.counters.add
        width = table.shape[1]
        rows = self.arena.alloc(Buffer.ROWS, (num_rows, width))
        dev = self.device
        if step.keep_cur.shape[0]:
            assert prev is not None
            rows[_t(step.keep_cur, dev)] = prev[_t(step.keep_prev, dev)]
            count(phase, Traffic(reuse_rows=step.keep_cur.shape[0]), layer=layer)
        loaded = step.host_ids.shape[0]
        if loaded:
            ids = torch.from_numpy(step.host_ids)
            fresh = self.arena.adopt(Buffer.HOST_TMP, table[ids].to(dev))
            if drop is not None:
                drop(fresh, ids.to(dev))
            rows[_t(step.host_cur, dev)] = fresh
            self.arena.free(Buffer.HOST_TMP)
            loads = Traffic(h2d_rows=loaded, h2d_bytes=loaded * width * 4)
            count(phase, loads, layer=layer)
        send = self.arena.alloc(Buffer.SEND, (step.sent, width))
        if step.send_prev_slot.shape[0]:
            assert prev is not None
            send[_t(step.send_prev_slot, dev)] = prev[_t(step.send_prev_pos, dev)]
        if step.send_cur_slot.shape[0]:
            send[_t(step.send_cur_slot, dev)] = rows[_t(step.send_cur_pos, dev)]
        received = self._exchange(send, step.send_splits, step.recv_splits, Buffer.RECV)
        self._count_peers(step.send_splits, step.recv_splits, width, phase, layer)
        if step.recv_cur.shape[0]:
            rows[_t(step.recv_cur, dev)] = received
        self.arena.free(Buffer.SEND, Buffer.RECV)
        return rows

    def flush(
        self,
        step: StepIndex,
        grad: torch.Tensor,
        carry: torch.Tensor | None,
        table: torch.Tensor,
        *,
        phase: Phase,
        layer: int,
        drop: DropFn | None = None,
    ) -> None:
        """Mirror ``step`` for the gradients ``grad`` of this step's rows.

        Args:
            step: the forward step's index arrays.
            grad: ``[|S_{g,s}|, d]`` gradient of this step's rows (added to).
            carry: ``[|S_{g,s-1}|, d]`` gradient of the previous step's rows,
                added to (None when the plan keeps nothing).
            table: the host gradient table ``dH`` (``[n, d]``), added to.
            phase: counter phase.
            layer: counter layer.
            drop: dropout of the loaded rows (its factor is its own gradient).
        """
        dev = self.device
        width = grad.shape[1]
        back = self.arena.alloc(Buffer.SENDBACK, (step.received, width))
        if step.recv_cur.shape[0]:
            back.copy_(grad[_t(step.recv_cur, dev)])
        returned = self._exchange(
            back, step.recv_splits, step.send_splits, Buffer.RETURNED
        )
        self._count_peers(step.recv_splits, step.send_splits, width, phase, layer)
        if step.send_prev_slot.shape[0]:
            assert carry is not None
            carry.index_add_(
                0,
                _t(step.send_prev_pos, dev),
                returned[_t(step.send_prev_slot, dev)],
            )
        if step.send_cur_slot.shape[0]:
            grad.index_add_(
                0, _t(step.send_cur_pos, dev), returned[_t(step.send_cur_slot, dev)]
            )
        self.arena.free(Buffer.SENDBACK, Buffer.RETURNED)
        if step.keep_cur.shape[0]:
            assert carry is not None
            carry.index_add_(0, _t(step.keep_prev, dev), grad[_t(step.keep_cur, dev)])
        loaded = step.host_ids.shape[0]
        if loaded:
            ids = torch.from_numpy(step.host_ids)
            out = self.arena.adopt(Buffer.FLUSH, grad[_t(step.host_cur, dev)])
            if drop is not None:
                drop(out, ids.to(dev))
            table.index_add_(0, ids, out.cpu())
            self.arena.free(Buffer.FLUSH)
            self.counters.add(phase, Traffic(d2h_bytes=loaded * width * 4), layer=layer)

    def read(
        self,
        table: torch.Tensor,
        ids: torch.Tensor,
        name: Buffer,
        *,
        count: Callable[[int], Traffic],
        phase: Phase,
        layer: int,
    ) -> torch.Tensor:
        """Rows ``ids`` of a host table on the device, as ``name``.

        ``count`` turns the bytes read into the traffic to count, e.g.
        ``lambda n: Traffic(grad_h2d_bytes=n)``.
        """
        rows = self.arena.adopt(name, table[ids].to(self.device))
        nbytes = rows.numel() * rows.element_size()
        self.counters.add(phase, count(nbytes), layer=layer)
        return rows

    def write(
        self,
        table: torch.Tensor,
        ids: torch.Tensor,
        rows: torch.Tensor,
        *,
        count: Callable[[int], Traffic],
        phase: Phase,
        layer: int,
    ) -> None:
        """Overwrite rows ``ids`` of a host table (one writer per row).

        ``count`` turns the bytes written into the traffic to count.
        """
        table[ids] = rows.detach().to(table.device)
        nbytes = rows.numel() * rows.element_size()
        self.counters.add(phase, count(nbytes), layer=layer)

    def topology(
        self, part: SliceTensors, *, phase: Phase, layer: int, transpose: bool
    ) -> None:
        """Account a chunk's graph on the device (and its transpose for backward)."""
        local = part.local
        nbytes = local.nbytes
        if transpose:  # indptr over sources, int64 rows and permutation, values
            nbytes += 8 * (local.num_src + 1) + 16 * local.num_edges
            nbytes += 0 if local.values is None else 4 * local.num_edges
        self.arena.reserve(Buffer.TOPO, nbytes)
        self.counters.add(phase, Traffic(topo_h2d_bytes=nbytes), layer=layer)

    def _exchange(
        self,
        send: torch.Tensor,
        send_splits: object,
        recv_splits: object,
        name: Buffer,
    ) -> torch.Tensor:
        splits_out = [int(x) for x in send_splits]  # type: ignore[attr-defined]
        splits_in = [int(x) for x in recv_splits]  # type: ignore[attr-defined]
        received = all_to_all_rows(send, splits_out, splits_in)
        return self.arena.adopt(name, received)

    def _count_peers(
        self,
        sent: object,
        received: object,
        width: int,
        phase: Phase,
        layer: int,
    ) -> None:
        for peer, (s, r) in enumerate(zip(sent, received, strict=True)):  # type: ignore[call-overload]
            if s or r:
                traffic = Traffic(
                    peer_send_rows=int(s),
                    peer_send_bytes=int(s) * width * 4,
                    peer_recv_rows=int(r),
                    peer_recv_bytes=int(r) * width * 4,
                )
                self.counters.add(phase, traffic, layer=layer, peer=peer)
