"""The epoch loop every rank runs, around a mode-specific :class:`WorkerEngine`.

It mirrors the single-device loop (:mod:`strata.operators.trainers.base`) step for step,
so a distributed run's records equal the oracle's: seed and build the model (the
same code as ``FullGraphTrainer``), broadcast rank 0's weights, build Adam; then
per epoch zero the gradients, let the engine run one full-graph forward and
backward (its loss is already the global mean), all-reduce the gradients with
``SUM`` (each rank's loss is a share of the global loss, ``hongtu.md`` §3.9),
step, evaluate on the training and validation nodes, update early stopping and
the best weights; finally evaluate the best (or last) weights on every split.

Every rank holds the same model and the same all-reduced metrics, so every rank
takes the same early-stopping decisions; every rank returns a
:class:`~strata.operators.trainers.distributed.inputs.WorkerResult`: its transfer
counters and report and, from rank 0, the history, the result and the weights.

A :class:`WorkerEngine` (``PartitionParallelEngine``, ``ChunkedEngine``,
``EmmaEngine``; one per mode) implements three methods and keeps a
:class:`~strata.operators.trainers.distributed.counters.TransferCounters`.
"""

from __future__ import annotations

import copy
import math
import os
import signal
import time
from collections.abc import Mapping
from typing import Any, Literal, Protocol

import numba
import torch
from numba.np.ufunc.parallel import threading_layer

from strata.engine.gang import GangContext, GradientAllReducer, broadcast_module
from strata.operators.layers import BasicGNN
from strata.operators.trainers.base import SplitMetrics, build_optimizer
from strata.operators.trainers.config import Monitor, TrainConfig
from strata.operators.trainers.data import SPLITS
from strata.operators.trainers.distributed.config import DistributedConfig
from strata.operators.trainers.distributed.counters import (
    Phase,
    Traffic,
    TransferCounters,
)
from strata.operators.trainers.distributed.inputs import WorkerResult
from strata.operators.trainers.early_stopping import EarlyStopping
from strata.operators.trainers.records import EpochRecord, TrainResult


class WorkerEngine(Protocol):
    """One rank's share of full-graph training in some mode."""

    counters: TransferCounters

    def setup(self, model: BasicGNN) -> None:
        """Prepare for ``model`` (after its weights were broadcast)."""

    def train_epoch(self, model: BasicGNN, epoch: int) -> float:
        """Forward and backward over this rank's share; return the global loss.

        Gradients are left in the parameters' ``.grad`` (this rank's share of the
        global gradient); the loop all-reduces them.
        """

    def evaluate(
        self, model: BasicGNN, splits: tuple[str, ...]
    ) -> Mapping[str, SplitMetrics]:
        """Global loss and accuracy per split, in evaluation mode (no dropout)."""

    def report(self) -> dict[str, Any]:
        """JSON-able facts about this rank's run (plan, peaks)."""


def run_worker(
    ctx: GangContext,
    engine: WorkerEngine,
    model: BasicGNN,
    config: TrainConfig,
    dist: DistributedConfig,
) -> WorkerResult:
    """Train on this rank; return its results (see the module docstring)."""
    _quiet_numba_threads()
    model = model.to(ctx.device)
    broadcast_module(model)
    engine.setup(model)
    optimizer = build_optimizer(model, config)
    reducer = GradientAllReducer(model, op="sum", compression=dist.compression)
    mode: Literal["min", "max"] = "min" if config.monitor is Monitor.VAL_LOSS else "max"
    stopper = EarlyStopping(config.patience, mode)
    best: dict[str, torch.Tensor] | None = None
    history: list[EpochRecord] = []
    counters = engine.counters
    epoch_now = [-1]  # read by the mid-epoch fault hook
    _arm_backward_fault(dist, ctx.rank, model, epoch_now)
    for epoch in range(config.epochs):
        if stopper.should_stop:
            break
        epoch_now[0] = epoch
        _maybe_fail(dist, ctx.rank, epoch, "start")
        start = time.perf_counter()
        model.train()
        optimizer.zero_grad(set_to_none=True)
        loss = engine.train_epoch(model, epoch)
        sent = reducer.payload_bytes
        reducer.reduce()
        counters.add(Phase.BWD, Traffic(allreduce_bytes=reducer.payload_bytes - sent))
        optimizer.step()
        eval_start = time.perf_counter()
        metrics = engine.evaluate(model, ("train", "val"))
        end = time.perf_counter()
        watched = metrics["val"]
        value = watched.loss if config.monitor is Monitor.VAL_LOSS else watched.accuracy
        improved = stopper.update(epoch, value)
        if improved:
            best = copy.deepcopy(model.state_dict())
        history.append(
            EpochRecord(
                epoch=epoch,
                loss=loss,
                train_accuracy=metrics["train"].accuracy,
                val_loss=watched.loss,
                val_accuracy=watched.accuracy,
                improved=improved,
                seconds=end - start,
                seeds=engine_seeds(engine),
                eval_s=end - eval_start,
            )
        )
        counters.end_epoch(ctx.metrics)
        ctx.metrics.append("epoch_s", end - start)
        ctx.metrics.append("train_s", eval_start - start)
        ctx.heartbeat(f"epoch {epoch + 1}/{config.epochs}")
    if config.restore_best and best is not None:
        model.load_state_dict(best)
    final = engine.evaluate(model, SPLITS)
    if not ctx.is_main:
        return WorkerResult(ctx.rank, counters.snapshot(), engine.report())
    return WorkerResult(
        ctx.rank,
        counters.snapshot(),
        engine.report(),
        history=tuple(history),
        result=_result(history, stopper, final, config),
        state={k: v.detach().cpu() for k, v in model.state_dict().items()},
    )


