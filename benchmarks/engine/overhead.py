"""The engine's per-item cost: CPU time per item per step against plain chains.

A 3-step streaming chain of tiny items (64-row Arrow record batches: ``src``, ``dst``
int64, ``weight`` float32, 1.3 kB) so the engine's own work dominates:

* ``Source``: hands out batches from a pre-built pool (no generation cost);
* ``Scale``: doubles the weights (one ``pyarrow.compute`` multiply, a new batch);
* ``Total``: sums the weights; emits one float at the end.

The same three operator objects run four ways, and each way's **CPU time** (all the
process's threads: ``time.process_time``) is measured, not wall time, so a pipelined
run on two cores is not credited for its parallelism:

* ``generators``: plain Python on one thread (``Scale.process`` chained on
  ``Source.finish`` by generators): the floor;
* ``threads``: a plain pipeline with the engine's parallelism, one thread per step
  and ``queue.Queue(maxsize=8)`` between them (the engine's default channel bound):
  the peer of the local executor;
* ``local``: the local executor (one thread per step, bounded channels);
* ``process``: the process executor (one process per step, pyzmq). The workers'
  CPU is each operator's own process time from ``open`` to the end of ``finish``
  (reported as the counter ``cpu_s``), plus the driver process's time; worker
  start-up is outside it (a fixed cost, not a per-item one).

The per-item cost of a way is ``(cpu - cpu of its peer) / (items * 3)`` in
microseconds per item per step.

    .venv/bin/python benchmarks/engine/overhead.py --items 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import queue
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from strata.engine import Operator, Pipeline, StepContext, execute

ROWS = 64
STEPS = 3
POOL = 16
#: The engine's default channel bound, used by the threaded peer too.
QUEUE_ITEMS = 8


def pool(rows: int = ROWS, size: int = POOL) -> list[pa.RecordBatch]:
    """``size`` distinct seeded batches of ``rows`` weighted edges."""
    rng = np.random.default_rng(7)
    return [
        pa.record_batch(
            {
                "src": rng.integers(0, 1 << 20, rows),
                "dst": rng.integers(0, 1 << 20, rows),
                "weight": rng.random(rows, dtype=np.float32),
            }
        )
        for _ in range(size)
    ]


class _Timed:
    """Reports the process's CPU time from ``open`` to the end of ``finish``."""

    ctx: StepContext | None = None
    started = 0.0

    def open(self, ctx: StepContext) -> None:
        self.ctx = ctx
        self.started = time.process_time()

    def _report(self) -> None:
        if self.ctx is not None:
            self.ctx.metrics.counter("cpu_s").inc(time.process_time() - self.started)


class Source(_Timed, Operator[None, pa.RecordBatch]):
    def __init__(self, items: int, rows: int = ROWS) -> None:
        self.items = items
        self.rows = rows

    def finish(self) -> Iterator[pa.RecordBatch]:
        batches = pool(self.rows)
        for index in range(self.items):
            yield batches[index % len(batches)]
        self._report()


class Scale(_Timed, Operator[pa.RecordBatch, pa.RecordBatch]):
    def process(self, item: pa.RecordBatch) -> Iterable[pa.RecordBatch]:
        weight = pc.multiply(item.column(2), 2.0)
        yield pa.RecordBatch.from_arrays(
            [item.column(0), item.column(1), weight], names=item.schema.names
        )

    def finish(self) -> Iterator[pa.RecordBatch]:
        self._report()
        return iter(())


class Total(_Timed, Operator[pa.RecordBatch, float]):
    def open(self, ctx: StepContext) -> None:
        super().open(ctx)
        self.total = 0.0

    def process(self, item: pa.RecordBatch) -> Iterable[float]:
        self.total += float(np.sum(item.column(2).to_numpy()))
        return ()

    def finish(self) -> Iterator[float]:
        yield self.total
        self._report()


def expected(items: int) -> float:
    """The chain's answer, computed directly."""
    sums = [2.0 * float(np.sum(b.column(2).to_numpy())) for b in pool()]
    return sum(sums[i % len(sums)] for i in range(items))


def run_generators(items: int) -> float:
    """The three steps as plain generators on one thread."""
    source, scale, total = Source(items), Scale(), Total()
    total.open(StepContext("total"))
    for batch in source.finish():
        for out in scale.process(batch):
            for _ in total.process(out):
                pass
    (result,) = total.finish()
    return result


