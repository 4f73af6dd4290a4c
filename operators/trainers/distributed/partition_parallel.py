"""Partition-parallel full-graph training: one part per worker, halo exchange.

Worker ``g`` owns part ``P_g`` of a level-1 partition: its feature rows, its
labels and every layer's activations of those rows stay on its device. Its local
rows are its own, then its halo (``PartitionBook`` local ids), and its local
graph holds every in-edge of its own vertices with *global* coefficients
(:mod:`~strata.operators.trainers.distributed.local_graph`). One layer:

1. ``exchange``: the halo rows arrive from their owners
   (:func:`~strata.operators.trainers.distributed.halo.halo_exchange`; its backward
   sends the halo gradients back and adds them to the owners' rows). The input
   features never change, so their halo rows cross once, at setup;
2. dropout with the counter-based mask of each row's global id;
3. ``aggregate`` over the local graph, then ``combine`` with the layer's weights
   (:mod:`~strata.operators.trainers.distributed.programs`), then the activation.

The loss is the sum of the cross-entropy over the worker's training nodes divided
by the *global* training count, so the all-reduced sum of the gradients is the
single-device gradient. Evaluation runs the same forward without dropout and
all-reduces loss sums and correct counts.

Extension points (for the Emma option, ``emma.md`` §3.3): subclass
:class:`PartitionParallelEngine` and override :meth:`~PartitionParallelEngine.exchange`
(e.g. ``halo_exchange`` over ``self.halo.restrict(active)``) and
:meth:`~PartitionParallelEngine.layer` (e.g. a moving aggregate over a filtered
slice, then ``self.program.combine``); ``self.counters`` counts the halo traffic
per peer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from strata.engine.gang import GangContext
from strata.operators.layers import BasicGNN
from strata.operators.trainers.base import SplitMetrics
from strata.operators.trainers.distributed.counters import (
    Phase,
    Traffic,
    TransferCounters,
)
from strata.operators.trainers.distributed.halo import HaloPlan, halo_exchange
from strata.operators.trainers.distributed.inputs import WorkerInputs
from strata.operators.trainers.distributed.local_graph import PropagationGraph
from strata.operators.trainers.distributed.loop import reduce_split_metrics
from strata.operators.trainers.distributed.programs import SliceTensors, program_for
from strata.operators.trainers.dropout import counter_dropout
from strata.partition import PartitionBook


class PartitionParallelEngine:
    """One rank of exact partition-parallel training (see the module docstring).

    Args:
        ctx: the rank's gang context.
        inputs: the run's shared inputs.

    Attributes:
        book: the partition book (part ``ctx.rank`` is this worker's).
        halo: this worker's :class:`HaloPlan`.
        owned: global ids of the owned rows (ascending).
        local_ids: global ids of the local rows (owned, then halo).
        counters: transfer counters (halo rows and bytes per peer).
    """

    def __init__(self, ctx: GangContext, inputs: WorkerInputs) -> None:
        self.ctx = ctx
        self.inputs = inputs
        self.config = inputs.config
        self.device = ctx.device
        self.counters = TransferCounters()
        self.book = PartitionBook.from_arrays(inputs.arrays("book."))
        rank = ctx.rank
        self.owned = self.book.owned_ids(rank)
        self.local_ids_np = np.concatenate([self.owned, self.book.halo(rank)])
        self.local_ids = torch.from_numpy(self.local_ids_np).to(self.device)
        self.halo = HaloPlan.from_book(self.book, rank).to(self.device)
        self.num_owned = int(self.owned.shape[0])
        self.num_train = inputs.split_nodes["train"]
        owned = torch.from_numpy(self.owned)
        x = inputs.shared["x"][owned]
        self.x = x.to(self.device, torch.float32)
        self.counters.add(Phase.SETUP, Traffic(h2d_bytes=x.numel() * 4))
        self.y = inputs.shared["y"][owned].to(self.device)
        self.split_pos = {
            split: torch.nonzero(inputs.shared[f"mask.{split}"][owned])
            .flatten()
            .to(self.device)
            for split in inputs.split_nodes
        }
        self.part: SliceTensors | None = None
        self.resident_bytes = 0
        self.tensor_peak_bytes = 0

    # ------------------------------------------------------------------ engine
    def setup(self, model: BasicGNN) -> None:
        """Slice the propagation graph for this worker's rows."""
        self.program = program_for(model)
        prop = PropagationGraph.from_arrays(self.inputs.arrays("prop."))
        local = prop.slice(self.owned, self.local_ids_np)
        self.part = SliceTensors.of(local, self.device)
        self.counters.add(Phase.SETUP, Traffic(topo_h2d_bytes=local.nbytes))
        # Features never change: their halo rows cross once, here, not per epoch
        # (dropout is applied after the exchange, so its masks do not matter).
        with torch.no_grad():
            self.x_local = self.exchange(-1, self.x, Phase.SETUP)

    def train_epoch(self, model: BasicGNN, epoch: int) -> float:
        """Forward, loss share, backward; return the global training loss."""
        with SavedTensorMeter(self._resident(model)) as saved:
            out = self.train_forward(model, epoch)
        held = self.resident_bytes + saved.nbytes + out.numel() * out.element_size()
        self.tensor_peak_bytes = max(self.tensor_peak_bytes, held)
        pos = self.split_pos["train"]
        loss = F.cross_entropy(out[pos], self.y[pos], reduction="sum")
        # The sum over every rank is the single-device mean (hongtu.md §3.9);
        # out.sum() * 0 keeps every rank's backward (and its halo collectives)
        # running when a rank has no training node.
        loss = loss / self.num_train + out.sum() * 0.0
        loss.backward()
        total = self.ctx.all_reduce(loss.detach().clone().reshape(1))
        return float(total.item())

    def train_forward(self, model: BasicGNN, epoch: int) -> torch.Tensor:
        """The training pass's output rows (Emma overrides it with its moving pass)."""
        return self.forward(model, epoch=epoch, phase=Phase.FWD)

    @torch.no_grad()
    def evaluate(
        self, model: BasicGNN, splits: tuple[str, ...]
    ) -> Mapping[str, SplitMetrics]:
        """Forward without dropout; global loss and accuracy per split."""
        out = self.eval_forward(model)
        sums = {}
        for split in splits:
            pos = self.split_pos[split]
            logits, y = out[pos], self.y[pos]
            loss = F.cross_entropy(logits.double(), y, reduction="sum")
            correct = (logits.argmax(dim=1) == y).sum()
            sums[split] = (float(loss), float(correct), self.inputs.split_nodes[split])
        return reduce_split_metrics(self.ctx, sums)

    def eval_forward(self, model: BasicGNN) -> torch.Tensor:
        """The evaluation pass's output rows (no dropout; Emma counts its bytes)."""
        return self.forward(model, epoch=None, phase=Phase.EVAL)

    def report(self) -> dict[str, Any]:
        """Part size, halo size, rows sent per exchange, peak tensor bytes."""
        return {
            "owned": self.num_owned,
            "halo": int(self.halo.num_out),
            "halo_send_rows": self.halo.send_rows,
            "tensor_peak_bytes": self.tensor_peak_bytes or None,  # None: unmeasured
        }

    def _resident(self, model: BasicGNN) -> list[torch.Tensor]:
        """Tensors held for the whole run; sets :attr:`resident_bytes`.

        Features (owned and local rows), the local graph (and its transpose),
        and per parameter its weights, gradient and Adam's two moments.
        """
        params = list(model.parameters())
        tensors = [self.x, self.x_local, *params]
        assert self.part is not None
        param_bytes = sum(p.numel() * p.element_size() for p in params)
        self.resident_bytes = (
            _nbytes(self.x) + _nbytes(self.x_local) + 2 * self.part.nbytes
        ) + 4 * param_bytes
        return tensors

    # --------------------------------------------------------------- the layers
    def forward(
        self, model: BasicGNN, *, epoch: int | None, phase: Phase
    ) -> torch.Tensor:
        """Logits of the owned rows (``epoch`` None: evaluation, no dropout)."""
        h = self.x
        for i, conv in enumerate(model.convs):
            local = self.x_local if i == 0 else self.exchange(i, h, phase)
            local = self.dropout(model, local, epoch=epoch, layer=i)
            root = local[: self.num_owned] if self.program.needs_root else None
            h = self.layer(i, conv, local, root)
            if i < model.num_layers - 1:
                h = model.act(h)
        return h

    def dropout(
        self, model: BasicGNN, local: torch.Tensor, *, epoch: int | None, layer: int
    ) -> torch.Tensor:
        """Layer ``layer``'s input rows after counter-based dropout (none in eval)."""
        if epoch is None or model.dropout <= 0:
            return local
        return counter_dropout(
            local,
            self.local_ids,
            p=model.dropout,
            seed=self.config.seed,
            epoch=epoch,
            layer=layer,
        )

    def exchange(self, layer: int, h: torch.Tensor, phase: Phase) -> torch.Tensor:
        """Layer ``layer``'s input rows: owned rows ``h``, then the halo's."""
        halo = halo_exchange(
            h, self.halo, counters=self.counters, phase=phase, layer=layer + 1
        )
        return torch.cat([h, halo])

    def layer(
        self,
        layer: int,
        conv: torch.nn.Module,
        local: torch.Tensor,
        root: torch.Tensor | None,
    ) -> torch.Tensor:
        """Layer ``layer`` over the local rows (before the activation)."""
        assert self.part is not None, "setup() first"
        return self.program.layer(conv, self.part, local, root)


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


class SavedTensorMeter:
    """Bytes autograd saves for the backward pass inside a ``with`` block.

    Each saved tensor counts once (by storage), and tensors in ``resident``
    (counted elsewhere) not at all. Temporaries that die inside an operation
    are not seen: this is what the backward pass keeps alive, the bulk of a
    full-graph worker's memory, not an allocator's high-water mark.

    Examples:
        >>> w = torch.ones(3, requires_grad=True)
        >>> x = torch.ones(4, 3)
        >>> with SavedTensorMeter([w]) as meter:
        ...     y = (x * w).sum()
        >>> meter.nbytes  # x was saved for w's gradient (w itself is resident)
        48
    """

    def __init__(self, resident: list[torch.Tensor]) -> None:
        self._skip = {t.untyped_storage().data_ptr() for t in resident}
        self._seen: set[int] = set()
        self.nbytes = 0
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack)

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in self._skip and ptr not in self._seen:
            self._seen.add(ptr)
            self.nbytes += storage.nbytes()
        return tensor

    def __enter__(self) -> SavedTensorMeter:
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._hooks.__exit__(*exc)


def _unpack(tensor: torch.Tensor) -> torch.Tensor:
    return tensor
