"""Window effect (messages per update vs window) and long-stream exactness runs."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyarrow as pa
import torch
from streaming_harness import DIM, MIX, Setup

from strata.operators.streaming import (
    Count,
    LayerDelta,
    StreamingGNN,
    StreamingModel,
    UpdateStream,
    Window,
    WindowBuffer,
    full_recompute,
)
from strata.storage import DynamicGraph, UpdateKind, decode_updates, make_updates

_COUNTERS = ("agg_rows", "rows_out", "pairs_out", "flushes")


class _EventClock:
    """Wall clock for the buffers = the stream's event time (no real waiting)."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def _feed(buffer: WindowBuffer, batch: pa.RecordBatch, offset: int) -> list[LayerDelta]:
    """A layer-1 step's handling of one update batch: cut at windows, offer."""
    times = batch.column("event_time").to_numpy()
    cuts = buffer.cut_points(batch.num_rows, offset, times)
    out, start = [], 0
    for end in [*cuts, batch.num_rows]:
        if end > start:
            piece = LayerDelta.from_updates(
                batch.slice(start, end - start),
                first_offset=offset + start,
                arrival_ms=int(times[start]),
            )
            out += buffer.offer(piece, int(times[start:end].max()), close=end in cuts)
        start = end
    return out


def window_curve(
    setup: Setup,
    windows: dict[str, Window],
    *,
    num_updates: int,
    input_rows: int = 10,
    mix: tuple[float, float, float] = MIX,
) -> list[dict[str, Any]]:
    """Messages per update for each window over one stream.

    The stream arrives in batches of ``input_rows`` updates, one batch per ms of
    event time. Messages: aggregator rows applied per layer, and rows sent from
    layer 1 to layer 2 (inputs of the next layer) and from layer 2 to the sink.
    ``mean_wait_ms`` is the mean event time an update spent buffered.
    """
    stream = UpdateStream(setup.graph, feature_dim=DIM, mix=mix, seed=3)
    batches = list(stream.batches(num_updates, input_rows))
    model = StreamingModel.from_module(setup.model)
    rows = []
    for name, window in windows.items():
        gnn = StreamingGNN(model)
        gnn.initialize(setup.graph, setup.x)
        before = gnn.stats()
        clock = _EventClock()
        buffer = WindowBuffer(window, clock=clock)
        waits, waited = 0.0, 0
        start = time.perf_counter()
        offset = 0
        for batch in batches:
            clock.now = int(batch.column("event_time")[0].as_py())
            deltas = _feed(buffer, batch, offset)
            offset += batch.num_rows
            for delta in deltas:
                arrivals = delta.arrivals[delta.arrivals >= 0]
                waits += float((clock.now - arrivals).sum())
                waited += int(arrivals.size)
                gnn.apply(delta)
        tail = buffer.drain()
        waits += float((clock.now - tail.arrivals[tail.arrivals >= 0]).sum())
        waited += int((tail.arrivals >= 0).sum())
        gnn.apply(tail)
        seconds = time.perf_counter() - start
        after = gnn.stats()
        assert gnn.applied_updates == num_updates
        d = {k: after[k] - before[k] for k in after}
        l1, l2 = d["layer1.agg_rows"], d["layer2.agg_rows"]
        sent = d["layer1.rows_out"] + d["layer1.pairs_out"] + d["layer2.rows_out"]
        rows.append(
            {
                "window": name,
                "flushes": d["layer1.flushes"],
                "layer1_agg_rows_per_update": round(l1 / num_updates, 3),
                "layer2_agg_rows_per_update": round(l2 / num_updates, 3),
                "layer1_to_layer2_rows_per_update": round(
                    (d["layer1.rows_out"] + d["layer1.pairs_out"]) / num_updates, 3
                ),
                "layer2_to_sink_rows_per_update": round(
                    d["layer2.rows_out"] / num_updates, 3
                ),
                "messages_per_update": round((l1 + l2 + sent) / num_updates, 3),
                "mean_wait_ms": round(waits / max(waited, 1), 2),
                "updates_per_s": round(num_updates / seconds, 1),
            }
        )
    return rows


def exactness_run(
    setup: Setup,
    window_size: int,
    *,
    num_updates: int,
    input_rows: int = 1000,
    new_nodes: float = 0.1,
) -> dict[str, Any]:
    """Max error vs a float64 full recompute after every flush of a Count window.

    The incremental path runs as deployed: float32 inputs and embeddings between
    layers, float64 accumulators. Errors: absolute, and relative ``|d| / (1 + |h|)``.
    """
    stream = UpdateStream(
        setup.graph, feature_dim=DIM, mix=MIX, new_nodes=new_nodes, seed=5
    )
    gnn = StreamingGNN(StreamingModel.from_module(setup.model))
    gnn.initialize(setup.graph, setup.x)
    graph = DynamicGraph(setup.graph)
    x = np.zeros((setup.graph.num_nodes * 2, DIM), np.float32)
    x[: setup.graph.num_nodes] = setup.x
    live = np.zeros(x.shape[0], dtype=bool)
    live[: setup.graph.num_nodes] = True
    buffer = WindowBuffer(Count(window_size))
    worst_abs = worst_rel = 0.0
    checks = 0
    offset = 0
    start = time.perf_counter()
    for batch in stream.batches(num_updates, input_rows):
        for delta in _feed(buffer, batch, offset):
            gnn.apply(delta)
            graph_apply(graph, x, live, delta)
            n = graph.num_nodes
            expected = full_recompute(
                setup.model, graph, x[:n], live[:n], dtype=torch.float64
            )
            nodes = np.flatnonzero(live[:n])
            assert np.array_equal(gnn.live_nodes(), nodes)
            diff = np.abs(gnn.embeddings(nodes) - expected[nodes])
            worst_abs = max(worst_abs, float(diff.max(initial=0)))
            rel = diff / (1 + np.abs(expected[nodes]))
            worst_rel = max(worst_rel, float(rel.max(initial=0)))
            checks += 1
        offset += batch.num_rows
    return {
        "updates": num_updates,
        "window": window_size,
        "flushes_checked": checks,
        "max_abs_error": worst_abs,
        "max_rel_error": worst_rel,
        "nodes": int(gnn.live_nodes().size),
        "edges": int(graph.num_edges),
        "seconds": round(time.perf_counter() - start, 1),
    }


def graph_apply(
    graph: DynamicGraph, x: np.ndarray, live: np.ndarray, delta: LayerDelta
) -> None:
    """Apply a layer-1 record to the oracle's graph and features."""
    kinds = np.where(delta.count > 0, UpdateKind.ADD_EDGE, UpdateKind.REMOVE_EDGE)
    graph.add_nodes(max(0, delta.num_nodes - graph.num_nodes))
    if delta.num_edge_ops:
        graph.apply(
            decode_updates(
                make_updates(kinds, src=delta.src, dst=delta.dst, event_time=0)
            )
        )
    if delta.num_rows:
        x[delta.nodes] = delta.values
        live[delta.nodes] = True