_END = object()


def run_threads(items: int) -> float:
    """The three steps on three threads, ``queue.Queue(maxsize=8)`` between them."""
    source, scale, total = Source(items), Scale(), Total()
    total.open(StepContext("total"))
    first: queue.Queue[Any] = queue.Queue(QUEUE_ITEMS)
    second: queue.Queue[Any] = queue.Queue(QUEUE_ITEMS)
    results: list[float] = []

    def produce() -> None:
        for batch in source.finish():
            first.put(batch)
        first.put(_END)

    def transform() -> None:
        while (batch := first.get()) is not _END:
            for out in scale.process(batch):
                second.put(out)
        second.put(_END)

    def consume() -> None:
        while (batch := second.get()) is not _END:
            for _ in total.process(batch):
                pass
        results.extend(total.finish())

    threads = [threading.Thread(target=f) for f in (produce, transform, consume)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    (result,) = results
    return result


def chain(items: int) -> Pipeline:
    p = Pipeline("overhead")
    p.step("source", Source(items))
    p.step("scale", Scale(), "source")
    p.step("total", Total(), "scale")
    return p


@dataclass(frozen=True)
class Sample:
    """One run of one way: its answer, CPU seconds and wall seconds."""

    result: float
    cpu_s: float
    wall_s: float


def measure(way: str, items: int) -> Sample:
    """Run the chain one ``way`` (see the module docstring) and time it."""
    if way in ("generators", "threads"):
        run: Callable[[int], float] = (
            run_generators if way == "generators" else run_threads
        )
        cpu, wall = time.process_time(), time.perf_counter()
        result = run(items)
        return Sample(result, time.process_time() - cpu, time.perf_counter() - wall)
    pipeline = chain(items)
    cpu, wall = time.process_time(), time.perf_counter()
    outcome = execute(pipeline, way, collect=("total",))
    cpu_s, wall_s = time.process_time() - cpu, time.perf_counter() - wall
    if outcome.error is not None:
        raise outcome.error
    (result,) = outcome.collected["total"]
    if way == "process":  # the workers' CPU, which this process does not see
        steps = outcome.report.steps.values()
        cpu_s += sum(step.counters.get("cpu_s", 0.0) for step in steps)
    return Sample(float(result), cpu_s, wall_s)


WAYS = ("generators", "threads", "local", "process")


def compare(
    items: int, rounds: int, ways: tuple[str, ...] = WAYS
) -> dict[str, list[Sample]]:
    """``rounds`` interleaved rounds (every way once per round), after a warm-up."""
    want = expected(items)
    for way in ways:  # warm-up: imports, the fork server, Arrow's kernels
        measure(way, min(items, 200))
    samples: dict[str, list[Sample]] = {way: [] for way in ways}
    for _ in range(rounds):
        for way in ways:
            sample = measure(way, items)
            if not np.isclose(sample.result, want, rtol=1e-6):
                raise AssertionError(f"{way}: {sample.result} != {want}")
            samples[way].append(sample)
    return samples


def per_item_step_us(cpu_s: float, items: int) -> float:
    """CPU microseconds per item per step."""
    return cpu_s / (items * STEPS) * 1e6


def summary(samples: dict[str, list[Sample]], items: int) -> dict[str, Any]:
    """Median and (min, max) of each way's CPU us per item per step."""
    out: dict[str, Any] = {}
    for way, runs in samples.items():
        us = [per_item_step_us(s.cpu_s, items) for s in runs]
        out[way] = {
            "us": statistics.median(us),
            "spread": [min(us), max(us)],
            "runs": us,
            "wall_s": statistics.median(s.wall_s for s in runs),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ways", default=",".join(WAYS))
    args = parser.parse_args()
    ways = tuple(args.ways.split(","))
    stats = summary(compare(args.items, args.rounds, ways), args.items)
    for way, s in stats.items():
        print(
            f"{way:>10}: {s['us']:7.1f} us/item/step CPU "
            f"[{s['spread'][0]:.1f}, {s['spread'][1]:.1f}]  wall {s['wall_s']:.3f}s"
        )
    if "threads" in stats:
        for way in ("local", "process"):
            if way in stats:
                extra = stats[way]["us"] - stats["threads"]["us"]
                print(f"{way} - threads: {extra:.1f}")


if __name__ == "__main__":
    main()
