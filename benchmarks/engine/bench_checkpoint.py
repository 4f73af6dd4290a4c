"""Checkpoint overhead: a keyed, stateful stream with and without checkpoints.

A source of update batches (Arrow, 4096 rows of ``node``, ``value``) feeds a
node-keyed sum over 2 shards (each shard's state: a float64 array over every node,
512 kB) and a row-counting sink; the source, the sums and the sink are all
``Stateful``. The same run is timed with checkpoints off and every ``N`` batches;
rounds of each setting are interleaved, so load from other work on a shared machine
hits them alike. ``extra_info`` holds items (batches) per second, the ratio to the
run without checkpoints, checkpoints taken, bytes per checkpoint and mean latency.

Wall-clock ratios need a quiet machine. Two figures hold up under load: the CPU
seconds of the run (``local`` only: its threads are this process) and the pause
each checkpoint costs the tasks (``task ms/ckpt``: snapshot, encode and write,
summed over the tasks; fsync is the driver's, off the data path).

    .venv/bin/python -m pytest benchmarks/engine/bench_checkpoint.py --benchmark-only
    .venv/bin/python benchmarks/engine/bench_checkpoint.py     # a summary table
    .venv/bin/python benchmarks/engine/bench_checkpoint.py --batches 1000 --rounds 5
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from strata.engine import (
    CheckpointConfig,
    Operator,
    Pipeline,
    RunConfig,
    StepContext,
    execute,
)

NODES = 1 << 16
ROWS = 4096
BATCHES = 400
EVERY = [None, 100, 20, 5]


class Updates(Operator[None, pa.RecordBatch]):
    """``batches`` seeded update batches; its state is the next batch's index."""

    def __init__(self, batches: int) -> None:
        self.batches = batches
        self.position = 0

    def finish(self) -> Iterator[pa.RecordBatch]:
        while self.position < self.batches:
            rng = np.random.default_rng([3, self.position])
            self.position += 1
            yield pa.record_batch(
                {
                    "node": rng.integers(0, NODES, ROWS),
                    "value": rng.random(ROWS, dtype=np.float32),
                }
            )

    def snapshot(self) -> int:
        return self.position

    def restore(self, state: int) -> None:
        self.position = state


class NodeSums(Operator[pa.RecordBatch, pa.RecordBatch]):
    """Running per-node sums (one shard's nodes), emitted as changed rows."""

    def open(self, ctx: StepContext) -> None:
        self.sums = np.zeros(NODES, dtype=np.float64)

    def process(self, item: pa.RecordBatch) -> Iterable[pa.RecordBatch]:
        nodes = item.column("node").to_numpy()
        np.add.at(self.sums, nodes, item.column("value").to_numpy())
        yield pa.record_batch({"node": nodes, "sum": self.sums[nodes]})

    def snapshot(self) -> dict[str, Any]:
        return {"sums": self.sums}

    def restore(self, state: dict[str, Any]) -> None:
        self.sums = np.array(state["sums"])


class CountRows(Operator[pa.RecordBatch, int]):
    def open(self, ctx: StepContext) -> None:
        self.rows = 0

    def process(self, item: pa.RecordBatch) -> Iterable[int]:
        self.rows += item.num_rows
        return ()

    def finish(self) -> Iterator[int]:
        yield self.rows

    def snapshot(self) -> int:
        return self.rows

    def restore(self, state: int) -> None:
        self.rows = state


def pipeline(batches: int = BATCHES) -> Pipeline:
    p = Pipeline("checkpoint-overhead")
    p.step("updates", Updates(batches))
    p.step("sums", NodeSums(), "updates", shards=2, key="node")
    p.step("count", CountRows(), "sums")
    return p


def timed(executor: str, every: int | None, batches: int = BATCHES) -> dict[str, Any]:
    """One run; its seconds, batches per second and checkpoint figures."""
    directory = tempfile.mkdtemp(prefix="strata-bench-ckpt-")
    config = RunConfig()
    if every is not None:
        config = RunConfig(checkpoint=CheckpointConfig(directory, every_items=every))
    try:
        start, cpu = time.perf_counter(), time.process_time()
        result = execute(pipeline(batches), executor, config=config, collect=("count",))
        seconds = time.perf_counter() - start
        cpu_s = time.process_time() - cpu
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    assert result.collected["count"] == [batches * ROWS]
    report = result.report.checkpoint
    taken = report.completed if report else 0
    return {
        "seconds": seconds,
        "cpu_s": cpu_s,
        "items_per_s": batches / seconds,
        "task_ms": 1000 * report.seconds / taken if report and taken else 0.0,
        "checkpoints": taken,
        "bytes_per_checkpoint": report.bytes // taken if report and taken else 0,
        "latency_s": report.mean_latency_s if report else 0.0,
    }


def compare(
    executor: str, rounds: int = 3, batches: int = BATCHES
) -> dict[int | None, dict[str, Any]]:
    """Interleaved rounds of every setting; medians per setting."""
    timed(executor, None, batches)  # warm caches and the fork server
    runs: dict[int | None, list[dict[str, Any]]] = {every: [] for every in EVERY}
    for _ in range(rounds):
        for every in EVERY:
            runs[every].append(timed(executor, every, batches))
    summary = {}
    for every, results in runs.items():
        summary[every] = {
            key: statistics.median(r[key] for r in results) for key in results[0]
        }
    base, base_cpu = summary[None]["items_per_s"], summary[None]["cpu_s"]
    for row in summary.values():
        row["ratio"] = row["items_per_s"] / base
        row["cpu_ratio"] = row["cpu_s"] / base_cpu
    return summary


@pytest.mark.parametrize("every", EVERY)
@pytest.mark.parametrize(
    "executor", ["local", pytest.param("process", marks=pytest.mark.multiprocess)]
)
def test_checkpoint_overhead(benchmark: Any, executor: str, every: int | None) -> None:
    timed(executor, every)  # warm
    results: list[dict[str, Any]] = []
    benchmark.pedantic(lambda: results.append(timed(executor, every)), rounds=3)
    benchmark.extra_info.update(
        executor=executor,
        every_items=every,
        items_per_s=round(statistics.median(r["items_per_s"] for r in results), 1),
        checkpoints=statistics.median(r["checkpoints"] for r in results),
        bytes_per_checkpoint=statistics.median(
            r["bytes_per_checkpoint"] for r in results
        ),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("executors", nargs="*", default=["local", "process"])
    parser.add_argument("--batches", type=int, default=BATCHES)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(
        f"{args.batches} batches x {ROWS} rows, 2 shards x {NODES * 8 // 1024} kB "
        f"state, median of {args.rounds} interleaved rounds"
    )
    print(
        f"{'executor':<9}{'every':>7}{'batches/s':>11}{'vs off':>8}{'cpu s':>7}"
        f"{'vs off':>8}{'ckpts':>7}{'kB/ckpt':>9}{'task ms/ckpt':>14}"
        f"{'latency ms':>12}"
    )
    for executor in args.executors:
        for every, row in compare(executor, args.rounds, args.batches).items():
            print(
                f"{executor:<9}{every or 'off':>7}{row['items_per_s']:>11.1f}"
                f"{row['ratio']:>8.2f}{row['cpu_s']:>7.2f}{row['cpu_ratio']:>8.2f}"
                f"{row['checkpoints']:>7.0f}"
                f"{row['bytes_per_checkpoint'] / 1024:>9.0f}"
                f"{row['task_ms']:>14.2f}{row['latency_s'] * 1000:>12.1f}"
            )


if __name__ == "__main__":
    main()
