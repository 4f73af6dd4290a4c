"""Engine overhead: a 3-step streaming chain of 64k-row Arrow batches.

Each executor's run time is compared with the same three steps chained as plain
Python generators on one thread. Plain runs are interleaved with engine runs (one
before every round, in ``setup``, outside the timer) so load from other work on a
shared machine hits both alike; the ratio of medians goes to ``extra_info``.

    pytest benchmarks/engine -p no:cacheprovider --benchmark-only -s

Targets (issue 2): local <= 1.10x the plain chain, process <= 1.5x.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np
import pytest
from engine_chain import Aggregate, Clean, Generate, plain_chain

from strata.engine import Pipeline, execute

ROWS = 65_536
SIZES = [
    pytest.param(100, id="100x64k"),
    pytest.param(300, id="300x64k", marks=pytest.mark.large),
]


def chain(batches: int) -> Pipeline:
    p = Pipeline("chain")
    p.step("generate", Generate(batches, ROWS))
    p.step("clean", Clean(), "generate")
    p.step("aggregate", Aggregate(), "clean")
    return p


@pytest.mark.parametrize("batches", SIZES)
def test_plain_generators(benchmark: Any, batches: int) -> None:
    total = benchmark.pedantic(plain_chain, args=(batches, ROWS), rounds=3)
    assert total.sum() > 0


@pytest.mark.parametrize("batches", SIZES)
@pytest.mark.parametrize(
    "executor", ["local", pytest.param("process", marks=pytest.mark.multiprocess)]
)
def test_engine_chain(benchmark: Any, executor: str, batches: int) -> None:
    pipeline = chain(batches)
    expected = plain_chain(batches, ROWS)  # also warms caches and the fork server
    execute(pipeline, executor)
    plain_s: list[float] = []

    def time_plain() -> None:
        start = time.perf_counter()
        plain_chain(batches, ROWS)
        plain_s.append(time.perf_counter() - start)

    def run() -> np.ndarray:
        result = execute(pipeline, executor, collect=("aggregate",))
        (total,) = result.collected["aggregate"]
        return total  # type: ignore[no-any-return]

    total = benchmark.pedantic(run, setup=time_plain, rounds=5)
    np.testing.assert_allclose(total, expected)
    if benchmark.stats is None:  # --benchmark-disable: a smoke run, nothing timed
        return
    engine_s = benchmark.stats.stats.median
    ratio = engine_s / statistics.median(plain_s)
    benchmark.extra_info.update(
        executor=executor,
        batches=batches,
        rows_per_batch=ROWS,
        plain_median_s=round(statistics.median(plain_s), 4),
        engine_median_s=round(engine_s, 4),
        ratio_to_plain=round(ratio, 3),
    )
    print(
        f"\n{executor} {batches}x{ROWS}: engine {engine_s:.3f}s, "
        f"plain {statistics.median(plain_s):.3f}s, ratio {ratio:.2f}x"
    )
