"""One rank of Emma training: :class:`EmmaEngine`, and the gang's worker function.

Built on the exact partition-parallel engine
(:class:`~strata.operators.trainers.distributed.partition_parallel.PartitionParallelEngine`:
the part, the halo plan, the local slice with global coefficients, features,
labels) and run by the common epoch loop
(:func:`~strata.operators.trainers.distributed.loop.run_worker`), where an *epoch* is
one Emma *iteration*: one optimizer step. Iteration ``t`` (``emma.md`` §3.3):

1. if ``t`` is a positive multiple of ``refresh_every``: :meth:`EmmaEngine.refresh`,
   an exact pass without dropout or gradient that overwrites every buffer;
2. the chunker's step for ``t``: active sources, restricted halo plan, filtered
   CSR, refreshed weight ``n_t``;
3. per layer: exchange only the active halo rows (about 1/S of the exact
   exchange; layer 1's input features crossed once at setup, as in the exact
   engine, since they never change), counter-based dropout, sum over the
   active edges (about 1/S),
   :func:`~strata.operators.kernels.moving_aggr.moving_sum` with the layer's buffer
   (stored back), scale by ``1/deg`` for a mean, combine with the layer's
   weights (every destination, with its own fresh features);
4. the loss over the local training nodes divided by the global training count;
   backward sends gradients only for the active halo rows. The loop all-reduces
   the gradients and steps.

Every reported metric comes from :meth:`EmmaEngine.evaluate`: a full exchange and
full aggregation that leaves the buffers untouched.

Counters (typed :class:`~strata.operators.trainers.distributed.counters.Traffic`
fields; per worker, per iteration, in the run report's ``per_worker[r].epochs``
as ``"<phase>.<name>"``): ``fwd``/``bwd``/``refresh``/``eval`` ``halo_send_rows``,
``halo_recv_rows``, ``halo_send_bytes``, ``halo_recv_bytes`` (per peer and layer in
the counters), ``emma.active_sources``, ``emma.edges_aggregated`` and
``emma.exact_edges`` (summed over layers), ``setup.buffer_bytes`` (counted once,
at setup, in the first iteration's record: a level, so run totals are the sum
over workers rather than over iterations),
``emma.exact_exchange_bytes`` / ``emma.exact_exchange_rows`` / ``emma.exact_bwd_bytes``
(what one exact exchange sends from this worker forward and backward, the same
run's reference for ratios),
``emma.control_bytes`` (0: no mask is exchanged), ``refresh.refresh_bytes``,
``eval.eval_bytes`` and the loop's ``bwd.allreduce_bytes``.
"""

from __future__ import annotations

from typing import Any

import torch

from strata.engine.gang import GangContext
from strata.operators.kernels import spmm
from strata.operators.kernels.moving_aggr import moving_sum
from strata.operators.layers import BasicGNN
from strata.operators.trainers.distributed.counters import Phase, Traffic
from strata.operators.trainers.distributed.emma.chunker import ChunkStep, SourceChunker
from strata.operators.trainers.distributed.emma.config import check_emma
from strata.operators.trainers.distributed.emma.state import MovingState
from strata.operators.trainers.distributed.halo import halo_exchange
from strata.operators.trainers.distributed.inputs import WorkerInputs
from strata.operators.trainers.distributed.modes import Emma
from strata.operators.trainers.distributed.partition_parallel import (
    PartitionParallelEngine,
)
from strata.operators.trainers.distributed.programs import SliceTensors, layer_widths


