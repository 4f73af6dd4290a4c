"""``plan=auto``: a training step that lets the planner choose how to train.

:class:`PlannedTrainer` is what :func:`strata.operators.trainers.presets.trainer_for`
returns for a :class:`~strata.operators.trainers.TrainConfig` with ``plan="auto"``.
When its input arrives it runs the planner
(:func:`~strata.operators.planning.planner.plan_training`) on that input with the
job's settings, logs the chosen plan and why, then trains with the chosen
trainer in this step and passes its epoch records, result and model on. Gangs
of up to the core count are candidates whatever the job's ``workers`` says: with
``plan=auto`` the planner decides.

Examples:
    >>> from strata.operators.trainers import ModelConfig, TrainConfig
    >>> PlannedTrainer(TrainConfig(ModelConfig("gcn"), plan="auto"))
    PlannedTrainer(gcn, plan=auto)
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from typing import Any

from strata.engine import Emit, Operator, StepContext
from strata.operators.planning.planner import JobKind, PlannerConfig, plan_training
from strata.operators.trainers.config import TrainConfig

__all__ = ["PlannedTrainer"]

_log = logging.getLogger(__name__)


class PlannedTrainer(Operator[Any, Any]):
    """Train with the plan the planner chooses for the input (module docstring).

    Args:
        config: model and training settings (its ``plan`` is ignored here).
        planner: candidates and memory budget (default: every core, RAM).
        sampling: settings for a sampled plan (None: the sampled defaults).
        kind: whether the job trains full-graph (default) or sampled.
    """

    ports = ("epochs", "result", "model")

    def __init__(
        self,
        config: TrainConfig,
        planner: PlannerConfig | None = None,
        *,
        sampling: Any = None,
        kind: JobKind = JobKind.FULL_GRAPH,
    ) -> None:
        self.config = config
        self.planner = planner or PlannerConfig()
        self.sampling = sampling
        self.kind = kind
        self.inner: Operator[Any, Any] | None = None
        #: The last run's plan report.
        self.report: Any = None
        self._ctx: StepContext | None = None

    def open(self, ctx: StepContext) -> None:
        """Remember the step for the chosen trainer."""
        self._ctx = ctx

    def choose(self, item: Any) -> Operator[Any, Any]:
        """Plan for ``item``; return the chosen trainer (not yet opened)."""
        from strata.operators.planning.runner import trainer_for_plan

        sampled = None
        if self.sampling is not None:
            sampled = (self.sampling.batch_size, tuple(self.sampling.fanouts))
        report = plan_training(
            item, self.config, kind=self.kind, sampled=sampled, planner=self.planner
        )
        self.report = report
        name = self._ctx.step_id if self._ctx else "trainer"
        _log.info(
            "%s: plan=auto chose %s. %s",
            name,
            report.chosen.candidate.label,
            report.why,
        )
        config = dataclasses.replace(self.config, plan="fixed")
        self.inner = trainer_for_plan(report.chosen.candidate, config, self.sampling)
        return self.inner

    def process(self, item: Any) -> Iterator[Emit[dict[str, Any]]]:
        """Plan, then train with the chosen trainer and pass its outputs on."""
        trainer = self.choose(item)
        if self._ctx is not None:
            trainer.open(self._ctx)
        for out in trainer.process(item):
            if isinstance(out, Emit) and out.port in self.ports:
                yield out

    def fit(self, data: Any) -> Any:
        """Plan and train outside a pipeline; the chosen trainer's result."""
        trainer = self.choose(data)
        return trainer.fit(data)  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"PlannedTrainer({self.config.model.name}, plan=auto)"
