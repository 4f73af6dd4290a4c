"""Shared measurement code of the streaming benchmarks (throughput, windows, exactness).

Three ways to keep a 2-layer model's embeddings current while update batches of
``B`` rows arrive, on the same graph, model, batches and kernels:

* ``incremental``: :class:`strata.operators.streaming.StreamingGNN` (one flush per
  batch);
* ``affected``: baseline (a), DGL-style: per batch, the vertices whose embedding may
  change get full L-hop in-neighbour blocks and one forward of the batch model
  (:class:`strata.operators.streaming.AffectedRecompute`);
* ``full``: baseline (b), a full-graph forward of the batch model per batch.

All three include applying the batch to their graph. The callers give torch (the
baselines) and numba (the incremental kernels) the same number of threads. Baselines
run the model in its own dtype (float32); the incremental path keeps float64
accumulators and float32 inputs. Each path is timed over its own number of batches
(the baselines are orders of magnitude slower), after warm-up batches that are not
timed.

Both wall-clock and process CPU time are recorded: on a shared machine the load of
other jobs changes between the timed segments, which moves wall-clock ratios; CPU
seconds are steadier but charge a multi-threaded baseline for every thread.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import torch

from strata.operators.layers import GCN, GraphSAGE
from strata.operators.streaming import (
    AffectedRecompute,
    LayerDelta,
    StreamingGNN,
    StreamingModel,
    UpdateStream,
    full_recompute,
)
from strata.storage import (
    CSRGraph,
    DynamicGraph,
    UpdateKind,
    decode_updates,
    rmat_edges,
)

DIM = 64
MIX = (0.7, 0.2, 0.1)  # add_edge, remove_edge (20% deletions), set_feature


@dataclass
class Setup:
    """A graph, features and a seeded (untrained: speed does not care) model."""

    graph: CSRGraph
    x: np.ndarray
    model: torch.nn.Module
    name: str


def make_setup(scale: int, model: str = "sage", seed: int = 0) -> Setup:
    """RMAT ``scale`` (edge factor 16, loops and duplicates kept), 64-d features."""
    src, dst = rmat_edges(scale, 16, seed=seed)
    graph = CSRGraph.from_edges(src, dst, num_nodes=1 << scale)
    x = np.random.default_rng(seed).normal(size=(graph.num_nodes, DIM))
    torch.manual_seed(seed)
    net = {
        "sage": lambda: GraphSAGE(DIM, DIM, DIM, num_layers=2),
        "sage-max": lambda: GraphSAGE(DIM, DIM, DIM, num_layers=2, aggr="max"),
        "gcn": lambda: GCN(DIM, DIM, DIM, num_layers=2),
    }[model]()
    net.eval()
    return Setup(graph, x.astype(np.float32), net, f"rmat{scale}-{model}")


def make_batches(
    setup: Setup, batch_size: int, count: int, *, mix: tuple = MIX, seed: int = 1
) -> list[pa.RecordBatch]:
    """``count`` batches of ``batch_size`` updates (no new nodes: baseline (a)
    keeps a fixed-size table)."""
    stream = UpdateStream(setup.graph, feature_dim=DIM, mix=mix, seed=seed)
    return [stream.next_batch(batch_size) for _ in range(count)]


def _touched(batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    u = decode_updates(batch)
    edges = (u.kind == UpdateKind.ADD_EDGE) | (u.kind == UpdateKind.REMOVE_EDGE)
    sets = u.kind == UpdateKind.SET_FEATURE
    return u.dst[edges], u.node[sets], u.feature[sets]


class _Timer:
    """Wall-clock and process CPU seconds of a block."""

    def __enter__(self) -> _Timer:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu


def _rate(rows: int, timer: _Timer, batches: int) -> dict[str, float]:
    return {
        "updates_per_s": rows / timer.wall,
        "updates_per_cpu_s": rows / timer.cpu,
        "ms_per_batch": 1e3 * timer.wall / batches,
        "timed_batches": batches,
    }


def time_incremental(setup: Setup, batches: list[pa.RecordBatch], warmup: int) -> dict:
    """Updates per second of the incremental path, plus its message counters."""
    gnn = StreamingGNN(StreamingModel.from_module(setup.model))
    gnn.initialize(setup.graph, setup.x)
    for batch in batches[:warmup]:
        gnn.apply(LayerDelta.from_updates(batch))
    before = gnn.stats()
    gc.collect()
    with _Timer() as timer:
        for batch in batches[warmup:]:
            gnn.apply(LayerDelta.from_updates(batch))
    timed = batches[warmup:]
    rows = sum(b.num_rows for b in timed)
    after = gnn.stats()
    out: dict[str, Any] = _rate(rows, timer, len(timed))
    for key in (
        "layer1.agg_rows",
        "layer2.agg_rows",
        "layer1.rows_out",
        "layer2.rows_out",
    ):
        out[key.replace(".", "_") + "_per_update"] = (after[key] - before[key]) / rows
    return out


class _Baseline:
    """The graph and features a baseline maintains itself."""

    def __init__(self, setup: Setup) -> None:
        self.graph = DynamicGraph(setup.graph)
        self.x = setup.x.copy()
        self.live = np.ones(setup.graph.num_nodes, dtype=bool)

    def apply(self, batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray]:
        self.graph.apply(batch)
        edge_dst, nodes, values = _touched(batch)
        self.x[nodes] = values
        return edge_dst, nodes


def time_affected(setup: Setup, batches: list[pa.RecordBatch], warmup: int) -> dict:
    """Baseline (a): recompute the affected vertices from full L-hop blocks."""
    state = _Baseline(setup)
    baseline = AffectedRecompute(
        setup.model, state.graph, state.x, state.live, dtype=torch.float32
    )
    for batch in batches[:warmup]:
        baseline.update(*state.apply(batch))
    recomputed = baseline.recomputed
    with _Timer() as timer:
        for batch in batches[warmup:]:
            baseline.update(*state.apply(batch))
    timed = batches[warmup:]
    rows = sum(b.num_rows for b in timed)
    out = _rate(rows, timer, len(timed))
    out["recomputed_per_update"] = (baseline.recomputed - recomputed) / rows
    return out


def time_full(setup: Setup, batches: list[pa.RecordBatch], warmup: int) -> dict:
    """Baseline (b): a full-graph forward per batch."""
    state = _Baseline(setup)
    for batch in batches[:warmup]:
        state.apply(batch)
        full_recompute(setup.model, state.graph, state.x, dtype=torch.float32)
    with _Timer() as timer:
        for batch in batches[warmup:]:
            state.apply(batch)
            full_recompute(setup.model, state.graph, state.x, dtype=torch.float32)
    timed = batches[warmup:]
    return _rate(sum(b.num_rows for b in timed), timer, len(timed))


#: Timed batches (after 2 warm-up ones) per path and batch size: the baselines cost
#: seconds per batch at scale 18, whatever the batch size.
TIMED = {"incremental": 20, "affected": 4, "full": 3}


def throughput_row(setup: Setup, batch_size: int) -> dict[str, Any]:
    """Updates per second of the three paths at one batch size, and the ratios."""
    warmup = 2
    inc_batches = (
        max(TIMED["incremental"], 20_000 // batch_size) if batch_size < 1000 else 5
    )
    count = warmup + max(inc_batches, TIMED["affected"], TIMED["full"])
    if batch_size >= 10_000:
        count = warmup + max(TIMED["affected"], TIMED["full"])
    batches = make_batches(setup, batch_size, count)
    inc = time_incremental(setup, batches, warmup)
    base = batches[: warmup + TIMED["affected"]]
    aff = time_affected(setup, base, warmup)
    full = time_full(setup, batches[: warmup + TIMED["full"]], warmup)
    return {
        "batch_size": batch_size,
        "incremental_updates_per_s": round(inc["updates_per_s"], 1),
        "affected_updates_per_s": round(aff["updates_per_s"], 2),
        "full_updates_per_s": round(full["updates_per_s"], 2),
        "speedup_vs_affected": round(inc["updates_per_s"] / aff["updates_per_s"], 2),
        "speedup_vs_full": round(inc["updates_per_s"] / full["updates_per_s"], 2),
        "cpu_speedup_vs_affected": round(
            inc["updates_per_cpu_s"] / aff["updates_per_cpu_s"], 2
        ),
        "cpu_speedup_vs_full": round(
            inc["updates_per_cpu_s"] / full["updates_per_cpu_s"], 2
        ),
        "incremental_ms_per_batch": round(inc["ms_per_batch"], 2),
        "affected_ms_per_batch": round(aff["ms_per_batch"], 1),
        "full_ms_per_batch": round(full["ms_per_batch"], 1),
        "affected_recomputed_per_update": round(aff["recomputed_per_update"], 1),
        "layer2_agg_rows_per_update": round(inc["layer2_agg_rows_per_update"], 1),
        "layer2_rows_out_per_update": round(inc["layer2_rows_out_per_update"], 1),
        "timed_batches": [
            inc["timed_batches"],
            aff["timed_batches"],
            full["timed_batches"],
        ],
    }


def crossover(rows: list[dict[str, Any]], key: str = "speedup_vs_full") -> int | None:
    """B*: the smallest batch size at which a full recompute per batch is faster."""
    for row in sorted(rows, key=lambda r: r["batch_size"]):
        if row[key] < 1.0:
            return int(row["batch_size"])
    return None
