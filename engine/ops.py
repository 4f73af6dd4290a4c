"""Three primitive streaming operators built on plain functions.

Most streaming steps are "apply this function to every item"; these wrap such a
function so it need not be a class. Functions must be importable (module level) to
run on the process executor, which ships step definitions to worker processes.

Examples:
    >>> def double(x: int) -> int:
    ...     return 2 * x
    >>> list(Map(double).process(4)), list(Filter(bool).process(0))
    ([8], [])
    >>> list(FlatMap(range).process(3))
    [0, 1, 2]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from strata.engine.operator import Operator

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Map(Operator[T, R], Generic[T, R]):
    """Emit ``fn(item)`` for every item."""

    fn: Callable[[T], R]

    def process(self, item: T) -> Iterable[R]:
        """Apply ``fn`` to one item."""
        return (self.fn(item),)


@dataclass(frozen=True, slots=True)
class FlatMap(Operator[T, R], Generic[T, R]):
    """Emit every element of ``fn(item)`` for every item."""

    fn: Callable[[T], Iterable[R]]

    def process(self, item: T) -> Iterable[R]:
        """Apply ``fn`` to one item and pass on what it returns."""
        return self.fn(item)


@dataclass(frozen=True, slots=True)
class Filter(Operator[T, T], Generic[T]):
    """Emit the items for which ``predicate(item)`` is true."""

    predicate: Callable[[T], object]

    def process(self, item: T) -> Iterable[T]:
        """Keep ``item`` when the predicate holds."""
        return (item,) if self.predicate(item) else ()
