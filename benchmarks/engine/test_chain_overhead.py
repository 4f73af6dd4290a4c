"""Engine overhead: CPU per item per step against plain chains of the same steps.

A 3-step streaming chain of tiny items (64-row Arrow batches, see ``overhead.py``),
so the engine's own per-item work dominates, run four ways in interleaved rounds:
the local executor against a plain threaded pipeline with the same parallelism (one
thread per step, ``queue.Queue(8)`` between), the process executor, and the plain
single-thread generator chain (the floor). Each way's figure is CPU time (every
thread of the process; the process executor adds its workers' own), so a pipelined
run on two cores is not credited for its parallelism.

    .venv/bin/python -m pytest benchmarks/engine/test_chain_overhead.py \\
        -p no:cacheprovider --benchmark-only -s

A timed run writes ``benchmarks/results/engine.json``. Target (issue 15): the local
executor's overhead over the threaded pipeline <= 20 us per item per step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from overhead import TARGET_US, compare, figures, rows, write_results

ITEMS = 5000
ROUNDS = 5
RESULTS = Path(__file__).resolve().parents[1] / "results" / "engine.json"
COMMAND = (
    ".venv/bin/python -m pytest benchmarks/engine/test_chain_overhead.py "
    "-p no:cacheprovider --benchmark-only -s"
)


@pytest.mark.multiprocess
def test_engine_per_item_cost(benchmark: Any) -> None:
    timed = benchmark.enabled
    items, rounds = (ITEMS, ROUNDS) if timed else (200, 1)
    # compare() checks every run's answer against the direct computation.
    samples = benchmark.pedantic(compare, args=(items, rounds), rounds=1)
    stats = figures(samples, items)
    benchmark.extra_info.update(
        items=items,
        rounds=rounds,
        **{name: round(f.median, 2) for name, f in stats.items()},
    )
    for name, figure in stats.items():
        print(f"\n{name:>20}: {figure.text()} CPU us/item/step", end="")
    print()
    if timed:
        write_results(RESULTS, rows(stats, items, rounds, COMMAND))
        overhead = stats["local-threads"].median
        print(f"local overhead {overhead:.1f} us/item/step (target <= {TARGET_US})")
