"""Testing utilities that ship with the engine: list in, list out, any executor.

Examples:
    >>> from strata.engine.ops import Map
    >>> from strata.engine.pipeline import Pipeline
    >>> p = Pipeline("double")
    >>> _ = p.step("numbers", ListSource([1, 2, 3]))
    >>> _ = p.step("double", Map(abs), "numbers")
    >>> _ = p.step("out", ListSink(), "double")
    >>> run(p)
    {'out': [1, 2, 3]}
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from strata.engine.config import RunConfig
from strata.engine.executors import Executor, execute
from strata.engine.operator import Operator
from strata.engine.pipeline import Pipeline

T = TypeVar("T")


class AbortError(RuntimeError):
    """Raised by a :class:`ListSource` that reaches an :class:`Abort` item."""


@dataclass(frozen=True, slots=True)
class Abort:
    """A crash to inject: an item of a :class:`ListSource`, never emitted.

    The first time a source reaches it, it creates ``marker`` and fails: it raises
    :class:`AbortError` or, with ``kill=True``, SIGKILLs its own process (the
    process executor's worker). Once ``marker`` exists the item is skipped, so a
    resumed run gets past it (as Bytewax's ``TestingSource.ABORT``; the marker file
    makes "once" hold across worker processes).

    Examples:
        >>> import tempfile
        >>> from strata.engine.pipeline import Pipeline
        >>> marker = tempfile.mktemp()
        >>> p = Pipeline("abort")
        >>> _ = p.step("numbers", ListSource([1, Abort(marker), 2]))
        >>> _ = p.step("out", ListSink(), "numbers")
        >>> from strata.engine.executors import execute
        >>> execute(p, check=False).ok, run(p)
        (False, {'out': [1, 2]})
    """

    marker: str | Path
    kill: bool = False

    def trigger(self) -> None:
        """Fail the first time (see the class docstring); do nothing afterwards."""
        if os.path.exists(self.marker):
            return
        Path(self.marker).touch()
        if self.kill:
            os.kill(os.getpid(), signal.SIGKILL)
        raise AbortError(f"aborted at {self!r}")


class ListSource(Operator[None, T], Generic[T]):
    """A source emitting the given items in order, lazily (one per channel slot).

    It is :class:`~strata.engine.operator.Stateful`: its state is the position of the
    next item, so a checkpointed run resumes after the last checkpointed item. An
    :class:`Abort` among the items injects a crash there.
    """

    def __init__(self, items: Iterable[T | Abort]) -> None:
        self.items = list(items)
        self.position = 0

    def finish(self) -> Iterator[T]:
        """Yield the items from the current position."""
        while self.position < len(self.items):
            item = self.items[self.position]
            self.position += 1  # before the yield: a snapshot there is past it
            if isinstance(item, Abort):
                item.trigger()
                continue
            yield item

    def snapshot(self) -> int:
        """Return the position of the next item."""
        return self.position

    def restore(self, state: int) -> None:
        """Continue from position ``state``."""
        self.position = state

    def __repr__(self) -> str:
        return f"ListSource({len(self.items)} items)"


class ListSink(Operator[T, T], Generic[T]):
    """A terminal step whose items :func:`run` returns (it passes items through)."""

    def process(self, item: T) -> Iterable[T]:
        """Pass the item on to the driver."""
        return (item,)


def run(
    pipeline: Pipeline,
    executor: str | Executor = "local",
    *,
    config: RunConfig | None = None,
) -> dict[str, list[Any]]:
    """Run ``pipeline`` and return every :class:`ListSink` step's items, by step id.

    Items of a sink downstream of a sharded step arrive in a different interleaving
    on each run; sort them before comparing.

    Raises:
        StepError: A step failed.
    """
    sinks = _sinks(pipeline.steps)
    result = execute(pipeline, executor, config=config, collect=sinks)
    return {sink: list(items) for sink, items in result.collected.items()}


def _sinks(steps: Sequence[Any]) -> tuple[str, ...]:
    return tuple(step.id for step in steps if isinstance(step.fn, ListSink))
