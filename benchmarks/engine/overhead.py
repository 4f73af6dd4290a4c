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
microseconds per item per step: the engine's overhead. Rounds are interleaved (every
way once per round, after a warm-up of each), and the overhead is the median of the
per-round differences, so load from other work on a shared machine hits the engine
and its peer alike.

    .venv/bin/python benchmarks/engine/overhead.py --items 2000 --rounds 3
    .venv/bin/python benchmarks/engine/overhead.py --items 5000 --rounds 5 \\
        --out benchmarks/results/engine.json
"""

from __future__ import annotations

import argparse
import json
import platform
import queue
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
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
#: Issue 15's target: the local executor's overhead over its peer, us/item/step.
TARGET_US = 20.0


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


@dataclass(frozen=True)
class Figure:
    """A median with its spread (min, max) over the rounds."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: list[float]) -> Figure:
        return cls(statistics.median(values), min(values), max(values))

    def text(self) -> str:
        return f"{self.median:.1f} [{self.low:.1f}, {self.high:.1f}]"


def figures(samples: dict[str, list[Sample]], items: int) -> dict[str, Figure]:
    """Each way's CPU us per item per step, and each engine way's overhead over
    each plain way (``local-threads``: the median of per-round differences)."""
    us = {
        way: [per_item_step_us(s.cpu_s, items) for s in runs]
        for way, runs in samples.items()
    }
    out = {way: Figure.of(values) for way, values in us.items()}
    for engine in ("local", "process"):
        for plain in ("threads", "generators"):
            if engine in us and plain in us:
                paired = [e - p for e, p in zip(us[engine], us[plain], strict=True)]
                out[f"{engine}-{plain}"] = Figure.of(paired)
    return out


def rows(
    stats: dict[str, Figure], items: int, rounds: int, command: str
) -> list[dict[str, Any]]:
    """The results-table rows (``benchmarks/results/engine.json``)."""
    work = f"{{}}, 3-step chain, {items} items of {ROWS}-row Arrow batches"
    metric = "CPU us per item per step (all threads)"
    threads = "plain threaded pipeline (3 threads, queue.Queue(8))"
    generators = "plain generator chain (1 thread)"
    spread = {name: [round(f.low, 2), round(f.high, 2)] for name, f in stats.items()}

    def row(
        engine: str, plain: str, peer: str, target: str, met: bool, note: str
    ) -> dict[str, Any]:
        e, p = stats[engine], stats[plain]
        return {
            "work": work.format(f"{engine} executor"),
            "metric": metric,
            "better": "lower",
            "strata": round(e.median, 2),
            "strata_spread": spread[engine],
            "peer": peer,
            "peer_value": round(p.median, 2),
            "peer_spread": spread[plain],
            "ratio": round(e.median / p.median, 3),
            "target": target,
            "met": met,
            "command": command,
            "note": note,
        }

    out = []
    local = stats["local-threads"]
    out.append(
        row(
            "local",
            "threads",
            threads,
            f"overhead <= {TARGET_US:g} us/item/step over the peer",
            local.median <= TARGET_US,
            f"overhead {local.text()} us/item/step (per-round paired differences, "
            f"{rounds} interleaved rounds); over the 1-thread generator chain "
            f"{stats['local-generators'].text()}",
        )
    )
    if "process" in stats:
        proc = stats["process-threads"]
        out.append(
            row(
                "process",
                "threads",
                threads,
                "none (issue 15 targets the local executor)",
                False,
                f"overhead {proc.text()} us/item/step; every item crosses two "
                "process boundaries (Arrow IPC encode/decode, pyzmq over Unix "
                "sockets); worker start-up excluded",
            )
        )
    floor = stats["local-generators"]
    out.append(
        row(
            "local",
            "generators",
            generators,
            f"overhead <= {TARGET_US:g} us/item/step over the peer",
            floor.median <= TARGET_US,
            f"overhead {floor.text()} us/item/step, threads included (the floor: "
            "one thread, no hand-off); the threaded peer itself costs "
            f"{stats['threads'].median - stats['generators'].median:.1f} "
            "us/item/step over this chain: the price of one thread per step",
        )
    )
    return out


def write_results(path: Path, result_rows: list[dict[str, Any]]) -> None:
    """Write the topic file for ``benchmarks/results_table.py``."""
    doc = {
        "topic": "engine",
        "machine": f"{platform.machine()}, {platform.python_implementation()} "
        f"{platform.python_version()}",
        "rows": result_rows,
    }
    path.write_text(json.dumps(doc, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ways", default=",".join(WAYS))
    parser.add_argument("--out", type=Path, help="write the results rows here")
    args = parser.parse_args()
    ways = tuple(args.ways.split(","))
    samples = compare(args.items, args.rounds, ways)
    stats = figures(samples, args.items)
    for name, figure in stats.items():
        print(f"{name:>20}: {figure.text()} us/item/step CPU")
    if args.out is not None:
        command = " ".join(["python", *sys.argv])
        write_results(args.out, rows(stats, args.items, args.rounds, command))


if __name__ == "__main__":
    main()
