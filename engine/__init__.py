"""Strata's dataflow engine: pipelines of named steps, run locally or in processes.

The engine knows nothing about graphs. A job builds a :class:`Pipeline` of steps
(plain functions for batch work, :class:`Operator` objects for streams), validates
it, and runs it with :func:`execute` on the ``local`` (threads) or ``process``
(one process per task, pyzmq channels) executor. Streaming runs can checkpoint
their :class:`Stateful` steps and resume exactly once after a crash
(:mod:`strata.engine.checkpoint`).

Examples:
    >>> from strata.engine import Map, Pipeline, execute
    >>> from strata.engine.testing import ListSource
    >>> def count(items: list[int]) -> dict[str, int]:
    ...     return {"count": len(items), "total": sum(items)}
    >>> p = Pipeline("demo")
    >>> _ = p.step("numbers", ListSource(range(5)))
    >>> _ = p.step("plus_one", Map(int.__index__), "numbers")
    >>> _ = p.step("count", count, "plus_one")
    >>> p.record("count")
    >>> execute(p).outputs
    {'count': 5, 'total': 10}
"""

from strata.engine.channels import Barrier, CheckpointComplete, EndOfStream
from strata.engine.checks import at_least, between, check_output_dir, check_output_file
from strata.engine.config import ChannelBounds, CheckpointConfig, RunConfig
from strata.engine.errors import (
    CheckpointError,
    PlanError,
    RemoteError,
    StepError,
    UsageError,
    WireError,
)
from strata.engine.executors import (
    EXECUTORS,
    Executor,
    LocalExecutor,
    RunResult,
    execute,
)
from strata.engine.executors.process import ProcessExecutor
from strata.engine.gang import (
    GangContext,
    GangError,
    GangReport,
    GangSpec,
    GangStep,
    gang_step,
    run_gang,
    run_gang_report,
)
from strata.engine.metrics import StepMetrics
from strata.engine.operator import (
    IDLE,
    CheckpointListener,
    Emit,
    Operator,
    Stateful,
    StepContext,
    Tagged,
)
from strata.engine.ops import Filter, FlatMap, Map
from strata.engine.pipeline import Pipeline, Step, StepKind
from strata.engine.plan import Plan
from strata.engine.report import ChannelReport, CheckpointReport, RunReport, StepReport

__all__ = [
    "EXECUTORS",
    "IDLE",
    "Barrier",
    "ChannelBounds",
    "ChannelReport",
    "CheckpointComplete",
    "CheckpointConfig",
    "CheckpointError",
    "CheckpointListener",
    "CheckpointReport",
    "Emit",
    "EndOfStream",
    "Executor",
    "Filter",
    "FlatMap",
    "GangContext",
    "GangError",
    "GangReport",
    "GangSpec",
    "GangStep",
    "LocalExecutor",
    "Map",
    "Operator",
    "Pipeline",
    "Plan",
    "PlanError",
    "ProcessExecutor",
    "RemoteError",
    "RunConfig",
    "RunReport",
    "RunResult",
    "Stateful",
    "Step",
    "StepContext",
    "StepError",
    "StepKind",
    "StepMetrics",
    "StepReport",
    "Tagged",
    "UsageError",
    "WireError",
    "at_least",
    "between",
    "check_output_dir",
    "check_output_file",
    "execute",
    "gang_step",
    "run_gang",
    "run_gang_report",
]
