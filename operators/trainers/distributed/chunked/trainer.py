"""HongTu-style chunked training on one worker: :class:`ChunkedEngine`.

Worker ``g`` owns part ``P_g``, split into ``M`` chunks; chunk ``c`` has
destinations ``D_c``, all their in-edges and sources ``S_c`` (``hongtu.md``
§3.1). Vertex data lives in the shared host store; the device holds one step's
rows at a time, accounted in a :class:`DeviceArena`. One training epoch
(``hongtu.md`` §3.4):

* **forward**, layer by layer (a barrier between layers, pitfall 1), chunk by
  chunk in the plan's order: load ``S_c``'s rows by the deduplicated load plan
  (:class:`Transfers`; dropout applied once, as rows arrive from the host),
  aggregate over the chunk's graph, combine, activate, write ``H^l[D_c]`` to the
  host; cache the aggregate where the layer's policy says so. The last layer
  computes the loss share and writes ``dH^L[D_c]``.
* **backward**, layers in reverse, chunks in reverse: read ``dH^l[D_c]``, restore
  (cached aggregate) or recompute (rows refetched by the reversed plan) the
  layer's input, recompute the vertex-local part under autograd (same masks),
  accumulate the weights' gradients; for ``l > 1`` the rows' gradients go back
  through the mirrored plan and are added to ``dH^{l-1}`` on the host, one writer
  per row per step (a barrier between steps, pitfall 2).

The loop around it (all-reduce, Adam, evaluation, early stopping) is
:func:`~strata.operators.trainers.distributed.loop.run_worker`; evaluation runs the
forward pass without dropout or cache writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from strata.engine.gang import GangContext
from strata.operators.errors import OperatorError
from strata.operators.layers import BasicGNN
from strata.operators.trainers.base import SplitMetrics
from strata.operators.trainers.distributed.chunked.arena import Buffer, DeviceArena
from strata.operators.trainers.distributed.chunked.host_store import HostStore
from strata.operators.trainers.distributed.chunked.memory_model import model_state_bytes
from strata.operators.trainers.distributed.chunked.steps import (
    holds_previous,
    unpack_steps,
)
from strata.operators.trainers.distributed.chunked.transfer import DropFn, Transfers
from strata.operators.trainers.distributed.counters import (
    Phase,
    Traffic,
    TransferCounters,
)
from strata.operators.trainers.distributed.inputs import WorkerInputs
from strata.operators.trainers.distributed.local_graph import PropagationGraph
from strata.operators.trainers.distributed.loop import reduce_split_metrics
from strata.operators.trainers.distributed.modes import CachePolicy
from strata.operators.trainers.distributed.programs import (
    LayerProgram,
    SliceTensors,
    layer_widths,
    program_for,
)
from strata.operators.trainers.dropout import scale_rows_
from strata.partition import PartitionBook


class ChunkedEngine:
    """One rank of HongTu-style chunked training (see the module docstring).

    Args:
        ctx: the rank's gang context.
        inputs: the run's shared inputs (host store, chunk plans included).
    """

    def __init__(self, ctx: GangContext, inputs: WorkerInputs) -> None:
        self.ctx = ctx
        self.inputs = inputs
        self.config = inputs.config
        plan = inputs.plan
        assert plan is not None, "a HongTu run has a chunk plan"
        if inputs.shared.carried and ctx.world_size > 1:
            # The ranks exchange rows through the host store while they run; a
            # copy carried to another node would never see its peers' rows.
            raise OperatorError.build(
                "mode",
                f"worker rank {ctx.rank}",
                "HongTu ranks on the node that holds the host store",
                "a rank on another node (its shared memory arrived as a copy)",
                "use mode='exact' across nodes, or a gang that fits on one node",
            )
        self.plan = plan
        self.num_chunks = plan.chunks
        self.policies = plan.policies
        self.hold = holds_previous(plan.dedup)
        self.device = ctx.device
        self.counters = TransferCounters()
        self.arena = DeviceArena(
            plan.device_budget, self.device, where=f"worker rank {ctx.rank}"
        )
        self.moves = Transfers(self.arena, self.counters)
        self.num_train = inputs.split_nodes["train"]
        rank = ctx.rank
        book = PartitionBook.from_arrays(inputs.arrays("book."))
        schedule = book.chunks
        assert schedule is not None, "a chunked book"
        self.owned = torch.from_numpy(book.owned_ids(rank))
        chunks = [int(c) for c in schedule.order[rank]]
        self.src = [schedule.src_of(c) for c in chunks]
        self.dst = [schedule.dst_of(c) for c in chunks]
        self.src_t = [torch.from_numpy(s) for s in self.src]
        self.dst_t = [torch.from_numpy(d) for d in self.dst]
        shared = inputs.shared
        self.fwd = unpack_steps(
            shared[f"plan.fwd.g{rank}.data"].numpy(),
            shared[f"plan.fwd.g{rank}.offsets"].numpy(),
        )
        self.rev = unpack_steps(
            shared[f"plan.rev.g{rank}.data"].numpy(),
            shared[f"plan.rev.g{rank}.offsets"].numpy(),
        )
        y, masks = shared["y"], {s: shared[f"mask.{s}"] for s in inputs.split_nodes}
        self.labels = [y[d].to(self.device) for d in self.dst_t]
        self.split_pos = [
            {s: torch.nonzero(m[d]).flatten().to(self.device) for s, m in masks.items()}
            for d in self.dst_t
        ]
        self.store: HostStore | None = None

    # ------------------------------------------------------------------ engine
    def setup(self, model: BasicGNN) -> None:
        """Build each chunk's graph slice; account the model in the arena."""
        self.program: LayerProgram = program_for(model)
        self.widths = layer_widths(model)
        self.store = HostStore(self.inputs.shared, model.num_layers)
        prop = PropagationGraph.from_arrays(self.inputs.arrays("prop."))
        self.parts = [
            SliceTensors.of(prop.slice(d, s), self.device)
            for d, s in zip(self.dst, self.src, strict=True)
        ]
        self.self_pos = [
            torch.from_numpy(np.searchsorted(s, d)).to(self.device)
            for d, s in zip(self.dst, self.src, strict=True)
        ]
        self.arena.reserve(Buffer.MODEL, model_state_bytes(model, self.inputs.dist))

    def train_epoch(self, model: BasicGNN, epoch: int) -> float:
        """Forward and backward, chunk by chunk; return the global loss."""
        assert self.store is not None, "setup() first"
        for layer in range(1, model.num_layers):  # dH accumulates flushes: zero it
            self.store.grad(layer)[self.owned] = 0.0
        self.ctx.barrier()
        loss = self._forward(model, epoch, splits=())
        self._backward(model, epoch)
        total = torch.tensor([loss], dtype=torch.float64, device=self.device)
        return float(self.ctx.all_reduce(total).item())

    @torch.no_grad()
    def evaluate(
        self, model: BasicGNN, splits: tuple[str, ...]
    ) -> Mapping[str, SplitMetrics]:
        """The forward pass without dropout; global loss and accuracy per split."""
        sums: dict[str, list[float]] = {s: [0.0, 0.0] for s in splits}
        self._forward(model, None, splits=splits, sums=sums)
        return reduce_split_metrics(
            self.ctx,
            {s: (v[0], v[1], self.inputs.split_nodes[s]) for s, v in sums.items()},
        )

    def report(self) -> dict[str, Any]:
        """The arena's high-water mark beside the modelled peak, and the plan."""
        rank = self.ctx.rank
        return {
            "arena_peak_bytes": self.arena.peak_bytes,
            "modelled_peak_bytes": self.plan.modelled_peak_bytes[rank],
            "device_budget": self.plan.device_budget,
            "chunks": self.num_chunks,
        }

    # ------------------------------------------------------------------ passes
    def _drop(self, model: BasicGNN, epoch: int | None, layer: int) -> DropFn | None:
        if epoch is None or model.dropout == 0:
            return None
        p, seed = model.dropout, self.config.seed

        def drop(rows: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
            return scale_rows_(rows, ids, p=p, seed=seed, epoch=epoch, layer=layer - 1)

        return drop

    def _forward(
        self,
        model: BasicGNN,
        epoch: int | None,
        *,
        splits: tuple[str, ...],
        sums: dict[str, list[float]] | None = None,
    ) -> float:
        """Every layer over every chunk; the loss share (training) or ``sums``."""
        assert self.store is not None
        training = epoch is not None
        phase = Phase.FWD if training else Phase.EVAL
        arena, moves, program = self.arena, self.moves, self.program
        num_layers = model.num_layers
        loss_sum = 0.0
        for layer in range(1, num_layers + 1):
            conv = model.convs[layer - 1]
            d_in, d_out = self.widths[layer - 1]
            last = layer == num_layers
            table = self.store.input(layer)
            drop = self._drop(model, epoch, layer)
            cache = training and self.policies[layer - 1] is CachePolicy.CACHE
            prev: torch.Tensor | None = None
            for s in range(self.num_chunks):
                dst, part = self.dst_t[s], self.parts[s]
                rows = moves.load(
                    self.fwd[s],
                    prev,
                    table,
                    self.src[s].shape[0],
                    phase=phase,
                    layer=layer,
                    cur_ids=self.src_t[s],
                    drop=drop,
                )
                arena.free(Buffer.PREV)
                moves.topology(part, phase=phase, layer=layer, transpose=False)
                num_dst = dst.shape[0]
                work = program.work_bytes(num_dst, d_in, d_out, backward=False)
                if part.row_scale is not None:
                    work += 4 * num_dst * d_in
                if last and training:
                    work += 8 * num_dst * d_out  # the loss and its gradient
                arena.reserve(Buffer.WORK, work)
                z = arena.adopt(Buffer.Z, program.aggregate(part, rows, conv))
                root = None
                if program.needs_root:
                    root = arena.adopt(Buffer.ROOT, rows[self.self_pos[s]])
                y = arena.adopt(Buffer.Y, program.combine(conv, z, root))
                if cache:
                    moves.write(
                        self.store.cache(layer),
                        dst,
                        z,
                        count=lambda n: Traffic(cache_d2h_bytes=n),
                        phase=phase,
                        layer=layer,
                    )
                if not last:
                    y = _activate(model, y)
                    moves.write(
                        self.store.output(layer),
                        dst,
                        y,
                        count=lambda n: Traffic(d2h_bytes=n),
                        phase=phase,
                        layer=layer,
                    )
                elif training:
                    loss, grad = self._loss(y, s)
                    loss_sum += loss
                    moves.write(
                        self.store.grad(layer),
                        dst,
                        grad,
                        count=lambda n: Traffic(d2h_bytes=n),
                        phase=phase,
                        layer=layer,
                    )
                else:
                    assert sums is not None
                    self._score(y, s, splits, sums)
                arena.free(Buffer.WORK, Buffer.Z, Buffer.ROOT, Buffer.Y, Buffer.TOPO)
                if self.hold:
                    arena.rename(Buffer.ROWS, Buffer.PREV)
                    prev = rows
                else:
                    arena.free(Buffer.ROWS)
                self.ctx.heartbeat()
            arena.free(Buffer.PREV)
            self.ctx.barrier()  # layer l + 1 reads every chunk's layer-l output
        return loss_sum

    def _loss(self, y: torch.Tensor, step: int) -> tuple[float, torch.Tensor]:
        """This chunk's share of the training loss and its gradient w.r.t. ``y``."""
        pos = self.split_pos[step]["train"]
        with torch.enable_grad():
            leaf = y.detach().requires_grad_(True)
            loss = F.cross_entropy(leaf[pos], self.labels[step][pos], reduction="sum")
            loss = loss / self.num_train
            (grad,) = torch.autograd.grad(loss, leaf)
        return float(loss.detach()), grad

    def _score(
        self,
        y: torch.Tensor,
        step: int,
        splits: tuple[str, ...],
        sums: dict[str, list[float]],
    ) -> None:
        for split in splits:
            pos = self.split_pos[step][split]
            logits, labels = y[pos], self.labels[step][pos]
            sums[split][0] += float(
                F.cross_entropy(logits.double(), labels, reduction="sum")
            )
            sums[split][1] += float((logits.argmax(dim=1) == labels).sum())

    def _backward(self, model: BasicGNN, epoch: int) -> None:
        """Layers and chunks in reverse; weight gradients and ``dH`` flushes."""
        assert self.store is not None
        arena, moves, program = self.arena, self.moves, self.program
        for layer in range(model.num_layers, 0, -1):
            d_in, d_out = self.widths[layer - 1]
            table = self.store.input(layer)
            drop = self._drop(model, epoch, layer)
            refetch = self.policies[layer - 1] is CachePolicy.REFETCH
            needs_rows_grad = layer > 1
            carry: torch.Tensor | None = None
            rprev: torch.Tensor | None = None
            for s in reversed(range(self.num_chunks)):
                dst, part = self.dst_t[s], self.parts[s]
                num_src, num_dst = self.src[s].shape[0], dst.shape[0]
                dy = moves.read(
                    self.store.grad(layer),
                    dst,
                    Buffer.DY,
                    count=lambda n: Traffic(grad_h2d_bytes=n),
                    phase=Phase.BWD,
                    layer=layer,
                )
                moves.topology(
                    part, phase=Phase.BWD, layer=layer, transpose=needs_rows_grad
                )
                work = program.work_bytes(num_dst, d_in, d_out, backward=True)
                work += 4 * num_dst * d_in * (2 if part.row_scale is not None else 1)
                if refetch:
                    rows = moves.load(
                        self.rev[self.num_chunks - 1 - s],
                        rprev,
                        table,
                        num_src,
                        phase=Phase.BWD,
                        layer=layer,
                        cur_ids=self.src_t[s],
                        drop=drop,
                    )
                    arena.free(Buffer.RPREV)
                    arena.reserve(Buffer.WORK, work)
                    contrib = self._recompute(
                        model, layer, s, rows, dy, needs_rows_grad
                    )
                else:
                    rows = None
                    contrib = self._restore(model, layer, s, dy, drop, work)
                arena.free(Buffer.DY, Buffer.Z, Buffer.ROOT, Buffer.WORK, Buffer.GRADS)
                if needs_rows_grad:
                    assert contrib is not None
                    if carry is None:
                        grad = contrib
                        arena.rename(Buffer.CONTRIB, Buffer.GRAD)
                    else:
                        grad = carry.add_(contrib)
                        arena.rename(Buffer.CARRY, Buffer.GRAD)
                        arena.free(Buffer.CONTRIB)
                    carry = None
                    if self.hold and s > 0:
                        carry = arena.alloc(
                            Buffer.CARRY, (self.src[s - 1].shape[0], d_in), zero=True
                        )
                    moves.flush(
                        self.fwd[s],
                        grad,
                        carry,
                        self.store.grad(layer - 1),
                        phase=Phase.BWD,
                        layer=layer,
                        drop=drop,
                    )
                    arena.free(Buffer.GRAD)
                arena.free(Buffer.TOPO)
                if rows is not None and self.hold:
                    arena.rename(Buffer.ROWS, Buffer.RPREV)
                    rprev = rows
                else:
                    arena.free(Buffer.ROWS)
                self.ctx.heartbeat()
                self.ctx.barrier()  # one writer per dH row per step (pitfall 2)
            arena.free(Buffer.CARRY, Buffer.RPREV)
            self.ctx.barrier()

    def _recompute(
        self,
        model: BasicGNN,
        layer: int,
        step: int,
        rows: torch.Tensor,
        dy: torch.Tensor,
        needs_rows_grad: bool,
    ) -> torch.Tensor | None:
        """Refetch policy: aggregate and combine again under autograd."""
        conv, program = model.convs[layer - 1], self.program
        with torch.enable_grad():
            leaf = rows.detach().requires_grad_(needs_rows_grad)
            z = program.aggregate(self.parts[step], leaf, conv)
            root = leaf[self.self_pos[step]] if program.needs_root else None
            out = program.combine(conv, z, root)
            if layer < model.num_layers:
                out = model.act(out)
            out.backward(dy)
        if not needs_rows_grad:
            return None
        if leaf.grad is None:
            raise OperatorError.build(
                "refetched rows' gradient",
                "ChunkedEngine._recompute",
                f"layer {layer}'s output to depend on its input rows",
                "no gradient reached them",
            )
        return self.arena.adopt(Buffer.CONTRIB, leaf.grad)

    def _restore(
        self,
        model: BasicGNN,
        layer: int,
        step: int,
        dy: torch.Tensor,
        drop: DropFn | None,
        work: int,
    ) -> torch.Tensor | None:
        """Cache policy: backpropagate from the cached aggregate, topology only."""
        assert self.store is not None
        conv, program, moves = model.convs[layer - 1], self.program, self.moves
        dst = self.dst_t[step]
        needs_rows_grad = layer > 1
        z = moves.read(
            self.store.cache(layer),
            dst,
            Buffer.Z,
            count=lambda n: Traffic(cache_h2d_bytes=n),
            phase=Phase.BWD,
            layer=layer,
        )
        root = None
        if program.needs_root:
            root = moves.read(
                self.store.input(layer),
                dst,
                Buffer.ROOT,
                count=lambda n: Traffic(cache_h2d_bytes=n),
                phase=Phase.BWD,
                layer=layer,
            )
            if drop is not None:
                drop(root, dst)
        self.arena.reserve(Buffer.WORK, work)
        self.arena.reserve(Buffer.GRADS, z.numel() * 4 * (2 if root is not None else 1))
        with torch.enable_grad():
            z.requires_grad_(needs_rows_grad)
            if root is not None:
                root.requires_grad_(needs_rows_grad)
            out = program.combine(conv, z, root)
            if layer < model.num_layers:
                out = model.act(out)
            out.backward(dy)
        if not needs_rows_grad:
            return None
        assert z.grad is not None
        contrib = self.arena.adopt(
            Buffer.CONTRIB, program.aggregate_t(self.parts[step], z.grad)
        )
        if root is not None:
            assert root.grad is not None
            contrib.index_add_(0, self.self_pos[step], root.grad)
        return contrib


def _activate(model: BasicGNN, y: torch.Tensor) -> torch.Tensor:
    """The activation between layers (in place for ReLU: no second buffer)."""
    if model.act is F.relu:
        return F.relu_(y)
    return model.act(y)
