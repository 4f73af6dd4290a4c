"""Run a pipeline: one :func:`execute` call, executors swapped behind it.

Examples:
    >>> from strata.engine.pipeline import Pipeline
    >>> def answer() -> dict[str, int]:
    ...     return {"answer": 42}
    >>> p = Pipeline("demo")
    >>> _ = p.step("answer", answer)
    >>> p.record("answer")
    >>> result = execute(p, "local")
    >>> result.ok, result.outputs, result.report.status
    (True, {'answer': 42}, 'ok')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from strata.engine.config import RunConfig
from strata.engine.errors import PlanError, format_error
from strata.engine.executors.base import Executor, Outcome, RunResult, finish_run
from strata.engine.executors.local import LocalExecutor
from strata.engine.pipeline import Pipeline
from strata.engine.plan import Plan


def _process() -> Executor:
    from strata.engine.executors.process import ProcessExecutor

    return ProcessExecutor()


def _ray() -> Executor:
    from strata.engine.executors.ray_driver import RayExecutor

    return RayExecutor()


#: Executors by the name ``strata run --executor`` accepts.
EXECUTORS: dict[str, Callable[[], Executor]] = {
    "local": LocalExecutor,
    "process": _process,
    "ray": _ray,
}


def execute(
    pipeline: Pipeline | Plan,
    executor: str | Executor = "local",
    *,
    config: RunConfig | None = None,
    collect: tuple[str, ...] = (),
    check: bool = True,
    job: str | None = None,
    params: Mapping[str, Any] | None = None,
) -> RunResult:
    """Validate and run ``pipeline``; return its report and collected items.

    Args:
        pipeline: A pipeline (validated here) or an already validated plan.
        executor: ``"local"`` (threads, the default), ``"process"`` (one process per
            task, pyzmq channels), ``"ray"`` (Ray actors and tasks; needs Ray), or
            an executor object.
        config: Channel bounds, seed, progress bars, shutdown limits.
        collect: ``"step"`` or ``"step.port"`` references whose items to return in
            ``RunResult.collected`` (meant for small results and tests).
        check: Raise the :class:`~strata.engine.errors.StepError` of a failed run (like
            ``subprocess.run(check=True)``); with ``False``, return a failed result.
        job: Name the run report gives the job (default: the pipeline's name).
        params: The job parameters to record in the report.

    Returns:
        The run's result; ``result.report`` is the JSON run report.

    Raises:
        PlanError: The pipeline is invalid (every problem at once).
        StepError: A step failed and ``check`` is true.
    """
    plan = pipeline if isinstance(pipeline, Plan) else pipeline.validate()
    _check_collect(plan, collect)
    runner = EXECUTORS[executor]() if isinstance(executor, str) else executor
    config = config or RunConfig()
    outcome = runner.run(plan, config, collect)
    result = finish_run(
        plan,
        outcome,
        executor=runner.name,
        config=config,
        collect=collect,
        job=job or plan.name,
        params=params or {},
    )
    if check and result.error is not None:
        raise result.error
    return result


def _check_collect(plan: Plan, collect: tuple[str, ...]) -> None:
    problems = []
    for ref in collect:
        step_id, _, port = ref.partition(".")
        ids = [step.id for step in plan.steps]
        if step_id not in ids:
            problems.append(
                format_error("collect", step_id, "the id of a declared step", repr(ref))
            )
        elif port and port not in plan.step(step_id).ports:
            ports = ", ".join(plan.step(step_id).ports)
            problems.append(format_error("collect", step_id, f"one of ({ports})", port))
    if problems:
        raise PlanError(plan.name, problems)


__all__ = ["EXECUTORS", "Executor", "LocalExecutor", "Outcome", "RunResult", "execute"]
