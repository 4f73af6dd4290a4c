"""The epoch loop shared by every single-device trainer, as a streaming step.

A :class:`Trainer` is an :class:`~strata.engine.Operator` with two output ports:

* ``epochs``: one :class:`~strata.operators.trainers.records.EpochRecord` dict per
  epoch,
  emitted as the epoch ends (a resumed run first emits the records of the epochs
  its checkpoint holds, so the port always carries the whole run's epochs, the
  same list an uninterrupted run emits). The engine counts them as the step's
  items out, so
  its progress line for the step shows the epochs done (and ``--quiet`` silences
  it, like every bar), and the step's report counters add ``epochs``, ``seeds``,
  ``batches``, ``train_s``, ``eval_s`` and, for sampled training, ``sample_s``,
  ``gather_s`` and ``stall_s``;
* ``result``: one :class:`~strata.operators.trainers.records.TrainResult` dict at
  the end;
* ``model``: the trained weights at the end (``{"state": {name: tensor}}``, the
  weights the result was measured with), for steps that export predictions,
  embeddings and the model (:mod:`strata.operators.io.results`).

Its input is the training data (see
:func:`~strata.operators.trainers.data.as_training_data`; usually the payload of a
dataset step). Outside a pipeline, :meth:`Trainer.fit` runs the same loop and returns
the result.

One run: validate the data; seed torch (inside ``torch.random.fork_rng``, so the
caller's random state is left as it was); build the model and Adam; resume from a
checkpoint when asked (and emit the records of the epochs it holds); then per epoch
train (subclass), evaluate on the training and validation nodes (subclass), update
early stopping, keep the best weights, checkpoint every ``checkpoint_every`` epochs
and at the end, and emit the record. Finally the best (or last) weights are
evaluated on every split.

A checkpoint holds the whole run so far: the epoch records (losses, accuracies,
times, seeds, batches; the step's counters are their sums), the early-stopping
state and the best weights, besides what the trajectory needs. So the report of a
run killed at epoch ``k`` and resumed lists the same epochs, with the same values,
as an uninterrupted run's (times aside), and its counters cover every epoch.

Reproducibility: on CPU the same configuration and data give bit-identical losses;
a run resumed from a checkpoint continues the uninterrupted run's trajectory
exactly, because the checkpoint holds torch's random state as well as the model and
optimiser. Full-graph dropout masks are counter-based
(:mod:`strata.operators.trainers.dropout`), but sampled training's dropout and
GAT's attention dropout draw from torch's global generator, so two trainers must
not run concurrently in threads of one process (the ``process`` executor gives
each step its own process).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import nn

from strata.engine import Emit, Operator, StepContext
from strata.engine.progress import progress_extra
from strata.operators.errors import OperatorError
from strata.operators.trainers.checkpoint import (
    checkpoint_path,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from strata.operators.trainers.config import (
    DecayScope,
    Monitor,
    TrainConfig,
    resolve_device,
)
from strata.operators.trainers.data import (
    FEATURES,
    SPLITS,
    TrainingData,
    as_training_data,
)
from strata.operators.trainers.early_stopping import EarlyStopping
from strata.operators.trainers.metrics import SplitMetrics as SplitMetrics
from strata.operators.trainers.optim import make_optimizer, set_epoch_lr
from strata.operators.trainers.records import EpochRecord, TrainResult
from strata.operators.trainers.tasks import TaskState

_log = logging.getLogger(__name__)

# torch.optim imports torch._dynamo (about 1 s) at the first optimizer it builds.
# Not importing it here keeps it out of `strata run JOB --help`, `describe` and the
# time before a job's first step; the training step pays it when it builds Adam.
# Gang workers, forked from a server that preloads their modules, get it from
# strata.operators.trainers.distributed, so each worker does not pay it again.


@dataclass(frozen=True, slots=True)
class EpochStats:
    """What one training epoch measured (filled by a trainer's ``train_epoch``)."""

    loss: float
    seeds: int
    batches: int = 1
    sample_s: float = 0.0
    gather_s: float = 0.0
    stall_s: float = 0.0


def split_metrics(logits: torch.Tensor, y: torch.Tensor) -> SplitMetrics:
    """Cross-entropy and accuracy of ``logits`` against labels ``y`` (same rows)."""
    if y.numel() == 0:
        return SplitMetrics(math.nan, math.nan)
    loss = F.cross_entropy(logits, y).item()
    accuracy = (logits.argmax(dim=1) == y).double().mean().item()
    return SplitMetrics(loss, accuracy)


def build_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    """The configured optimiser (:mod:`~strata.operators.trainers.optim`)."""
    return make_optimizer(
        model,
        lr=config.lr,
        weight_decay=config.weight_decay,
        optimizer=config.optimizer,
        first_only=config.decay_scope is DecayScope.FIRST,
    )


@contextlib.contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """Run with ``count`` torch threads (0: unchanged), then restore the setting."""
    before = torch.get_num_threads()
    if count:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        if count:
            torch.set_num_threads(before)


class Trainer(Operator[Any, Any]):
    """Base class of single-device trainers (see the module docstring).

    Subclasses implement :meth:`prepare`, :meth:`train_epoch` and :meth:`evaluate`,
    and may override :meth:`check` and :meth:`release`.
    """

    ports = ("epochs", "result", "model")

    def __init__(self, config: TrainConfig) -> None:
        self.config = config
        self._ctx: StepContext | None = None
        #: The weights of the last run's result (set when a run ends).
        self.trained_state: dict[str, torch.Tensor] | None = None
        #: The last run's trained model (the result's weights) and task state.
        self.model: nn.Module | None = None
        self.task_state: TaskState | None = None

    # ----------------------------------------------------------- operator protocol
    def open(self, ctx: StepContext) -> None:
        """Remember the step (its id names the checkpoint, metrics go to it)."""
        self._ctx = ctx

    def process(self, item: Any) -> Iterator[Emit[dict[str, Any]]]:
        """Train on ``item``: emit each epoch's record, then the result."""
        session = self.session(item)
        while True:
            try:
                record = next(session)
            except StopIteration as stop:
                result: TrainResult = stop.value
                break
            yield Emit("epochs", record.to_dict())
        yield Emit("result", result.to_dict())
        yield Emit("model", {"state": self.trained_state or {}})

    # ------------------------------------------------------------------ plain API
    def fit(
        self, data: Any, on_epoch: Callable[[EpochRecord], None] | None = None
    ) -> TrainResult:
        """Train outside a pipeline; call ``on_epoch`` with every epoch's record."""
        session = self.session(data)
        while True:
            try:
                record = next(session)
            except StopIteration as stop:
                return stop.value
            if on_epoch is not None:
                on_epoch(record)

    @torch.no_grad()
    def predict(self, data: Any) -> torch.Tensor:
        """The trained model's predictions for every node of ``data``.

        One full-graph forward pass in evaluation mode over the task's graph (link
        prediction: the training edges of the same seeded split), turned into the
        task's predictions (classes, values, or node embeddings).

        Raises:
            OperatorError: before a run has trained a model.
        """
        if self.model is None:
            raise OperatorError.build(
                "predict", self.where, "a trained model", "none", "call fit first"
            )
        config = self.config
        data = as_training_data(data, self.where, config.task.targets)
        task = config.task.setup(data, seed=config.seed, where=self.where)
        device = next(self.model.parameters()).device
        x = data.features.get(FEATURES).to(device=device, dtype=torch.float32)
        self.model.eval()
        return task.predict(self.model(task.graph, x.reshape(x.shape[0], -1)))

    @property
    def where(self) -> str:
        """The trainer's name in error messages."""
        name = type(self).__name__
        return f"{name} (step '{self._ctx.step_id}')" if self._ctx else name

    def session(self, data: Any) -> Generator[EpochRecord, None, TrainResult]:
        """The whole run as a generator of epoch records returning the result."""
        config = self.config
        data = as_training_data(data, self.where, config.task.targets)
        self.check(data)
        task = config.task.setup(data, seed=config.seed, where=self.where)
        self.task_state = task
        device = resolve_device(config.device)
        devices = [device] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices), torch_threads(config.threads):
            torch.manual_seed(config.seed)
            width = task.out_channels
            model = config.model.build_module(data.num_features, width).to(device)
            optimizer = build_optimizer(model, config)
            mode: Literal["min", "max"] = (
                "min" if config.monitor is Monitor.VAL_LOSS else "max"
            )
            stopper = EarlyStopping(config.patience, mode)
            run = _RunState(model, optimizer, stopper)
            path = None
            if config.checkpoint_dir is not None:
                name = self._ctx.step_id if self._ctx else "trainer"
                path = checkpoint_path(config.checkpoint_dir, name)
                if config.resume and path.exists():
                    run.restore(load_checkpoint(path), config, device, self.where)
            self.prepare(data, model, device)
            try:
                yield from self._epochs(run, path, device)
                if config.restore_best and run.best_state is not None:
                    model.load_state_dict(run.best_state)
                final = self.evaluate(model, SPLITS)
                self.trained_state = {
                    k: v.detach().cpu().clone() for k, v in model.state_dict().items()
                }
                self.model = model
            finally:
                self.release()
            return run.result(final, config)

    def _epochs(
        self, run: _RunState, path: Any, device: torch.device
    ) -> Iterator[EpochRecord]:
        config = self.config
        for record in run.history:  # a resumed run's earlier epochs, as recorded
            self._count(record)
            yield record
        for epoch in range(run.start, config.epochs):
            if run.stopper.should_stop:
                break  # a resumed run that had already stopped
            start = time.perf_counter()
            set_epoch_lr(
                run.optimizer, config.lr, config.schedule, epoch, config.epochs
            )
            stats = self.train_epoch(run.model, run.optimizer, epoch)
            eval_start = time.perf_counter()
            metrics = self.evaluate(run.model, ("train", "val"))
            end = time.perf_counter()
            monitored = metrics["val"]
            by_loss = config.monitor is Monitor.VAL_LOSS
            value = monitored.loss if by_loss else monitored.accuracy
            improved = run.stopper.update(epoch, value)
            if improved:
                run.best_state = copy.deepcopy(run.model.state_dict())
            record = EpochRecord(
                epoch=epoch,
                loss=stats.loss,
                train_accuracy=metrics["train"].accuracy,
                val_loss=monitored.loss,
                val_accuracy=monitored.accuracy,
                improved=improved,
                seconds=end - start,
                seeds=stats.seeds,
                batches=stats.batches,
                sample_s=stats.sample_s,
                gather_s=stats.gather_s,
                stall_s=stats.stall_s,
                eval_s=end - eval_start,
            )
            run.history.append(record)
            self._count(record)
            last = epoch + 1 == config.epochs or run.stopper.should_stop
            if path is not None and (
                last or (epoch + 1) % config.checkpoint_every == 0
            ):
                save_checkpoint(path, run.checkpoint(epoch + 1, config, device))
            self._log_epoch(record)
            yield record
        name = self._ctx.step_id if self._ctx else "trainer"
        stopped = " (stopped early)" if run.stopper.should_stop else ""
        _log.info(
            "%s: %d epochs%s, best epoch %d",
            name,
            len(run.history),
            stopped,
            run.stopper.best_epoch,
            extra=progress_extra(
                f"{name} epochs", len(run.history), config.epochs, done=True
            ),
        )

    def _log_epoch(self, record: EpochRecord) -> None:
        """One line per epoch (a bar on a terminal; see strata.engine.progress)."""
        name = self._ctx.step_id if self._ctx else "trainer"
        values = {
            "loss": f"{record.loss:.4f}",
            "train_acc": f"{record.train_accuracy:.4f}",
            "val_loss": f"{record.val_loss:.4f}",
            "val_acc": f"{record.val_accuracy:.4f}",
        }
        text = "  ".join(f"{k} {v}" for k, v in values.items())
        epochs = self.config.epochs
        _log.info(
            "%s: epoch %d/%d  %s  %.3fs",
            name,
            record.epoch + 1,
            epochs,
            text,
            record.seconds,
            extra=progress_extra(
                f"{name} epochs", record.epoch + 1, epochs, unit="epoch", values=values
            ),
        )

    def _count(self, record: EpochRecord) -> None:
        if self._ctx is None:
            return
        metrics = self._ctx.metrics
        metrics.counter("epochs").inc()
        metrics.counter("seeds").inc(record.seeds)
        metrics.counter("batches").inc(record.batches)
        metrics.counter("train_s").inc(record.seconds - record.eval_s)
        metrics.counter("eval_s").inc(record.eval_s)
        for name in ("sample_s", "gather_s", "stall_s"):
            metrics.counter(name).inc(getattr(record, name))

    # ------------------------------------------------------------ subclass hooks
    def check(self, data: TrainingData) -> None:
        """Check trainer-specific settings against the data (before any work)."""

    def prepare(
        self, data: TrainingData, model: nn.Module, device: torch.device
    ) -> None:
        """Move data to ``device`` and build what the epochs need.

        :attr:`task_state` holds the task bound to ``data`` (its graph, batches,
        loss and metrics).
        """
        raise NotImplementedError

    def train_epoch(
        self, model: nn.Module, optimizer: torch.optim.Optimizer, epoch: int
    ) -> EpochStats:
        """Run one epoch of optimiser steps."""
        raise NotImplementedError

    def evaluate(
        self, model: nn.Module, splits: tuple[str, ...]
    ) -> Mapping[str, SplitMetrics]:
        """Loss and score of ``model`` (in eval mode) on each of ``splits``."""
        raise NotImplementedError

    def release(self) -> None:
        """Free what :meth:`prepare` built (threads, device memory)."""


