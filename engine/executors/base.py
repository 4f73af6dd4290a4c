"""What every executor returns, and how a finished run becomes a report.

An executor runs a plan's tasks and returns an :class:`Outcome`: raw per-task metrics,
the items gathered for the driver, and the first error. :func:`finish_run` turns that
into a :class:`RunResult` the same way for every executor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from strata.engine.config import RunConfig
from strata.engine.errors import StepError, format_error
from strata.engine.metrics import StepMetrics, merge
from strata.engine.plan import Plan
from strata.engine.report import ChannelReport, CheckpointReport, RunReport, StepReport

#: Gathered items, by (step id, port, shard).
Gathered = dict[tuple[str, str, int], list[Any]]


@dataclass(slots=True)
class Outcome:
    """What an executor hands back after running (or failing to run) a plan."""

    metrics: dict[tuple[str, int], StepMetrics] = field(default_factory=dict)
    gathered: Gathered = field(default_factory=dict)
    error: StepError | None = None
    wall_s: float = 0.0
    checkpoint: CheckpointReport | None = None


class Executor(Protocol):
    """Runs a validated plan's tasks (``strata.engine.executors.local``, ...)."""

    name: str

    def run(self, plan: Plan, config: RunConfig, collect: tuple[str, ...]) -> Outcome:
        """Run every task; never raise for a step's failure (return it instead)."""
        ...


@dataclass(frozen=True, slots=True)
class RunResult:
    """A finished run: its report, the items collected for the caller, the error."""

    report: RunReport
    collected: Mapping[str, list[Any]]
    error: StepError | None = None

    @property
    def ok(self) -> bool:
        """Whether every step succeeded."""
        return self.error is None

    @property
    def outputs(self) -> Mapping[str, Any]:
        """The job's outputs (the recorded steps' mappings, merged)."""
        return self.report.outputs


def finish_run(
    plan: Plan,
    outcome: Outcome,
    *,
    executor: str,
    config: RunConfig,
    collect: tuple[str, ...],
    job: str,
    params: Mapping[str, Any],
) -> RunResult:
    """Assemble outputs, collected items and the report from an outcome."""
    error = outcome.error
    outputs: dict[str, Any] = {}
    if error is None:
        try:
            outputs = _outputs(plan, outcome.gathered)
        except StepError as exc:
            error = exc
    collected = {ref: _gather(plan, outcome.gathered, ref) for ref in collect}
    steps: dict[str, StepReport] = {}
    channels: dict[str, ChannelReport] = {}
    for step in plan.steps:
        parts = [m for (s, _), m in sorted(outcome.metrics.items()) if s == step.id]
        merged = merge(parts)
        steps[step.id] = StepReport.from_metrics(step.kind.value, step.shards, merged)
        if step.inputs:
            channels[step.id] = ChannelReport.from_metrics(config.channel, merged)
    report = RunReport(
        job=job,
        executor=executor,
        params=dict(params),
        status="ok" if error is None else "failed",
        error=None if error is None else str(error),
        steps=steps,
        channels=channels,
        outputs=outputs,
        wall_s=round(outcome.wall_s, 6),
        checkpoint=outcome.checkpoint,
    )
    return RunResult(report, collected, error)


def _gather(plan: Plan, gathered: Gathered, ref: str) -> list[Any]:
    step_id, _, port = ref.partition(".")
    step = plan.step(step_id)
    port = port or step.ports[0]
    items: list[Any] = []
    for shard in range(step.shards):
        items.extend(gathered.get((step_id, port, shard), []))
    return items


def _outputs(plan: Plan, gathered: Gathered) -> dict[str, Any]:
    outputs: dict[str, Any] = {}
    for step_id in plan.recorded:
        values = _gather(plan, gathered, step_id)
        value = values[0] if len(values) == 1 else None
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            got = type(value).__qualname__
            raise _output_error(step_id, "a mapping of output names to values", got)
        clash = sorted(set(outputs) & set(value))
        if clash:
            raise _output_error(step_id, "output names unique across steps", str(clash))
        outputs.update(value)
    return outputs


def _output_error(step_id: str, expected: str, got: str) -> StepError:
    message = format_error("outputs", step_id, expected, got)
    return StepError(message, step=step_id, location="engine")
