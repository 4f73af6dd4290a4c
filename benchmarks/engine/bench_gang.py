"""Gang start-up time by world size and start method, and a 1-vs-2-worker smoke.

    .venv/bin/python -m pytest benchmarks/engine/bench_gang.py --benchmark-only -s
    cd benchmarks/engine && ../../.venv/bin/python bench_gang.py   # a summary table

Run the script from its own folder (or with ``PYTHONPATH=benchmarks/engine``): the
fork server imports the main script once for all workers, but its ``sys.path``
lacks the script's folder, so from elsewhere ``import gang_work`` fails there and
every worker re-runs the script instead (~0.15 s more per worker).

Start-up is launch until every rank joined the process group (``startup_s`` of the
report); the benchmark's own time is a whole trivial gang: start, run, gather,
join. ``forkserver`` is timed warm (its server imported torch once, before the
rounds); ``spawn`` imports torch in every worker and runs only with ``-m large``.

The scaling smoke trains a small MLP data-parallel (``gang_work.train_mlp``) for
a fixed number of full-batch epochs on 1 and 2 workers, each worker with
``cores // workers`` torch threads; ``extra_info`` holds seconds per epoch and the
same epochs run in this process without a gang. On a 2-core machine two workers
can at best halve the time, and one worker already uses both cores.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import gang_work
import pytest

from strata.engine.gang import GangSpec, run_gang, run_gang_report

EPOCHS = 20


def startup(world: int, method: str) -> dict[str, float]:
    """One trivial gang: its start-up and its whole wall time."""
    start = time.perf_counter()
    report = run_gang_report(
        gang_work.noop, GangSpec(workers=world, start_method=method)
    )
    assert report.results == list(range(world))
    return {"startup_s": report.startup_s, "total_s": time.perf_counter() - start}


def scaling(world: int, threads: int | None = None) -> float:
    """Seconds per epoch of the MLP workload on ``world`` workers (slowest rank)."""
    x, y = gang_work.data()
    spec = GangSpec(workers=world, threads_per_worker=threads)
    results = run_gang(gang_work.train_mlp, spec, x, y, EPOCHS)
    return max(r["epoch_s"] for r in results)


@pytest.mark.parametrize("world", [1, 2, 4])
@pytest.mark.parametrize(
    "method", ["forkserver", pytest.param("spawn", marks=pytest.mark.large)]
)
def test_gang_startup(benchmark: Any, world: int, method: str) -> None:
    startup(world, method)  # warm: the fork server starts once per process
    runs: list[dict[str, float]] = []
    benchmark.pedantic(lambda: runs.append(startup(world, method)), rounds=5)
    benchmark.extra_info.update(
        world=world,
        method=method,
        startup_median_s=round(statistics.median(r["startup_s"] for r in runs), 4),
    )


@pytest.mark.parametrize("world", [1, 2])
def test_gang_scaling(benchmark: Any, world: int) -> None:
    x, y = gang_work.data()
    epoch_s = benchmark.pedantic(scaling, args=(world,), rounds=3)
    benchmark.extra_info.update(
        world=world,
        epochs=EPOCHS,
        epoch_s=round(epoch_s, 4),
        in_process_epoch_s=round(gang_work.train_mlp_here(x, y, EPOCHS), 4),
    )


def main() -> None:
    import torch

    from strata.engine.gang.spec import usable_cores

    print(f"torch {torch.__version__}, {usable_cores()} usable cores")
    cold = startup(1, "forkserver")
    print(f"cold fork server (imports torch once): {cold['total_s']:.2f} s")
    for method in ("forkserver", "spawn"):
        for world in (1, 2, 4):
            runs = [
                startup(world, method)
                for _ in range(5 if method == "forkserver" else 1)
            ]
            up = statistics.median(r["startup_s"] for r in runs)
            total = statistics.median(r["total_s"] for r in runs)
            print(
                f"{method:10s} workers={world}: start-up {up:.3f} s, gang {total:.3f} s"
            )
    x, y = gang_work.data()
    here = statistics.median(gang_work.train_mlp_here(x, y, EPOCHS) for _ in range(3))
    print(
        f"MLP epoch in this process ({torch.get_num_threads()} threads): {here:.4f} s"
    )
    for world, threads in ((1, None), (1, 1), (2, None)):
        epoch = statistics.median(scaling(world, threads) for _ in range(3))
        spec = GangSpec(workers=world, threads_per_worker=threads)
        each = spec.placement().threads
        print(
            f"MLP epoch on {world} worker(s) x {each} thread(s): {epoch:.4f} s "
            f"({here / epoch:.2f}x the in-process epoch)"
        )


if __name__ == "__main__":
    main()
