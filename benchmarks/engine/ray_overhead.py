"""The Ray executor against the local executor on a streaming chain (issue 17).

``overhead.py``'s 3-step streaming chain (``source`` -> ``scale`` -> ``total``) of
64-row Arrow record batches (``src``, ``dst`` int64, ``weight`` float32: 1.3 kB
each), 10,000 batches per run, on a local Ray cluster started by this process
(``strata.engine.ray_cluster.connect``). On Ray the three steps are three actors;
on the local executor, three threads. Every run's answer is checked against the
direct computation (``overhead.expected``).

Figures, in interleaved rounds (local, Ray, bare actors; after a warm-up of each):

* **run**: wall seconds of one run, start-up excluded. Local: ``execute``'s wall
  (its threads start in microseconds). Ray: ``execute``'s wall minus the
  executor's actor start-up (``RayExecutor.last_startup_s``: actors created until
  every one answered ``ready``); the actors' teardown stays in. Target: Ray /
  local <= 3.
* **startup, warm**: ``last_startup_s`` of each timed Ray run (the executor
  keeps the actors of a good run for the next: a warm run takes them from its
  pool), beside Ray's own floor for fresh actors: as many bare actors
  (``num_cpus=0``, an empty class) created and ready.
* **startup, cold** (one sample, reported in the note): ``connect()`` starting a
  fresh local cluster, plus the first run's actor start-up (new worker processes
  import Strata and pyarrow).

    .venv/bin/python benchmarks/engine/ray_overhead.py --items 2000 --rounds 2
    .venv/bin/python benchmarks/engine/ray_overhead.py --items 10000 --rounds 5 \\
        --out benchmarks/results/ray.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from overhead import ROWS, chain, expected

from strata.engine import execute
from strata.engine.executors.ray_driver import RayExecutor
from strata.engine.ray_cluster import connect, require_ray

#: Issue 17's target: the Ray executor's run time over the local executor's.
TARGET_RATIO = 3.0
ITEMS = 10_000
ACTORS = 3  # one per step of the chain: all three are streaming steps


@dataclass(frozen=True)
class RunSample:
    """One run: wall seconds without start-up, the start-up (0 on local), CPU.

    ``cpu_s`` is every thread's CPU time: this process's (``time.process_time``)
    and, on Ray, each actor process's from its operator's ``open`` to the end of
    its ``finish`` (``overhead.py``'s ``cpu_s`` counter; Ray's own threads in
    those processes included).
    """

    run_s: float
    startup_s: float
    cpu_s: float


def measure_local(items: int, want: float) -> RunSample:
    """One run of the chain on the local executor."""
    pipeline = chain(items)
    cpu, start = time.process_time(), time.perf_counter()
    result = execute(pipeline, "local", collect=("total",))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    _check(result.collected["total"], want, "local")
    return RunSample(wall, 0.0, cpu)


def measure_ray(runner: RayExecutor, items: int, want: float) -> RunSample:
    """One run of the chain on Ray: its wall minus the actors' start-up."""
    pipeline = chain(items)
    cpu, start = time.process_time(), time.perf_counter()
    result = execute(pipeline, runner, collect=("total",))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    _check(result.collected["total"], want, "ray")
    steps = result.report.steps.values()
    cpu += sum(step.counters.get("cpu_s", 0.0) for step in steps)
    return RunSample(wall - runner.last_startup_s, runner.last_startup_s, cpu)


class _Bare:
    def ready(self) -> bool:
        return True


def measure_bare_actors(count: int = ACTORS) -> float:
    """Ray's floor: ``count`` empty actors (``num_cpus=0``) created and ready."""
    ray = require_ray()
    start = time.perf_counter()
    actors = [ray.remote(num_cpus=0)(_Bare).remote() for _ in range(count)]
    ray.get([actor.ready.remote() for actor in actors])
    seconds = time.perf_counter() - start
    for actor in actors:
        ray.kill(actor)
    return seconds


