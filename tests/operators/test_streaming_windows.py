"""Window policies: flush points, per-vertex release, caps, and equal end states."""

from __future__ import annotations

import numpy as np
import pytest

from strata.operators.streaming.cascade import StreamingGNN
from strata.operators.streaming.delta import LayerDelta
from strata.operators.streaming.generate import UpdateStream
from strata.operators.streaming.model import StreamingModel
from strata.operators.streaming.windows import (
    Adaptive,
    Count,
    Immediate,
    Session,
    Tumbling,
    WindowBuffer,
)
from strata.storage import edge_updates
from tests.operators.streaming_helpers import IN_DIM, features, make_model, rmat_graph


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def feed(buffer: WindowBuffer, batch, offset: int) -> list[LayerDelta]:
    """What a layer-1 step does with one update batch (cut, offer)."""
    times = batch.column("event_time").to_numpy()
    cuts = buffer.cut_points(batch.num_rows, offset, times)
    out, start = [], 0
    for end in [*cuts, batch.num_rows]:
        if end > start:
            piece = LayerDelta.from_updates(
                batch.slice(start, end - start), first_offset=offset + start
            )
            out += buffer.offer(piece, int(times[start:end].max()), close=end in cuts)
        start = end
    return out


def flushed_ranges(window, batch_size: int) -> list[tuple[int, int]]:
    buffer = WindowBuffer(window)
    src = np.arange(100) % 7
    ranges = []
    for start in range(0, 100, batch_size):
        n = min(batch_size, 100 - start)
        batch = edge_updates(
            src[start : start + n],
            src[start : start + n],
            event_time=np.arange(start, start + n) * 10,
        )
        ranges += [(d.first_offset, d.end_offset) for d in feed(buffer, batch, start)]
    return ranges


@pytest.mark.parametrize(
    "window",
    [Count(16), Tumbling(25), Tumbling(130, on="event_time")],
    ids=["count", "tumbling-offset", "tumbling-time"],
)
def test_flush_points_do_not_depend_on_batching(window) -> None:
    expected = flushed_ranges(window, 1)
    assert expected
    assert all(a < b for a, b in expected)
    for batch_size in (3, 10, 64):
        assert flushed_ranges(window, batch_size) == expected


def test_count_windows_hold_exactly_n_updates() -> None:
    assert flushed_ranges(Count(16), 7) == [(i, i + 16) for i in range(0, 96, 16)]
    assert flushed_ranges(Tumbling(25), 7)[:2] == [(0, 25), (25, 50)]


def test_session_releases_each_vertex_after_its_gap() -> None:
    buffer = WindowBuffer(Session(gap_ms=10))
    assert buffer.offer(LayerDelta.edges([0], [1], [1]), event_ms=0) == []
    assert buffer.offer(LayerDelta.edges([0], [2], [1]), event_ms=8) == []
    [out] = buffer.offer(LayerDelta.edges([5], [2], [1]), event_ms=12)  # 1 is due
    assert out.dst.tolist() == [1]
    assert buffer.pending_rows == 2
    [out] = buffer.poll(event_ms=40)
    assert sorted(out.src.tolist()) == [0, 5]
    assert buffer.empty


def test_adaptive_gives_hot_vertices_short_gaps() -> None:
    buffer = WindowBuffer(Adaptive(min_gap_ms=1, horizon_ms=1_000))
    for t in range(50):  # vertex 1 is hot
        buffer.offer(LayerDelta.edges([0], [1], [1]), event_ms=t)
    buffer.offer(LayerDelta.edges([0], [2], [1]), event_ms=50)
    released = np.concatenate([d.dst for d in buffer.poll(event_ms=100)])
    assert set(released.tolist()) == {1}  # gap ~ 1000/50 = 20 ms; vertex 2 waits 1 s
    assert buffer.pending_rows == 1


def test_max_latency_caps_every_policy_by_the_wall_clock() -> None:
    for window in (
        Session(gap_ms=10**9, max_latency_ms=50),
        Tumbling(10**9, max_latency_ms=50),
    ):
        clock = FakeClock()
        buffer = WindowBuffer(window, clock=clock)
        assert buffer.offer(LayerDelta.edges([0], [1], [1]), event_ms=0) == []
        clock.now += 49
        assert buffer.poll() == []
        clock.now += 1
        assert [d.num_edge_ops for d in buffer.poll()] == [1]


def test_max_pending_bounds_the_buffer() -> None:
    buffer = WindowBuffer(Session(gap_ms=10**9, max_pending=3))
    for i in range(3):
        assert buffer.offer(LayerDelta.edges([0], [i], [1]), event_ms=0) == []
    [out] = buffer.offer(LayerDelta.edges([0], [9], [1]), event_ms=0)
    assert out.num_edge_ops == 4
    assert buffer.empty


def test_buffer_state_round_trips() -> None:
    buffer = WindowBuffer(Adaptive(min_gap_ms=5, horizon_ms=100))
    buffer.offer(LayerDelta.edges([0, 1], [1, 2], [1, 1]), event_ms=3)
    copy = WindowBuffer(Adaptive(min_gap_ms=5, horizon_ms=100))
    copy.restore(buffer.state())
    assert copy.pending_rows == 2
    assert [d.dst.tolist() for d in copy.poll(10**6)] == [[1, 2]]


@pytest.mark.parametrize(
    "window",
    [
        Immediate(),
        Count(7),
        Count(1000),
        Tumbling(50),
        Session(gap_ms=3),
        Adaptive(min_gap_ms=1, horizon_ms=20),
    ],
    ids=["immediate", "count7", "count1000", "tumbling", "session", "adaptive"],
)
def test_every_policy_reaches_the_same_state(window) -> None:
    """At quiescence the state does not depend on grouping (§3.5)."""
    graph = rmat_graph(scale=7)
    x = features(graph.num_nodes)
    sm = StreamingModel.from_module(make_model("sage-mean"))
    batches = list(
        UpdateStream(graph, feature_dim=IN_DIM, new_nodes=0.2).batches(800, 40)
    )
    reference = StreamingGNN(sm, dtype=np.float64)
    reference.initialize(graph, x)
    for batch in batches:
        reference.apply_updates(batch)
    gnn = StreamingGNN(sm, dtype=np.float64)
    gnn.initialize(graph, x)
    buffer = WindowBuffer(window, clock=FakeClock())
    offset = 0
    for batch in batches:
        for delta in feed(buffer, batch, offset):
            gnn.apply(delta)
        offset += batch.num_rows
    gnn.apply(buffer.drain())
    assert gnn.applied_updates == 800
    np.testing.assert_allclose(gnn.embeddings(), reference.embeddings(), atol=1e-9)
