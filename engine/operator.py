"""What a streaming step is: the :class:`Operator` protocol and its companions.

A *batch* step is a plain function. A *streaming* step is an object with
``open(ctx)``, ``process(item) -> iterable`` and ``finish() -> iterable``:

* ``open`` receives a :class:`StepContext` (step id, shard, seed, metrics) before any
  item; create resources (files, sockets, models) here, not in ``__init__``, because
  every shard runs its own copy of the operator object.
* ``process`` is called once per input item and yields zero or more outputs.
* ``finish`` is called after every input has ended and yields the last outputs.
  A **source** is an operator with no inputs: only ``open`` and ``finish`` run, and
  ``finish`` should be a generator so items are produced lazily, as downstream
  channels make room (backpressure).

Outputs go to the step's only port; a step that declares several ports (a class
attribute ``ports = ("train", "test")``) yields :class:`Emit` values naming the port.
A step with several inputs receives each item wrapped in :class:`Tagged`, whose
``input`` is the position of the input in the step's declaration.

Subclassing ``Operator[In, Out]`` explicitly inherits do-nothing ``open`` and
``finish``, and lets ``Pipeline.validate`` compare the declared item types.

Examples:
    >>> class Doubler(Operator[int, int]):
    ...     def process(self, item: int) -> Iterable[int]:
    ...         yield 2 * item
    >>> op = Doubler()
    >>> op.open(StepContext("double"))
    >>> list(op.process(21)), list(op.finish())
    ([42], [])
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from engine.metrics import StepMetrics

In = TypeVar("In", contravariant=True)
Out = TypeVar("Out", covariant=True)
S = TypeVar("S")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class StepContext:
    """What a running operator knows about itself.

    Attributes:
        step_id: The step's id (names its metrics, errors and checkpoint state).
        shard: This copy's shard index, ``0 <= shard < shards``.
        shards: How many copies of the step run (1 unless the step is keyed).
        seed: A seed derived from the run's seed, the step id and the shard.
        inputs: The step's input references, in declaration order (``Tagged.input``
            indexes this tuple).
        metrics: This task's counters; ``ctx.metrics.counter("seeds").inc(n)``.
    """

    step_id: str
    shard: int = 0
    shards: int = 1
    seed: int = 0
    inputs: tuple[str, ...] = ()
    metrics: StepMetrics = field(default_factory=StepMetrics, compare=False)


@runtime_checkable
class Operator(Protocol[In, Out]):
    """A streaming step (see the module docstring for the call order)."""

    def open(self, ctx: StepContext) -> None:
        """Prepare to run as ``ctx.step_id``; called once, before any item."""

    def process(self, item: In) -> Iterable[Out]:
        """Consume one input item; return or yield the outputs it causes."""
        raise NotImplementedError(
            f"{type(self).__qualname__} receives items but defines no process()"
        )

    def finish(self) -> Iterable[Out]:
        """Yield the outputs left after every input ended (a source's whole output)."""
        return ()


@runtime_checkable
class Stateful(Protocol[S]):
    """An operator whose state can be checkpointed (opt-in; see ``engine.channels``).

    At a checkpoint barrier the engine calls ``snapshot()`` and stores the state under
    ``(step id, shard)``; on recovery it calls ``restore(state)`` after ``open()``
    and before the first replayed item.
    """

    def snapshot(self) -> S:
        """Return the state needed to continue exactly from this point."""
        ...

    def restore(self, state: S) -> None:
        """Replace the operator's state with ``state`` from :meth:`snapshot`."""
        ...


@dataclass(frozen=True, slots=True)
class Emit(Generic[T]):
    """An output addressed to one named port of a multi-port step.

    Examples:
        >>> Emit("test", [1, 2])
        Emit(port='test', item=[1, 2])
    """

    port: str
    item: T


@dataclass(frozen=True, slots=True)
class Tagged(Generic[T]):
    """An input item of a multi-input streaming step, with the input it came from.

    Attributes:
        input: Position of the input in the step's declaration
            (``p.step("join", Join(), "left", "right")``: 0 is ``left``).
        item: The item itself.
    """

    input: int
    item: T


def is_operator(obj: object) -> bool:
    """Return whether ``obj`` is a streaming operator (rather than a batch function)."""
    return isinstance(obj, Operator)


def declared_ports(obj: object) -> tuple[str, ...] | None:
    """Return the ``ports`` an operator class declares, or ``None`` for the default."""
    ports: Any = getattr(type(obj), "ports", None)
    if ports is None:
        return None
    return tuple(ports)
