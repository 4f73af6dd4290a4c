"""Streaming GNN benchmarks (issue 7): throughput, window effect, exactness, ingest.

Smoke run (small graphs, seconds)::

    .venv/bin/python -m pytest benchmarks/operators/streaming -p no:cacheprovider

The figures of the report (RMAT scale 18 throughput sweep, 100k-update exactness on
RMAT scale 16, the window curve, 60 s of ingestion)::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python -m pytest benchmarks/operators/streaming \
        -m large -p no:cacheprovider --benchmark-json streaming.json

Every figure is in ``extra_info``; ratios come from one run of one test.
``run_streaming.py`` prints the same experiments as JSON without pytest.

Against peers (issue 15): ``test_pyg_peers_*`` time the incremental path against
PyG's full and affected-subgraph recompute and DGL's full recompute on the same
stream (``peer_harness.py``); ``benchmarks/results/streaming.json`` comes from::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python \
        benchmarks/operators/streaming/run_streaming.py peers --scale 18 \
        --batch-sizes 100 --batches 40 --write
"""

from __future__ import annotations

import numba
import pytest
import torch
from peer_harness import EXACT, peer_run
from run_streaming import windows_for_curve
from streaming_checks import exactness_run, window_curve
from streaming_harness import make_setup, throughput_row

from strata.operators.streaming import Count, Immediate


@pytest.fixture(autouse=True)
def two_threads():
    """Two threads for both sides: torch (baselines) and numba (incremental)."""
    before = torch.get_num_threads(), numba.get_num_threads()
    torch.set_num_threads(2)
    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
    yield
    torch.set_num_threads(before[0])
    numba.set_num_threads(before[1])


def _once(benchmark, fn):
    out = []
    benchmark.pedantic(lambda: out.append(fn()), rounds=1, iterations=1)
    return out[0]


@pytest.mark.parametrize("batch_size", [100])
def test_throughput_smoke(benchmark, batch_size):
    row = _once(benchmark, lambda: throughput_row(make_setup(10), batch_size))
    benchmark.extra_info.update(row)
    assert row["incremental_updates_per_s"] > 0


@pytest.mark.large
@pytest.mark.parametrize("model", ["sage", "gcn"])
@pytest.mark.parametrize("batch_size", [10, 100, 1000, 10_000, 100_000])
def test_throughput_rmat18(benchmark, batch_size, model):
    """Incremental vs (a) affected recompute vs (b) full recompute per batch."""
    row = _once(benchmark, lambda: throughput_row(make_setup(18, model), batch_size))
    benchmark.extra_info.update(row)


def test_pyg_peers_smoke(benchmark):
    """Incremental vs PyG full and affected recompute, exact after every batch."""
    run = _once(
        benchmark, lambda: peer_run(make_setup(10), 100, batches=4, round_batches=2)
    )
    benchmark.extra_info.update(run)
    assert max(run["max_abs_diff_vs_pyg_full"].values()) <= EXACT


@pytest.mark.large
def test_pyg_peers_rmat18(benchmark):
    """The issue 15 figure: B=100 on RMAT-18, 40 timed batches per path."""
    run = _once(benchmark, lambda: peer_run(make_setup(18), 100, batches=40))
    benchmark.extra_info.update(run)
    assert max(run["max_abs_diff_vs_pyg_full"].values()) <= EXACT


def test_window_curve_smoke(benchmark):
    windows = {"immediate": Immediate(), "count:100": Count(100)}
    rows = _once(
        benchmark, lambda: window_curve(make_setup(10), windows, num_updates=500)
    )
    benchmark.extra_info["rows"] = rows
    assert rows[1]["messages_per_update"] <= rows[0]["messages_per_update"]


@pytest.mark.large
def test_window_curve_rmat16(benchmark):
    """Messages per update for nested count windows, sessions and adaptive."""
    rows = _once(
        benchmark,
        lambda: window_curve(make_setup(16), windows_for_curve(), num_updates=20_000),
    )
    benchmark.extra_info["rows"] = rows
    counts = [r["messages_per_update"] for r in rows if r["window"].startswith("count")]
    assert counts == sorted(counts, reverse=True)  # nested windows: non-increasing


def test_exactness_smoke(benchmark):
    result = _once(
        benchmark, lambda: exactness_run(make_setup(9), 200, num_updates=2000)
    )
    benchmark.extra_info.update(result)
    assert result["max_rel_error"] <= 1e-5


@pytest.mark.large
@pytest.mark.parametrize("model", ["sage", "gcn", "sage-max"])
def test_exactness_rmat16_100k(benchmark, model):
    """100k updates (20% deletions), checked after every flush of Count(1000)."""
    result = _once(
        benchmark,
        lambda: exactness_run(make_setup(16, model), 1000, num_updates=100_000),
    )
    benchmark.extra_info.update(result)
    assert result["max_abs_error"] <= 1e-5


def test_ingest_smoke(benchmark):
    from ingest_harness import sustained_ingest

    result = _once(benchmark, lambda: sustained_ingest(3.0, batch_rows=1000))
    benchmark.extra_info.update(result)
    assert result["acked_rows"] > 0


@pytest.mark.large
def test_ingest_sustained_60s(benchmark):
    from ingest_harness import sustained_ingest

    result = _once(benchmark, lambda: sustained_ingest(60.0))
    benchmark.extra_info.update(result)
    server = result["server"]
    assert server["max_log_bytes"] <= server["quota_bytes"]  # the default quota
    assert result["log_full_answers"] > 0  # producers were told
    assert result["server_rss_end_mb"] < 2 * result["server_rss_start_mb"] + 200
