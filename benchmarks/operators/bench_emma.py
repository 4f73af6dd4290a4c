"""Emma benchmarks (``emma.md`` §5): bytes per iteration and accuracy vs exact.

Smoke run (a small planted-community graph, one gang, seconds)::

    .venv/bin/python -m pytest benchmarks/operators/bench_emma.py -p no:cacheprovider

The report's figures (M1-M4 on the 200k-node community graph with 4 workers for
S in {2, 5, 10}; M5 on Cora, SAGE, 2 workers, 3 seeds)::

    .venv/bin/python -m pytest benchmarks/operators/bench_emma.py -m large \
        -p no:cacheprovider --benchmark-json emma.json

Every figure is in ``extra_info``; ratios come from one run. ``bench_emma_run.py``
runs the same experiments without pytest and prints JSON.
"""

from __future__ import annotations

import argparse

import pytest
from bench_emma_run import accuracy, bytes_run

COMMUNITY = "sbm:n=200000,blocks=64,degree=15,intra=0.8"


def _once(benchmark, fn):
    out = []
    benchmark.pedantic(lambda: out.append(fn()), rounds=1, iterations=1)
    return out[0]


def _args(**kw) -> argparse.Namespace:
    defaults = {"refresh": None, "hidden": 16, "iterations": 200, "seeds": [0]}
    return argparse.Namespace(**{**defaults, **kw})


@pytest.mark.multiprocess
def test_bytes_smoke(benchmark):
    args = _args(graph="sbm:n=3000,blocks=8,features=8", workers=2, splits=[4])
    result = _once(benchmark, lambda: bytes_run(args))
    figures = result["splits"][4]
    benchmark.extra_info.update({k: v for k, v in figures.items() if "per_it" not in k})
    assert figures["cycle_rows_equal_exact"]
    assert figures["edges_ratio_over_run"] == pytest.approx(0.25)


@pytest.mark.multiprocess
def test_accuracy_smoke(benchmark):
    args = _args(
        graph="sbm:n=600,blocks=4,features=8",
        workers=2,
        splits=[3],
        refresh=["S", "0"],
        iterations=9,
    )
    result = _once(benchmark, lambda: accuracy(args))
    (run,) = result["runs"]
    assert run["S=3,refresh=3"]["refreshes"] == [3, 6]
    assert run["S=3,refresh=0"]["refreshes"] == []
    # training sends 1/3 of the halo; a refresh every cycle sends one more third
    assert run["S=3,refresh=0"]["fwd_bytes_ratio_with_refresh"] == pytest.approx(1 / 3)
    assert run["S=3,refresh=3"]["fwd_bytes_ratio_with_refresh"] == pytest.approx(
        (1 / 3 * 9 + 2) / 9
    )
    assert run["S=3,refresh=0"]["exact_at_equal_bytes"]["iterations"] == 3
    assert run["S=3,refresh=3"]["exact_at_equal_bytes"]["iterations"] == 5
    benchmark.extra_info["mean"] = result["mean"]


@pytest.mark.large
@pytest.mark.multiprocess
@pytest.mark.timeout(3600)
def test_bytes_community_graph(benchmark):
    args = _args(graph=COMMUNITY, workers=4, splits=[2, 5, 10])
    result = _once(benchmark, lambda: bytes_run(args))
    for splits, figures in result["splits"].items():
        benchmark.extra_info[f"S={splits}"] = figures
        assert figures["cycle_rows_equal_exact"]
        assert figures["fwd_within_tolerance"]
        assert figures["bwd_within_tolerance"]


@pytest.mark.large
@pytest.mark.multiprocess
@pytest.mark.timeout(7200)
def test_accuracy_cora(benchmark):
    args = _args(
        graph="planetoid:cora",
        workers=2,
        splits=[10],
        refresh=["S2", "S", "0"],
        seeds=[0, 1, 2],
    )
    result = _once(benchmark, lambda: accuracy(args))
    benchmark.extra_info["median"] = result["median"]
    benchmark.extra_info["mean"] = result["mean"]
    benchmark.extra_info["runs"] = [
        {k: v["test_accuracy"] if isinstance(v, dict) else v for k, v in r.items()}
        for r in result["runs"]
    ]
