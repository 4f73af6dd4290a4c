"""Module-level steps for the checkpoint tests (worker processes import them).

The reference pipeline: a durable source (a :class:`ListSource`, whose state is its
offset) -> keyed, sharded counters -> a sink that keeps everything it saw in its
state. Every output row is ``[key, count, item]``; a run that applies each item
exactly once yields, for every key, the counts ``1..n`` exactly once each.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from strata.engine import IDLE, Operator, Pipeline, StepContext, Tagged
from strata.engine.testing import ListSink, ListSource

KEYS = 7


def key_of(item: Any) -> int:
    return int(item) % KEYS


def row_key(row: Any) -> int:
    return int(row[0])


class Counter(Operator[int, list[int]]):
    """Counts items per key; emits ``[key, count so far, item]`` for each item."""

    def open(self, ctx: StepContext) -> None:
        self.counts = np.zeros(KEYS, dtype=np.int64)

    def process(self, item: int) -> Iterable[list[int]]:
        key = key_of(item)
        self.counts[key] += 1
        yield [key, int(self.counts[key]), int(item)]

    def snapshot(self) -> dict[str, Any]:
        return {"counts": self.counts.copy()}

    def restore(self, state: dict[str, Any]) -> None:
        self.counts = np.array(state["counts"], dtype=np.int64)


class Collect(Operator[list[int], list[int]]):
    """A sink keeping every row in its state; releases them all at the end."""

    def open(self, ctx: StepContext) -> None:
        self.rows: list[list[int]] = []
        self.completed: list[int] = []

    def process(self, item: list[int]) -> Iterable[list[int]]:
        self.rows.append(list(item))
        return ()

    def finish(self) -> Iterator[list[int]]:
        yield from sorted(self.rows)

    def snapshot(self) -> dict[str, Any]:
        return {"rows": np.array(self.rows, dtype=np.int64).reshape(-1, 3)}

    def restore(self, state: dict[str, Any]) -> None:
        self.rows = [list(map(int, row)) for row in state["rows"]]

    def on_checkpoint_complete(self, checkpoint: int) -> None:
        self.completed.append(checkpoint)


class CrashOnce(Operator[int, int]):
    """Passes items on; at item ``at`` it fails once (a marker file remembers).

    ``how`` is ``raise`` (an exception: the run fails) or ``kill`` (SIGKILL of its
    own process: the process executor only). Its ``passed`` counter counts the
    items it passed on.
    """

    def __init__(self, at: int, marker: str, how: str = "raise") -> None:
        self.at = at
        self.marker = marker
        self.how = how

    def open(self, ctx: StepContext) -> None:
        self.passed = ctx.metrics.counter("passed")

    def process(self, item: int) -> Iterable[int]:
        if item == self.at and not os.path.exists(self.marker):
            Path(self.marker).touch()
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"injected crash at item {item}")
        self.passed.inc()
        yield item


class KillInSnapshot(Operator[int, int]):
    """SIGKILLs its process while taking checkpoint ``at`` (once): mid-checkpoint."""

    def __init__(self, at: int, marker: str, delay_s: float = 0.002) -> None:
        self.at = at
        self.marker = marker
        self.delay_s = delay_s  # slow enough for several checkpoints to happen

    def open(self, ctx: StepContext) -> None:
        self.snapshots = 0

    def process(self, item: int) -> Iterable[int]:
        time.sleep(self.delay_s)
        yield item

    def snapshot(self) -> int:
        self.snapshots += 1
        if self.snapshots >= self.at and not os.path.exists(self.marker):
            Path(self.marker).touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return self.snapshots

    def restore(self, state: int) -> None:
        self.snapshots = state


class Notices(Operator[int, int]):
    """Logs each notice: its id, whether its manifest existed, snapshots so far."""

    def __init__(self, path: str, directory: str) -> None:
        self.path = path
        self.directory = directory

    def open(self, ctx: StepContext) -> None:
        self.snapshots = 0

    def process(self, item: int) -> Iterable[int]:
        time.sleep(0.001)  # long enough for notices to arrive mid-stream
        yield item

    def snapshot(self) -> int:
        self.snapshots += 1
        return self.snapshots

    def restore(self, state: int) -> None:
        self.snapshots = state

    def on_checkpoint_complete(self, checkpoint: int) -> None:
        manifest = Path(self.directory) / f"checkpoint-{checkpoint:08d}/MANIFEST.json"
        with open(self.path, "a") as out:
            out.write(f"{checkpoint} {int(manifest.exists())} {self.snapshots}\n")


class Pace(Operator[int, int]):
    """Passes items on, sleeping a little per item (so kills land mid-stream)."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def process(self, item: int) -> Iterable[int]:
        time.sleep(self.delay_s)
        yield item


class Join(Operator[Tagged[int], int]):
    """Two inputs in, one stream out (``input * 10_000 + item``)."""

    def process(self, item: Tagged[int]) -> Iterable[int]:
        yield item.input * 10_000 + item.item


class Unencodable(Operator[int, int]):
    """A stateful step whose snapshot the wire codec refuses."""

    def process(self, item: int) -> Iterable[int]:
        yield item

    def snapshot(self) -> object:
        return {1: "int keys"}

    def restore(self, state: object) -> None:
        pass


class Plain(Operator[None, int]):
    """A source that is not Stateful."""

    def finish(self) -> Iterator[int]:
        yield from range(3)


def summary(rows: list[list[int]]) -> dict[str, int]:
    return {"rows": len(rows), "total": int(sum(row[2] for row in rows))}


def counting_pipeline(
    items: int = 300,
    *,
    shards: int = 2,
    before: Operator[int, int] | None = None,
    name: str = "counting",
) -> Pipeline:
    """source -> [before] -> counter (keyed, sharded) -> collect -> out."""
    p = Pipeline(name)
    p.step("numbers", ListSource(range(items)))
    upstream = "numbers"
    if before is not None:
        p.step("before", before, "numbers")
        upstream = "before"
    p.step("count", Counter(), upstream, shards=shards, key=key_of)
    p.step("collect", Collect(), "count", shards=shards, key=row_key)
    p.step("out", ListSink(), "collect")
    p.step("summary", summary, "collect")
    p.record("summary")
    return p


def expected_rows(items: int) -> list[list[int]]:
    counts = [0] * KEYS
    rows = []
    for item in range(items):
        counts[item % KEYS] += 1
        rows.append([item % KEYS, counts[item % KEYS], item])
    return sorted(rows)


class IdleSource(Operator[None, int]):
    """Emits one item, then waits (yielding IDLE) ``idle_s``, three times over."""

    def __init__(self, idle_s: float) -> None:
        self.idle_s = idle_s
        self.position = 0

    def finish(self) -> Iterator[Any]:
        while self.position < 3:
            self.position += 1
            yield self.position - 1
            until = time.monotonic() + self.idle_s
            while time.monotonic() < until:
                time.sleep(0.002)
                yield IDLE

    def snapshot(self) -> int:
        return self.position

    def restore(self, state: int) -> None:
        self.position = state


def build(items: int = 100, shards: int = 2) -> Pipeline:
    """A job for ``strata run`` (the CLI tests)."""
    return counting_pipeline(items, shards=shards)