def _quiet_numba_threads() -> None:
    """Run numba's parallel kernels on its own thread pool, sized like torch's.

    Measured here: once torch has run an OpenMP region, a numba kernel on numba's
    default OpenMP layer made every later small torch op (``index_add_`` of 169
    rows) take 0.15-0.23 s instead of 40 us. numba's ``workqueue`` layer does not
    interfere; it can only be chosen before numba's first parallel launch.
    """
    try:
        threading_layer()  # raises until a parallel kernel has run
    except ValueError:
        # numba.config sets its options at import time from the environment, so
        # mypy sees no THREADING_LAYER; it is numba's documented setting.
        numba.config.THREADING_LAYER = "workqueue"  # type: ignore[attr-defined]
    numba.set_num_threads(max(1, min(numba.get_num_threads(), torch.get_num_threads())))


def engine_seeds(engine: WorkerEngine) -> int:
    """Training nodes per epoch (the global count), for the records."""
    return int(getattr(engine, "num_train", 0))


def _result(
    history: list[EpochRecord],
    stopper: EarlyStopping,
    final: Mapping[str, SplitMetrics],
    config: TrainConfig,
) -> TrainResult:
    return TrainResult.from_history(
        history,
        final,
        best_epoch=stopper.best_epoch,
        stopped_early=stopper.should_stop and len(history) < config.epochs,
    )


def _maybe_fail(dist: DistributedConfig, rank: int, epoch: int, stage: str) -> None:
    fault = dist.gang.fault
    if fault is None or (fault.rank, fault.epoch, fault.stage) != (rank, epoch, stage):
        return
    if fault.how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise RuntimeError(f"injected fault on rank {rank} at epoch {epoch}")


def _arm_backward_fault(
    dist: DistributedConfig, rank: int, model: BasicGNN, epoch_now: list[int]
) -> None:
    """A ``stage="backward"`` fault fires from the last layer's weight gradient.

    Every mode computes that gradient first in its backward pass, before the
    earlier layers' halo or chunk exchanges, so the peers are left waiting in a
    collective: a failure in the middle of an epoch.
    """
    fault = dist.gang.fault
    if fault is None or fault.stage != "backward" or fault.rank != rank:
        return
    weight = next(iter(model.convs[-1].parameters()))

    def hook(grad: torch.Tensor) -> torch.Tensor:
        _maybe_fail(dist, rank, epoch_now[0], "backward")
        return grad

    weight.register_hook(hook)


def reduce_split_metrics(
    ctx: GangContext,
    sums: Mapping[str, tuple[float, float, int]],
) -> dict[str, SplitMetrics]:
    """Global loss and accuracy from per-rank (loss sum, correct count, total).

    Args:
        ctx: the gang context (one all-reduce for every split).
        sums: per split, this rank's summed cross-entropy, correct predictions
            and the split's global node count.
    """
    names = list(sums)
    local = torch.tensor(
        [[float(sums[s][0]), float(sums[s][1])] for s in names], dtype=torch.float64
    )
    if names:
        local = ctx.all_reduce(local.to(ctx.device)).cpu()
    out = {}
    for i, split in enumerate(names):
        total = sums[split][2]
        if total == 0:
            out[split] = SplitMetrics(math.nan, math.nan)
        else:
            out[split] = SplitMetrics(
                float(local[i, 0]) / total, float(local[i, 1]) / total
            )
    return out
