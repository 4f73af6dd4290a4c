"""Random-row gather throughput: feature stores versus ``torch.index_select``.

One run measures the in-memory store, the Arrow store with ``pread`` access and
with ``mmap`` access, each against ``torch.index_select`` on an in-memory tensor
(both allocate their output), plus ``memory-out``: the in-memory store and
``index_select`` both filling a preallocated output. Baseline runs are interleaved
with store runs (one per round, in ``setup``, outside the timer) so load from other
work hits both alike; the ratio of medians goes to ``extra_info``
(``speedup_vs_index_select`` > 1 means the store is faster).

    .venv/bin/python -m pytest benchmarks/storage/test_gather.py --benchmark-only -s

Target (issue 3): in-memory store >= 1.0x index_select.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np
import pytest
import torch

from strata.storage import (
    ArrowFeatureStore,
    CSRGraph,
    GraphDataset,
    InMemoryFeatureStore,
)
from strata.storage.dataset import save_dataset

DIM = 128
GATHER = 100_000
SIZES = [
    pytest.param(1_000_000, id="1Mx128"),
    pytest.param(2_000_000, id="2Mx128", marks=pytest.mark.large),
]


@pytest.fixture(scope="module", params=SIZES)
def table(request: Any, tmp_path_factory: Any) -> tuple[np.ndarray, Any]:
    rows = request.param
    x = np.random.default_rng(0).standard_normal((rows, DIM), dtype=np.float32)
    directory = tmp_path_factory.mktemp("gather")
    graph = CSRGraph.from_edges(np.array([0]), np.array([1]), rows)
    save_dataset(GraphDataset(graph, {"x": x}), directory)
    return x, directory


def _store(kind: str, x: np.ndarray, directory: Any) -> Any:
    if kind.startswith("memory"):
        return InMemoryFeatureStore({("node", "x"): x})
    return ArrowFeatureStore(directory, access=kind)


@pytest.mark.parametrize("kind", ["memory", "memory-out", "pread", "mmap"])
def test_random_row_gather(benchmark: Any, table: Any, kind: str) -> None:
    x, directory = table
    store = _store(kind, x, directory)
    reference = torch.from_numpy(x)
    ids = torch.from_numpy(np.random.default_rng(1).integers(0, x.shape[0], GATHER))
    baseline_s: list[float] = []
    # "memory-out": both sides fill a preallocated output, so the kernels are
    # compared without the page faults of a fresh 50 MB allocation.
    reuse = kind == "memory-out"
    buffers = [torch.empty((GATHER, DIM)), torch.empty((GATHER, DIM))]
    kwargs = {"out": buffers[0]} if reuse else {}

    def time_index_select() -> None:
        start = time.perf_counter()
        if reuse:
            torch.index_select(reference, 0, ids, out=buffers[1])
        else:
            torch.index_select(reference, 0, ids)
        baseline_s.append(time.perf_counter() - start)

    out = benchmark.pedantic(
        store.get,
        args=(("node", "x"), ids),
        kwargs=kwargs,
        setup=time_index_select,
        rounds=15,
        warmup_rounds=2,
    )
    assert torch.equal(out, torch.index_select(reference, 0, ids))
    if benchmark.stats is None:  # --benchmark-disable: a smoke run, nothing timed
        return
    ours = benchmark.stats.stats.median
    theirs = statistics.median(baseline_s)
    nbytes = out.numel() * out.element_size()
    benchmark.extra_info.update(
        store=kind,
        rows=x.shape[0],
        gathered_rows=GATHER,
        gathered_mb=round(nbytes / 2**20, 1),
        store_gb_per_s=round(nbytes / ours / 1e9, 3),
        index_select_gb_per_s=round(nbytes / theirs / 1e9, 3),
        speedup_vs_index_select=round(theirs / ours, 3),
        torch_threads=torch.get_num_threads(),
    )
    print(
        f"\n{kind} {x.shape[0]}x{DIM}: store {nbytes / ours / 1e9:.2f} GB/s, "
        f"index_select {nbytes / theirs / 1e9:.2f} GB/s, "
        f"speedup {theirs / ours:.2f}x"
    )
