"""The step shell of a trainer whose whole run is one gang: :class:`GangRunStep`.

A gang trainer (:class:`~strata.operators.trainers.distributed.DistributedTrainer`,
:class:`~strata.operators.trainers.sampled.SampledGangTrainer`) trains in one call,
``fit(data)``, and then emits what every trainer emits: one record per epoch (port
``epochs``), the result (``result``), its run report (``report``) and the weights
(``model``). This class is that shell, written once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

import torch

from strata.engine import Emit, Operator, StepContext
from strata.operators.errors import check
from strata.operators.trainers.config import TrainConfig
from strata.operators.trainers.records import EpochRecord, TrainResult
from strata.operators.trainers.tasks import NodeClassification, check_task_support

__all__ = ["GangRun", "GangRunStep", "check_gang_trainable"]


def check_gang_trainable(config: TrainConfig, where: str, hint: str) -> None:
    """Raise unless a gang trains ``config``: node classification, a layer stack.

    ``hint`` says where a user's own module trains instead.
    """
    check_task_support(config.task, (NodeClassification,), where)
    check(
        config.model.module is None,
        "model.module",
        where,
        "a layer stack (model.name or model.layer)",
        "a user's module",
        hint,
    )


class GangRun(Protocol):
    """What a gang trainer's ``fit`` returns."""

    @property
    def result(self) -> TrainResult:
        """The run's result."""
        ...

    @property
    def history(self) -> list[EpochRecord]:
        """One record per epoch."""
        ...

    @property
    def state(self) -> dict[str, torch.Tensor]:
        """The final (or best) weights."""
        ...

    @property
    def report(self) -> dict[str, Any]:
        """The run report (JSON-able)."""
        ...


class GangRunStep(Operator[Any, Any]):
    """A trainer step that trains in :meth:`fit` and emits the run's ports."""

    ports = ("epochs", "result", "report", "model")
    _ctx: StepContext | None = None

    def open(self, ctx: StepContext) -> None:
        """Remember the step (its id names the gang; metrics go to it)."""
        self._ctx = ctx

    @property
    def where(self) -> str:
        """The trainer's name in error messages."""
        name = type(self).__name__
        return f"{name} (step '{self._ctx.step_id}')" if self._ctx else name

    def fit(self, data: Any) -> GangRun:
        """Train on ``data`` (subclasses)."""
        raise NotImplementedError

    def process(self, item: Any) -> Iterator[Emit[dict[str, Any]]]:
        """Train on ``item``: emit each epoch's record, the result, the report."""
        run = self.fit(item)
        for record in run.history:
            yield Emit("epochs", record.to_dict())
        yield Emit("result", run.result.to_dict())
        yield Emit("report", run.report)
        yield Emit("model", {"state": run.state})