class EmmaEngine(PartitionParallelEngine):
    """One rank of Emma training (see the module docstring).

    Args:
        ctx: the rank's gang context.
        inputs: the run's shared inputs; ``inputs.dist.mode`` is the
            :class:`~strata.operators.trainers.distributed.modes.Emma` settings.

    Attributes:
        emma: the Emma settings.
        state: the moving buffers (after :meth:`setup`).
        chunker: the source chunker (after :meth:`setup`).
        refreshes: iterations before which an exact refresh ran (-1: warm start).
    """

    def __init__(self, ctx: GangContext, inputs: WorkerInputs) -> None:
        super().__init__(ctx, inputs)
        emma = inputs.dist.mode
        assert isinstance(emma, Emma), "EmmaEngine runs mode=Emma(...)"
        self.emma = emma
        self.refreshes: list[int] = []

    def setup(self, model: BasicGNN) -> None:
        """Slice the graph, check the model, allocate buffers; warm start if asked."""
        super().setup(model)
        assert self.part is not None
        check_emma(self.emma, mode="exact", aggregation=self.program.kind, model=model)
        self.widths = [d_in for d_in, _ in layer_widths(model)]
        # Features never change, so their halo rows cross once, at setup (the
        # exact engine does the same); layer 1 still aggregates only the active
        # sources, so every layer's estimator is the same.
        x_local = getattr(self, "x_local", None)
        if x_local is None:
            with torch.no_grad():
                halo = halo_exchange(
                    self.x,
                    self.halo,
                    counters=self.counters,
                    phase=Phase.SETUP,
                    layer=1,
                )
            x_local = torch.cat([self.x, halo])
        self.x_input = x_local
        self.state = MovingState.zeros(self.num_owned, self.widths, device=self.device)
        self.counters.add(Phase.SETUP, Traffic(buffer_bytes=self.state.buffer_bytes))
        self.chunker = SourceChunker(
            self.emma,
            self.local_ids_np,
            self.halo,
            self.part.local,
            self.inputs.num_nodes,
            self.device,
        )
        if self.emma.warm_start:
            self.refresh(model, before=-1)

    # ------------------------------------------------------------------ engine
    def train_forward(self, model: BasicGNN, epoch: int) -> torch.Tensor:
        """One Emma iteration's forward (refreshing first when it is due).

        The exact engine's ``train_epoch`` meters it, takes the loss and runs the
        backward; the refresh runs without autograd, so it adds nothing to the
        measured ``tensor_peak_bytes``.
        """
        if self.emma.refreshes_before(epoch):
            model.eval()
            self.refresh(model, before=epoch)
            model.train()
        step = self.chunker.step(epoch)
        self._count_step(step)
        return self._pass(model, epoch=epoch, phase=Phase.FWD, step=step, store=True)

    def eval_forward(self, model: BasicGNN) -> torch.Tensor:
        """Exact evaluation: full exchange and aggregation; buffers untouched."""
        before = self.counters.total(phase=Phase.EVAL).halo_send_bytes
        out = self._pass(model, epoch=None, phase=Phase.EVAL, step=None, store=False)
        sent = self.counters.total(phase=Phase.EVAL).halo_send_bytes - before
        self.counters.add(Phase.EVAL, Traffic(eval_bytes=sent))
        return out

    @torch.no_grad()
    def refresh(self, model: BasicGNN, *, before: int) -> None:
        """An exact pass (no dropout) that overwrites every layer's buffer."""
        start = self.counters.total(phase=Phase.REFRESH).halo_send_bytes
        self._pass(model, epoch=None, phase=Phase.REFRESH, step=None, store=True)
        sent = self.counters.total(phase=Phase.REFRESH).halo_send_bytes - start
        self.counters.add(Phase.REFRESH, Traffic(refresh_bytes=sent))
        self.refreshes.append(before)

    def report(self) -> dict[str, Any]:
        """The exact engine's facts plus Emma's buffers, refreshes and settings."""
        halo_rows = int(self.halo.num_out)
        return {
            **super().report(),
            "emma": {
                "splits": self.emma.splits,
                "redraw_every": self.emma.redraw_every,
                "refresh_every": self.emma.refresh_every,
                "warm_start": self.emma.warm_start,
                "seed": self.emma.seed,
                "refreshes": list(self.refreshes),
                "buffer_bytes": self.state.buffer_bytes,
                "widths": list(self.widths),
                "halo_history_bytes": sum(halo_rows * w * 4 for w in self.widths),
                "exact_exchange_bytes": self._exact_bytes(),
                "local_edges": self.chunker.local.num_edges,
            },
        }

    def _resident(self, model: BasicGNN) -> list[torch.Tensor]:
        """The exact engine's resident tensors plus the moving buffers."""
        tensors = super()._resident(model)
        buffers = [self.state[i] for i in range(len(self.state))]
        self.resident_bytes += self.state.buffer_bytes
        return [*tensors, *buffers]  # (layer 1's input rows are x_local, counted)

    # --------------------------------------------------------------- the layers
    def _exact_bytes(self, rows: int | None = None) -> int:
        """Bytes one exact exchange of layers 2..L moves (``rows`` per layer)."""
        rows = self.halo.send_rows if rows is None else rows
        return sum(rows * w * 4 for w in self.widths[1:])

    def _count_step(self, step: ChunkStep) -> None:
        layers = len(self.widths)
        facts = Traffic(
            active_sources=step.active_sources,
            edges_aggregated=step.edges * layers,
            exact_edges=self.chunker.local.num_edges * layers,
            exact_exchange_bytes=self._exact_bytes(),
            exact_bwd_bytes=self._exact_bytes(self.halo.recv_rows),
            exact_exchange_rows=self.halo.send_rows * (layers - 1),
            control_bytes=0,  # chunk ids need no messages
        )
        self.counters.add(Phase.EMMA, facts)

    def _pass(
        self,
        model: BasicGNN,
        *,
        epoch: int | None,
        phase: Phase,
        step: ChunkStep | None,
        store: bool,
    ) -> torch.Tensor:
        """Logits of the owned rows.

        ``step`` None is an exact pass (full plan and slice, no moving sum);
        ``store`` writes each layer's sum estimate into the buffers; ``epoch``
        None disables dropout.
        """
        assert self.part is not None, "setup() first"
        part: SliceTensors = self.part if step is None else step.part
        plan = self.halo if step is None else step.plan
        h = self.x
        for i, conv in enumerate(model.convs):
            if i == 0:
                local = self.x_input
            else:
                halo = halo_exchange(
                    h, plan, counters=self.counters, phase=phase, layer=i + 1
                )
                local = torch.cat([h, halo])
            local = self.dropout(model, local, epoch=epoch, layer=i)
            # The layer's messages, summed unscaled: the moving sum keeps sums.
            messages = self.program.messages(conv, local)
            total = spmm(part.graph, messages, part.values)
            if step is not None:
                total = moving_sum(
                    total, self.state[i], step.refreshed, self.chunker.degree
                )
            if store:
                self.state.store(i, total.detach())
            z = total if part.row_scale is None else total * part.row_scale.unsqueeze(1)
            root = local[: self.num_owned] if self.program.needs_root else None
            h = self.program.combine(conv, z, root)
            if i < model.num_layers - 1:
                h = model.act(h)
        return h
