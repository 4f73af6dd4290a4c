"""HongTu and partition-parallel benchmarks (issue 6; ``hongtu.md`` §4).

Smoke run (small graphs, seconds to a minute)::

    .venv/bin/python -m pytest benchmarks/operators/bench_hongtu.py -p no:cacheprovider

The report's figures (dedup on the 200k-node community graph, 4 workers x 8
chunks; memory on RMAT scale 18 with 128 features and 128 hidden; epoch time
of 1 and 2 workers on RMAT scale 16), under the benchmark lock::

    flock /tmp/strata-bench.lock .venv/bin/python -m pytest \\
        benchmarks/operators/bench_hongtu.py -m large -p no:cacheprovider \\
        --benchmark-json hongtu.json

Every figure is in ``extra_info``; ``bench_hongtu_run.py`` runs the same
experiments without pytest and prints JSON. Epoch times are wall-clock on a
shared 2-core machine: compare them only within one run, with its load.
"""

from __future__ import annotations

import pytest
from bench_hongtu_run import main

COMMUNITY = "sbm:n=200000,blocks=64,degree=15,intra=0.8,features=128"


def _once(benchmark, argv):  # type: ignore[no-untyped-def]
    out = []
    benchmark.pedantic(lambda: out.append(main(argv)), rounds=1, iterations=1)
    return out[0]


def _dedup(benchmark, graph: str, workers: int, chunks: int, hidden: int) -> None:  # type: ignore[no-untyped-def]
    argv = ["dedup", "--graph", graph, "--workers", str(workers)]
    argv += ["--chunks", str(chunks), "--hidden", str(hidden)]
    result = _once(benchmark, argv)
    benchmark.extra_info.update(result)
    naive, both = result["runs"]["naive"], result["runs"]["both"]
    plan = result["plan"]
    # measured bytes = the plan's rows x (layer 1 + layer 2 input widths) x 4
    for mode, run in (("naive", naive), ("both", both)):
        assert run["fwd_h2d_bytes"] == plan[mode]["host_rows"] * (128 + hidden) * 4
    assert result["fwd_h2d_bytes_ratio_both_over_naive"] <= 0.6


def _memory(benchmark, graph: str, chunks: list[int], hidden: int) -> None:  # type: ignore[no-untyped-def]
    argv = ["memory", "--graph", graph, "--hidden", str(hidden)]
    argv += ["--chunks", *map(str, chunks)]
    result = _once(benchmark, argv)
    benchmark.extra_info.update(result)
    budgeted = result["runs"][0]
    assert result["budget_bytes"] < result["unchunked_modelled_peak_bytes"]
    assert budgeted["chunks"] > 1
    assert budgeted["within_budget"]
    assert budgeted["epochs_run"] == 1
    peaks = [max(r["arena_peak_bytes"]) for r in result["runs"][1:]]
    assert peaks == sorted(peaks, reverse=True)  # more chunks, smaller peak


@pytest.mark.multiprocess
def test_dedup_smoke(benchmark):  # type: ignore[no-untyped-def]
    _dedup(benchmark, "sbm:n=6000,blocks=8,degree=15,intra=0.8,features=128", 4, 4, 16)


@pytest.mark.multiprocess
def test_memory_smoke(benchmark):  # type: ignore[no-untyped-def]
    _memory(benchmark, "rmat:scale=11,edge_factor=16,features=128", [1, 2, 4], 32)


@pytest.mark.large
@pytest.mark.multiprocess
@pytest.mark.timeout(3600)
def test_dedup_community_graph(benchmark):  # type: ignore[no-untyped-def]
    _dedup(benchmark, COMMUNITY, 4, 8, 128)


@pytest.mark.large
@pytest.mark.multiprocess
@pytest.mark.timeout(3600)
def test_memory_rmat18(benchmark):  # type: ignore[no-untyped-def]
    _memory(benchmark, "rmat:scale=18,edge_factor=16,features=128", [1, 2, 4, 8], 128)


@pytest.mark.large
@pytest.mark.multiprocess
@pytest.mark.timeout(3600)
def test_scaling_rmat16(benchmark):  # type: ignore[no-untyped-def]
    argv = ["scaling", "--graph", "rmat:scale=16,edge_factor=16,features=64"]
    result = _once(benchmark, argv)
    benchmark.extra_info.update(result)
    runs = result["runs"]
    assert {"single_device", "exact_1", "exact_2"} <= set(runs)
