"""RMAT edge generation: the parallel numba kernel versus the numpy reference.

``rmat_edges`` (counter-hash RNG, ``prange``, Graph500 id permutation included) is
timed against ``rmat_edges_reference``, the vectorised numpy transcription of
Graph500's generator (no permutation). Reference runs are interleaved with kernel
runs (in ``setup``); ``speedup_vs_numpy`` in ``extra_info`` is the ratio of medians.

    .venv/bin/python -m pytest benchmarks/storage/test_rmat.py --benchmark-only -s

Issue 3 asks for scale 20, edge factor 16 (16.8M edges).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numba
import pytest

from strata.storage.generators import rmat_edges, rmat_edges_reference

EDGE_FACTOR = 16


@pytest.mark.parametrize("scale", [16, 20])
def test_rmat_generation(benchmark: Any, scale: int) -> None:
    rmat_edges(4, 2)  # compile (or load the cached kernel) outside the timer
    reference_s: list[float] = []

    def time_reference() -> None:
        start = time.perf_counter()
        rmat_edges_reference(scale, EDGE_FACTOR, seed=1)
        reference_s.append(time.perf_counter() - start)

    rounds = 5 if scale >= 20 else 7
    src, dst = benchmark.pedantic(
        rmat_edges,
        args=(scale, EDGE_FACTOR),
        kwargs={"seed": 1},
        setup=time_reference,
        rounds=rounds,
    )
    assert src.shape == dst.shape == (EDGE_FACTOR << scale,)
    assert int(src.min()) >= 0
    assert int(dst.max()) < 1 << scale
    if benchmark.stats is None:
        return
    ours = benchmark.stats.stats.median
    theirs = statistics.median(reference_s)
    benchmark.extra_info.update(
        scale=scale,
        edge_factor=EDGE_FACTOR,
        edges=EDGE_FACTOR << scale,
        kernel_s=round(ours, 3),
        numpy_reference_s=round(theirs, 3),
        speedup_vs_numpy=round(theirs / ours, 2),
        medges_per_s=round((EDGE_FACTOR << scale) / ours / 1e6, 1),
        numba_threads=numba.get_num_threads(),
    )
    print(
        f"\nrmat scale {scale} ef {EDGE_FACTOR}: kernel {ours:.2f}s, "
        f"numpy reference {theirs:.2f}s, speedup {theirs / ours:.1f}x"
    )
