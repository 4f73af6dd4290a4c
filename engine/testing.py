"""Testing utilities that ship with the engine: list in, list out, any executor.

Examples:
    >>> from engine.ops import Map
    >>> from engine.pipeline import Pipeline
    >>> p = Pipeline("double")
    >>> _ = p.step("numbers", ListSource([1, 2, 3]))
    >>> _ = p.step("double", Map(abs), "numbers")
    >>> _ = p.step("out", ListSink(), "double")
    >>> run(p)
    {'out': [1, 2, 3]}
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from engine.config import RunConfig
from engine.executors import Executor, execute
from engine.operator import Operator
from engine.pipeline import Pipeline

T = TypeVar("T")


class ListSource(Operator[None, T], Generic[T]):
    """A source emitting the given items in order, lazily (one per channel slot).

    It is :class:`~engine.operator.Stateful`: its state is the position of the next
    item, so a checkpointed run resumes after the last checkpointed item.
    """

    def __init__(self, items: Iterable[T]) -> None:
        self.items = list(items)
        self.position = 0

    def finish(self) -> Iterator[T]:
        """Yield the items from the current position."""
        while self.position < len(self.items):
            item = self.items[self.position]
            self.position += 1  # before the yield: a snapshot there is past it
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
