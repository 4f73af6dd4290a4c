"""Run a gang: start the workers, watch them, gather results or fail with a rank.

:func:`run_gang` starts ``spec.workers`` processes (:mod:`strata.engine.gang.start`),
each running ``fn(ctx, *args, **kwargs)`` (:mod:`strata.engine.gang.worker`), and
returns their results in rank order; :func:`run_gang_report` also returns each rank's
metrics.

A :class:`~strata.engine.gang.supervisor.GangSupervisor` watches the workers and turns
any failure into a :class:`~strata.engine.gang.errors.GangError` naming the rank; no
worker outlives ``run_gang``, also on Ctrl-C (``KeyboardInterrupt`` propagates
after the workers are gone). If joining the process group fails before any rank
ran ``fn`` (gloo's full-mesh connect does, now and then, on an overloaded
machine), the gang is started again, up to ``GangSpec.startup_retries`` times.

Arguments reach the workers pickled by multiprocessing, which moves CPU torch
tensors into shared memory first (torch's file-descriptor reductions): a large
tensor is copied once, not once per worker. Pass numpy arrays, many tensors, or
buffers the workers write into as :class:`~strata.engine.gang.shared.SharedTensors`.
Results come back as plain pickles through a pipe: fine for metrics and model
weights; large outputs belong in a ``SharedTensors`` the parent created.

Example (starts processes, so not a doctest)::

    import torch
    from strata.engine.gang import GangContext, GangSpec, run_gang

    def total(ctx: GangContext, values: torch.Tensor) -> float:
        part = values[ctx.rank :: ctx.world_size].sum()
        return ctx.all_reduce(part).item()

    run_gang(total, GangSpec(workers=2), torch.arange(10.0))   # [45.0, 45.0]
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable
from typing import Any

from strata.engine.gang.errors import GangError
from strata.engine.gang.report import GangReport
from strata.engine.gang.spec import GangSpec
from strata.engine.gang.supervisor import GangSupervisor, JoinFailed, log

_EXIT_S = 5.0  # after success: how long workers may take to leave the group


def run_gang(
    fn: Callable[..., Any], spec: GangSpec, /, *args: Any, **kwargs: Any
) -> list[Any]:
    """Run ``fn(ctx, *args, **kwargs)`` on ``spec.workers`` ranks; see the module.

    Args:
        fn: A module-level function (it is pickled by reference) taking a
            :class:`~strata.engine.gang.context.GangContext` first.
        spec: How many workers, on which device, with which timeouts.
        *args: Positional arguments for ``fn``, the same for every rank.
        **kwargs: Keyword arguments for ``fn``.

    Returns:
        What ``fn`` returned on each rank, in rank order.

    Raises:
        GangError: A worker raised, died, timed out or stalled; names the rank.
        ValueError: ``spec`` cannot be placed here (``device="cuda"`` on CPU).
    """
    return run_gang_report(fn, spec, *args, **kwargs).results


def run_gang_report(
    fn: Callable[..., Any], spec: GangSpec, /, *args: Any, **kwargs: Any
) -> GangReport:
    """Like :func:`run_gang`, returning results with each rank's metrics and times.

    Raises:
        GangError: As :func:`run_gang`.
    """
    name = spec.name or getattr(fn, "__qualname__", type(fn).__qualname__)
    _check_function(fn, name)
    if spec.resolved_launcher() == "ray":
        from strata.engine.gang.ray_gang import run_ray_gang

        return run_ray_gang(fn, spec, name, args, kwargs)
    placement = spec.placement()
    origin = time.monotonic()
    return run_attempts(
        lambda attempt: GangSupervisor(name, spec, placement, origin, attempt),
        spec,
        name,
        (fn, args, kwargs),
    )


def run_attempts(
    start: Callable[[int], GangSupervisor],
    spec: GangSpec,
    name: str,
    call: tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]],
) -> GangReport:
    """Launch and watch ``start(attempt)``'s gang; retry while joining fails.

    The attempt loop of every launcher (local processes, Ray actors): a gang
    whose ranks all failed to join the process group is started again, up to
    ``spec.startup_retries`` times; any other failure stops the gang and raises.
    """
    for attempt in range(1, spec.startup_retries + 2):
        gang = start(attempt)
        try:
            gang.launch(*call)
            report = gang.watch()
        except JoinFailed as failed:
            gang.stop(0.0)
            if attempt > spec.startup_retries:
                raise failed.error from failed.error.__cause__
            log.warning("gang %r: joining failed, retrying: %s", name, failed.error)
            continue
        except BaseException:
            gang.stop(0.0)
            raise
        gang.stop(_EXIT_S)
        return report
    raise AssertionError("unreachable: the last attempt returns or raises")


def _check_function(fn: Callable[..., Any], name: str) -> None:
    try:
        pickle.dumps(fn)
    except Exception as exc:
        raise GangError.of_gang(
            name,
            "a picklable worker function (defined at module level)",
            f"{type(exc).__name__}: {exc}",
            "workers receive the function by reference; lambdas and closures cannot "
            "be sent. Pass data as arguments instead.",
        ) from exc
