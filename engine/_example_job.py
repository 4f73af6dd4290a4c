"""A two-step job for the CLI's documentation examples.

Examples:
    >>> build(count=2).describe().splitlines()[0]
    "pipeline 'example': 2 steps"
"""

from __future__ import annotations

from strata.engine.pipeline import Pipeline


def numbers(count: int) -> list[int]:
    """Return ``0, 1, ..., count - 1``."""
    return list(range(count))


def total(values: list[int]) -> dict[str, int]:
    """Return the sum as the job's one output."""
    return {"total": sum(values)}


def build(count: int = 3) -> Pipeline:
    """Sum the first ``count`` integers."""
    p = Pipeline("example")
    p.step("numbers", numbers, count=count)
    p.step("total", total, "numbers")
    p.record("total")
    return p