class _RunState:
    """The mutable state of one run: what a checkpoint saves and restores."""

    def __init__(
        self, model: nn.Module, optimizer: torch.optim.Optimizer, stopper: EarlyStopping
    ) -> None:
        self.model = model
        self.optimizer = optimizer
        self.stopper = stopper
        self.best_state: dict[str, torch.Tensor] | None = None
        self.history: list[EpochRecord] = []
        self.start = 0

    def checkpoint(
        self, epochs_done: int, config: TrainConfig, device: torch.device
    ) -> dict[str, Any]:
        return {
            "epoch": epochs_done,
            "trajectory": config.trajectory(),
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "rng": rng_state(device),
            "stopper": self.stopper.state_dict(),
            "best_state": self.best_state,
            "history": [r.to_dict() for r in self.history],
        }

    def restore(
        self,
        state: dict[str, Any],
        config: TrainConfig,
        device: torch.device,
        where: str,
    ) -> None:
        if state["trajectory"] != config.trajectory():
            saved, now = state["trajectory"], config.trajectory()
            diff = sorted(k for k in now if saved.get(k) != now[k])
            raise OperatorError.build(
                "resume",
                where,
                "a checkpoint of the same model, optimiser and seed settings",
                f"a checkpoint whose {', '.join(diff)} differ",
                "resume with the earlier run's settings, or use a new checkpoint_dir",
            )
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.stopper.load_state_dict(state["stopper"])
        self.best_state = state["best_state"]
        self.history = [EpochRecord.from_dict(r) for r in state["history"]]
        self.start = int(state["epoch"])
        set_rng_state(state["rng"], device)

    def result(
        self, final: Mapping[str, SplitMetrics], config: TrainConfig
    ) -> TrainResult:
        return TrainResult.from_history(
            self.history,  # every epoch, a resumed run's earlier ones too
            final,
            best_epoch=self.stopper.best_epoch,
            stopped_early=self.stopper.should_stop
            and len(self.history) < config.epochs,
            resumed_from=self.start,
        )
