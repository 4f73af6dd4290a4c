"""A pipeline: named steps wired by their ids. Building one runs nothing.

A step is a plain function (a *batch* step, run once when its inputs are ready) or an
:class:`~strata.engine.operator.Operator` object (a *streaming* step). Inputs are step
ids, or ``"step.port"`` for one port of a multi-port step. What a step receives:

============================  ==================================================
producer -> consumer          the consumer gets
============================  ==================================================
batch -> batch                the producer's return value, as one argument
streaming -> batch            a ``list`` of every item, as one argument (items of a
                              sharded producer are grouped by shard, in shard order)
batch -> streaming            a stream of one item, the return value
streaming -> streaming        each item, as it arrives (``Tagged`` when the consumer
                              has several inputs)
============================  ==================================================

Keyword arguments of :meth:`Pipeline.step` other than ``shards``, ``key`` and
``ports`` are the batch function's parameters (use ``functools.partial`` for a
function whose own parameter has one of those names).

Examples:
    >>> from strata.engine.ops import Map
    >>> from strata.engine.testing import ListSink, ListSource, run
    >>> def square(x: int) -> int:
    ...     return x * x
    >>> def total(items: list[int], offset: int) -> dict[str, int]:
    ...     return {"total": sum(items) + offset}
    >>> p = Pipeline("squares")
    >>> _ = p.step("numbers", ListSource([1, 2, 3]))
    >>> _ = p.step("square", Map(square), "numbers")
    >>> _ = p.step("sink", ListSink(), "square")
    >>> _ = p.step("total", total, "square", offset=100)
    >>> p.record("total")
    >>> run(p)
    {'sink': [1, 4, 9]}
    >>> from strata.engine.executors import execute
    >>> execute(p).outputs
    {'total': 114}
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from strata.engine.operator import declared_ports, is_operator

if TYPE_CHECKING:
    from strata.engine.plan import Plan

#: A shard key: an Arrow column name, or a function of a Python item.
Key = str | Callable[[Any], object]

DEFAULT_PORT = "out"


class StepKind(enum.Enum):
    """How a step runs."""

    BATCH = "batch"
    STREAMING = "streaming"
    SOURCE = "source"


@dataclass(frozen=True, slots=True)
class Step:
    """One declared step (frozen; see :meth:`Pipeline.step` for the fields' meaning)."""

    id: str
    fn: Any
    inputs: tuple[str, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict, hash=False)
    shards: int = 1
    key: Key | None = None
    ports: tuple[str, ...] = (DEFAULT_PORT,)

    @property
    def kind(self) -> StepKind:
        """Batch function, streaming operator, or an operator with no inputs."""
        if not is_operator(self.fn) or isinstance(self.fn, type):
            return StepKind.BATCH
        return StepKind.STREAMING if self.inputs else StepKind.SOURCE

    @property
    def location(self) -> str:
        """``module:qualname`` of the function or operator class, for messages."""
        target = self.fn if self.kind is StepKind.BATCH else type(self.fn)
        while isinstance(target, functools.partial):
            target = target.func
        module = getattr(target, "__module__", None) or "?"
        name = getattr(target, "__qualname__", None) or type(target).__qualname__
        return f"{module}:{name}"


def split_ref(ref: str) -> tuple[str, str | None]:
    """Split ``"step.port"`` into ``("step", "port")``; a bare id has no port."""
    step_id, dot, port = ref.partition(".")
    return step_id, (port if dot else None)


class Pipeline:
    """A named dataflow of steps, built by :meth:`step` calls (see module docs)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._steps: list[Step] = []
        self._recorded: list[str] = []

    @property
    def steps(self) -> tuple[Step, ...]:
        """The steps in declaration order."""
        return tuple(self._steps)

    @property
    def recorded(self) -> tuple[str, ...]:
        """Ids of the steps whose returned mappings become the run's ``outputs``."""
        return tuple(self._recorded)

    def step(
        self,
        step_id: str,
        fn: Any,
        *inputs: str,
        shards: int = 1,
        key: Key | None = None,
        ports: tuple[str, ...] | None = None,
        **params: Any,
    ) -> Step:
        """Declare a step; problems are reported together by :meth:`validate`.

        Args:
            step_id: Unique, readable id (letters, digits, ``_`` and ``-``); it names
                the step in errors, metrics, reports and checkpoints.
            fn: A function (batch step) or an operator object (streaming step).
            *inputs: Input references, ``"step"`` or ``"step.port"``.
            shards: Copies of a streaming step to run; each input item is routed to
                one copy by ``key`` (Arrow batches are split row-wise).
            key: An Arrow column name, or a function mapping an item to an ``int``,
                ``str`` or ``bytes`` key. Required when ``shards > 1``.
            ports: Output ports of a batch function returning a mapping with exactly
                these keys. Operators declare ports as a class attribute instead.
            **params: Keyword arguments passed to a batch function.

        Returns:
            The frozen step declaration.
        """
        if ports is None:
            ports = declared_ports(fn) or (DEFAULT_PORT,)
        step = Step(
            id=step_id,
            fn=fn,
            inputs=tuple(inputs),
            params=dict(params),
            shards=shards,
            key=key,
            ports=tuple(ports),
        )
        self._steps.append(step)
        return step

    def record(self, *step_ids: str) -> None:
        """Make the mappings these batch steps return the run report's ``outputs``.

        Each value must be JSON-able (numbers, strings, lists of them); keys of
        several recorded steps must not collide.
        """
        self._recorded.extend(step_ids)

    def validate(self) -> Plan:
        """Check the whole pipeline and return its plan.

        Raises:
            PlanError: Listing every problem found (unknown inputs and ports, cycles,
                duplicate ids, arity and declared type mismatches, bad sharding).
        """
        from strata.engine.plan import build_plan

        return build_plan(self)

    def describe(self, *, mermaid: bool = False) -> str:
        """Return the validated plan as text, or as a Mermaid flowchart."""
        from strata.engine.describe import describe_mermaid, describe_text

        plan = self.validate()
        return describe_mermaid(plan) if mermaid else describe_text(plan)

    def __repr__(self) -> str:
        return f"Pipeline({self.name!r}, steps={[s.id for s in self._steps]})"