def _check(values: list[Any], want: float, way: str) -> None:
    (got,) = values
    if not np.isclose(float(got), want, rtol=1e-6):
        raise AssertionError(f"{way}: {got} != {want}")


@dataclass(frozen=True)
class Comparison:
    """Every sample of one benchmark run."""

    items: int
    rounds: int
    connect_s: float  # cold: ray.init of a fresh local cluster
    first: RunSample  # cold: the first Ray run in that cluster
    local: list[RunSample]
    ray: list[RunSample]
    bare: list[float]
    load: tuple[float, float]  # the 1-minute load average before and after

    @property
    def cold_startup_s(self) -> float:
        return self.connect_s + self.first.startup_s


def compare(items: int, rounds: int, num_cpus: int | None = None) -> Comparison:
    """Start Ray, run the chain cold once, then ``rounds`` interleaved rounds."""
    ray = require_ray()
    if ray.is_initialized():  # the cold figures need a fresh Ray in this process
        raise RuntimeError("Ray is already connected: run this in a new process")
    load = os.getloadavg()[0]
    start = time.perf_counter()
    connect(num_cpus=num_cpus)
    connect_s = time.perf_counter() - start
    want = expected(items)
    runner = RayExecutor()
    first = measure_ray(runner, items, want)  # cold: new workers, first imports
    measure_local(min(items, 500), expected(min(items, 500)))  # warm-up
    measure_bare_actors()
    local, on_ray, bare = [], [], []
    for _ in range(rounds):
        local.append(measure_local(items, want))
        on_ray.append(measure_ray(runner, items, want))
        bare.append(measure_bare_actors())
    load_after = os.getloadavg()[0]
    return Comparison(
        items, rounds, connect_s, first, local, on_ray, bare, (load, load_after)
    )


