"""A gang as a pipeline step: :class:`GangStep`, made by :func:`gang_step`.

A ``GangStep`` is a batch step (a callable): when its inputs are ready it runs
``fn(ctx, *inputs, **params)`` on a gang and returns ``GangReport.to_dict()``:
``{"results": [one per rank], "workers": [per-rank times, counters, peaks,
series], "startup_s": ..., "wall_s": ..., ...}``. Downstream steps read
``train["results"][0]``; recording the step puts the workers' counters in the run
report (keep ``results`` JSON-able for that, or record a step that picks them).

It works on both executors. On ``local`` the gang starts from the driver's fork
server (warm after the first gang: ~0.1 s for two workers). On ``process`` the
step runs in a worker process, whose inputs arrived over the engine's wire and
which starts a fork server of its own (one torch import, a few seconds); the
gang's workers are its children and die with it. The step (function and spec)
is pickled to reach that process, so ``fn`` must be defined at module level.

A failed gang raises :class:`~strata.engine.gang.errors.GangError`, which the engine
wraps in a ``StepError`` naming the step, with the gang error (and the worker's
traceback) chained.

Example (starts processes, so not a doctest)::

    from strata.engine import Pipeline, execute
    from strata.engine.gang import GangContext, GangSpec, gang_step

    def train(ctx: GangContext, data: dict, epochs: int) -> dict:
        ...                                   # one rank's share of the work
        return {"loss": losses}

    p = Pipeline("train")
    p.step("data", load_data)
    p.step("train", gang_step(train, GangSpec(workers=2)), "data", epochs=20)
    p.step("report", summarize, "train")      # summarize(train: dict) -> dict
    p.record("report")
    execute(p, "process")

Examples:
    >>> from strata.engine.gang import GangSpec, rank_seed
    >>> step = gang_step(rank_seed, GangSpec(workers=2), name="seeds")
    >>> step.spec.name, step.spec.workers
    ('seeds', 2)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from strata.engine.gang.launcher import run_gang_report
from strata.engine.gang.spec import GangSpec


@dataclass(frozen=True, slots=True)
class GangStep:
    """A batch step running ``fn`` on a gang (see the module docstring).

    Attributes:
        fn: The worker function, ``fn(ctx, *inputs, **params)``.
        spec: The gang to run it on.
    """

    fn: Callable[..., Any]
    spec: GangSpec

    def __call__(self, *inputs: Any, **params: Any) -> dict[str, Any]:
        """Run the gang on the step's inputs; return ``GangReport.to_dict()``."""
        return run_gang_report(self.fn, self.spec, *inputs, **params).to_dict()


def gang_step(
    fn: Callable[..., Any], spec: GangSpec, *, name: str | None = None
) -> GangStep:
    """Return a pipeline step running ``fn`` on the gang ``spec`` describes.

    Args:
        fn: A module-level function taking a ``GangContext`` first, then the
            step's inputs and keyword parameters.
        spec: Workers, device and timeouts.
        name: Names the gang in errors (default: the spec's name, else ``fn``'s).
    """
    if name is not None:
        spec = dataclasses.replace(spec, name=name)
    return GangStep(fn, spec)
