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

from strata.engine.metrics import StepMetrics

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
        # An explicit body: mypy treats empty protocol methods as abstract, and
        # subclasses (sources, Map) rightly inherit this no-op.
        return

    def process(self, item: In) -> Iterable[Out]:
        """Consume one input item; return or yield the outputs it causes."""
        name = type(self).__qualname__  # a statement first: not abstract to mypy
        raise NotImplementedError(f"{name} receives items but defines no process()")

    def finish(self) -> Iterable[Out]:
        """Yield the outputs left after every input ended (a source's whole output)."""
        return ()


@runtime_checkable
class Stateful(Protocol[S]):
    """An operator whose state is checkpointed (:mod:`strata.engine.checkpoint`).

    At checkpoint ``n`` the engine calls ``snapshot()`` *between* items: for a
    streaming step after every item before barrier ``n`` was processed, for a source
    while ``finish()`` is suspended at a ``yield``, so a source's snapshot must
    describe its position *after* the item it just yielded (advance the position,
    then yield). The state is stored under ``(n, step id, shard)``; on resume the
    engine calls ``open(ctx)``, then ``restore(state)``, then runs as usual.

    A state must cross the wire codec (:mod:`strata.engine.wire`, never pickle):
    ``None``, bool, int, float, str, bytes, numpy arrays and scalars, torch tensors,
    Arrow batches and tables, and dicts (string keys), lists and tuples of those. Return
    data you will not mutate before the next call (the engine writes it after the
    barrier moved on; a background thread must hand over a copy).
    """

    def snapshot(self) -> S:
        """Return the state needed to continue exactly from this point."""
        ...

    def restore(self, state: S) -> None:
        """Replace the operator's state with ``state`` from :meth:`snapshot`."""
        ...


@runtime_checkable
class CheckpointListener(Protocol):
    """An operator told when a checkpoint is durable (optional; any operator).

    ``on_checkpoint_complete(n)`` runs on the task's own thread, between items,
    after checkpoint ``n``'s completion marker was written and fsynced: the place to
    release what a resume can no longer need (a log source truncates segments before
    its offset in ``n``) or to commit a sink's output up to barrier ``n``. Each
    ``n`` is told at most once, in increasing order, and always *before* the task's
    next snapshot: so when it runs, the task's latest ``snapshot()`` is the one in
    checkpoint ``n``. A task that has already finished is not told; a notice lost in
    a crash is not repeated (the next one covers it).
    """

    def on_checkpoint_complete(self, checkpoint: int) -> None:
        """React to checkpoint ``checkpoint`` being complete and durable."""
        ...


class Idle:
    """The type of :data:`IDLE`."""

    _instance: Idle | None = None

    def __new__(cls) -> Idle:  # noqa: D102  (a singleton)
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "IDLE"

    def __reduce__(self) -> str:
        return "IDLE"  # pickles (step definitions) keep the singleton


#: Yielded by a source that has nothing to emit right now (a socket or a growing
#: log with no new data): the engine emits nothing, but may start or inject a
#: checkpoint and deliver completion notices. Yield it every so often while waiting,
#: or interval checkpoints wait for the next real item.
IDLE = Idle()


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