@dataclass(frozen=True)
class Figure:
    """A median with its spread (min, max)."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: list[float]) -> Figure:
        return cls(statistics.median(values), min(values), max(values))

    def text(self, unit: str = "s") -> str:
        return f"{self.median:.3f} [{self.low:.3f}, {self.high:.3f}] {unit}"

    def spread(self) -> list[float]:
        return [round(self.low, 4), round(self.high, 4)]


def figures(c: Comparison) -> dict[str, Figure]:
    """Run times, start-ups, and the per-round ratio Ray / local."""
    ratios = [r.run_s / loc.run_s for r, loc in zip(c.ray, c.local, strict=True)]
    return {
        "local_run": Figure.of([s.run_s for s in c.local]),
        "ray_run": Figure.of([s.run_s for s in c.ray]),
        "ratio": Figure.of(ratios),
        "local_cpu_us": Figure.of([s.cpu_s / c.items * 1e6 for s in c.local]),
        "ray_cpu_us": Figure.of([s.cpu_s / c.items * 1e6 for s in c.ray]),
        "ray_startup": Figure.of([s.startup_s for s in c.ray]),
        "bare_startup": Figure.of(c.bare),
    }


def rows(c: Comparison, command: str) -> list[dict[str, Any]]:
    """The results-table rows (``benchmarks/results/ray.json``)."""
    f = figures(c)
    work = (
        f"3-step streaming chain (source, scale, total), {c.items} items, each a "
        f"{ROWS}-row Arrow RecordBatch"
    )
    local, ray, ratio = f["local_run"], f["ray_run"], f["ratio"]
    per_item_us = (ray.median - local.median) / c.items * 1e6
    cold = (
        f"cold start-up {c.cold_startup_s:.2f} s (ray.init of a fresh local cluster "
        f"{c.connect_s:.2f} s + the first run's actors ready "
        f"{c.first.startup_s:.2f} s; that first run itself {c.first.run_s:.2f} s)"
    )
    run_row = {
        "work": f"ray executor, {work}",
        "metric": "run wall seconds, start-up excluded",
        "better": "lower",
        "strata": round(ray.median, 4),
        "strata_spread": ray.spread(),
        "peer": "local executor (threads), same chain, same run",
        "peer_value": round(local.median, 4),
        "peer_spread": local.spread(),
        "ratio": round(ray.median / local.median, 3),
        "target": f"<= {TARGET_RATIO:g}",
        "met": ray.median / local.median <= TARGET_RATIO,
        "command": command,
        "note": f"{c.rounds} interleaved rounds, {os.cpu_count()} cores, load "
        f"average {c.load[0]:.1f} before and {c.load[1]:.1f} after (the machine "
        "is shared; Ray runs three processes, local one); per-round ratio "
        f"{ratio.median:.2f} [{ratio.low:.2f}, {ratio.high:.2f}]; Ray adds "
        f"{per_item_us:.0f} us per item (3 steps) of wall time; CPU (all "
        f"processes) per item {f['ray_cpu_us'].median:.0f} us on Ray vs "
        f"{f['local_cpu_us'].median:.0f} us on local; {cold}",
    }
    startup, bare = f["ray_startup"], f["bare_startup"]
    startup_row = {
        "work": f"ray executor start-up (warm cluster), {work}",
        "metric": "seconds until every actor is ready",
        "better": "lower",
        "strata": round(startup.median, 4),
        "strata_spread": startup.spread(),
        "peer": f"Ray alone: {ACTORS} bare actors (num_cpus=0) created and ready",
        "peer_value": round(bare.median, 4),
        "peer_spread": bare.spread(),
        "ratio": round(startup.median / bare.median, 3),
        "target": "none (reported)",
        "met": True,
        "command": command,
        "note": "the executor keeps a good run's actors for the next run (its "
        f"pool): a warm run starts none; {cold}",
    }
    cold_row = {
        "work": f"ray executor cold start-up (a fresh local cluster), {work}",
        "metric": "seconds: connect() + the first run's actors ready (1 sample)",
        "better": "lower",
        "strata": round(c.cold_startup_s, 4),
        "strata_spread": None,
        "peer": "Ray alone: ray.init() of that local cluster (inside connect())",
        "peer_value": round(c.connect_s, 4),
        "peer_spread": None,
        "ratio": round(c.cold_startup_s / c.connect_s, 3),
        "target": "none (reported)",
        "met": True,
        "command": command,
        "note": cold,
    }
    return [run_row, startup_row, cold_row]


def write_results(path: Path, result_rows: list[dict[str, Any]]) -> None:
    """Write the topic file for ``benchmarks/results_table.py``."""
    ray = require_ray()
    doc = {
        "topic": "ray",
        "machine": f"{platform.machine()}, {platform.python_implementation()} "
        f"{platform.python_version()}, Ray {ray.__version__}",
        "rows": result_rows,
    }
    path.write_text(json.dumps(doc, indent=1) + "\n")


def report(c: Comparison) -> str:
    """The figures as text."""
    f = figures(c)
    return "\n".join(
        [
            f"local run      {f['local_run'].text()}",
            f"ray run        {f['ray_run'].text()}",
            f"ray / local    {f['ratio'].text('x')} (target <= {TARGET_RATIO:g})",
            f"CPU per item   ray {f['ray_cpu_us'].text('us')}, "
            f"local {f['local_cpu_us'].text('us')}",
            f"ray startup    {f['ray_startup'].text()} (warm)",
            f"bare actors    {f['bare_startup'].text()} ({ACTORS} actors)",
            f"cold startup   {c.cold_startup_s:.3f} s (connect {c.connect_s:.3f} s "
            f"+ first actors {c.first.startup_s:.3f} s)",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=ITEMS)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--num-cpus", type=int, help="CPUs of the local cluster")
    parser.add_argument("--out", type=Path, help="write the results rows here")
    args = parser.parse_args()
    comparison = compare(args.items, args.rounds, args.num_cpus)
    print(report(comparison))
    if args.out is not None:
        command = " ".join([".venv/bin/python", *sys.argv])
        write_results(args.out, rows(comparison, command))
    require_ray().shutdown()


if __name__ == "__main__":
    main()
