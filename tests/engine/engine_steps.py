"""Module-level steps shared by the engine tests (the process executor imports them)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from strata.engine import Emit, Operator, StepContext, Tagged


def square(x: int) -> int:
    return x * x


def is_even(x: int) -> bool:
    return x % 2 == 0


def identity(x: Any) -> Any:
    return x


def total(items: list[int]) -> dict[str, int]:
    return {"total": int(sum(items)), "count": len(items)}


def add(a: int, b: int) -> int:
    return a + b


def constant(value: int = 7) -> int:
    return value


def batch_list(items: list[Any]) -> list[Any]:
    return items


class Evens(Operator[int, int]):
    """Two ports: even numbers to ``even``, odd ones to ``odd``."""

    ports = ("even", "odd")

    def process(self, item: int) -> Iterable[Emit[int]]:
        yield Emit("even" if item % 2 == 0 else "odd", item)


class Which(Operator[Tagged[Any], tuple[int, Any]]):
    """Reports which input each item came from."""

    def process(self, item: Tagged[Any]) -> Iterable[tuple[int, Any]]:
        yield (item.input, item.item)


class ShardInfo(Operator[int, tuple[int, int, int, int]]):
    """Emits (item, shard, shards, seed) once per item, and a per-shard count last."""

    def open(self, ctx: StepContext) -> None:
        self.ctx = ctx
        self.count = 0

    def process(self, item: int) -> Iterable[tuple[int, int, int, int]]:
        self.count += 1
        self.ctx.metrics.counter("seen").inc()
        yield (item, self.ctx.shard, self.ctx.shards, self.ctx.seed)


class SumByKey(Operator[pa.RecordBatch, pa.RecordBatch]):
    """Keyed aggregation: per-key sums of column ``v`` over its shard's rows."""

    def open(self, ctx: StepContext) -> None:
        self.sums: dict[int, float] = {}

    def process(self, item: pa.RecordBatch) -> Iterable[pa.RecordBatch]:
        keys = item.column("k").to_numpy()
        values = item.column("v").to_numpy()
        for k, v in zip(keys.tolist(), values.tolist(), strict=True):
            self.sums[k] = self.sums.get(k, 0.0) + v
        return ()

    def finish(self) -> Iterator[pa.RecordBatch]:
        keys = sorted(self.sums)
        yield pa.record_batch({"k": keys, "v": [self.sums[k] for k in keys]})


def key_batches(
    num_batches: int = 6, rows: int = 500, seed: int = 0
) -> list[pa.RecordBatch]:
    rng = np.random.default_rng(seed)
    return [
        pa.record_batch({"k": rng.integers(0, 50, rows), "v": rng.random(rows)})
        for _ in range(num_batches)
    ]


class Arrays(Operator[None, np.ndarray]):
    """A fast source: ``count`` float64 arrays of ``size`` bytes each."""

    def __init__(self, count: int, size: int) -> None:
        self.count = count
        self.size = size

    def finish(self) -> Iterator[np.ndarray]:
        for i in range(self.count):
            yield np.full(self.size // 8, float(i))


class Slow(Operator[Any, int]):
    """A slow consumer: sleeps per item, emits the item's first value."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def process(self, item: Any) -> Iterable[int]:
        time.sleep(self.delay_s)
        yield int(item[0])


class Endless(Operator[None, int]):
    """A source that never ends by itself (only cancellation stops it)."""

    def finish(self) -> Iterator[int]:
        i = 0
        while True:
            yield i
            i += 1
            time.sleep(0.001)


class FailAt(Operator[int, int]):
    """Raises ``ValueError`` at item number ``at``."""

    def __init__(self, at: int) -> None:
        self.at = at

    def open(self, ctx: StepContext) -> None:
        self.seen = 0

    def process(self, item: int) -> Iterable[int]:
        self.seen += 1
        if self.seen >= self.at:
            raise ValueError(f"boom at item {item}")
        yield item


class KillSelf(Operator[int, int]):
    """SIGKILLs its own process at the first item (process executor only)."""

    def process(self, item: int) -> Iterable[int]:
        os.kill(os.getpid(), signal.SIGKILL)
        yield item


class Stuck(Operator[int, int]):
    """Sleeps inside user code for a long time at the first item."""

    def process(self, item: int) -> Iterable[int]:
        time.sleep(60)
        yield item


class Opaque:
    """An object the wire refuses to carry."""


class MakeOpaque(Operator[int, Opaque]):
    def process(self, item: int) -> Iterable[Opaque]:
        yield Opaque()
