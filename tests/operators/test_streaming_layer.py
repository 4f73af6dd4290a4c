"""Incremental layers equal a full recomputation after every flush (d3gnn.md §4 A1)."""

from __future__ import annotations

import numpy as np
import pytest

from strata.operators.errors import OperatorError
from strata.operators.layers import GAT
from strata.operators.streaming.cascade import StreamingGNN
from strata.operators.streaming.delta import LayerDelta
from strata.operators.streaming.generate import UpdateStream
from strata.operators.streaming.items import Placement
from strata.operators.streaming.layer import StreamingLayer
from strata.operators.streaming.model import StreamingModel
from strata.storage import CSRGraph, edge_updates, feature_updates, make_updates
from tests.operators.streaming_helpers import (
    IN_DIM,
    MODELS,
    Oracle,
    features,
    make_model,
    one_torch_thread,  # noqa: F401 (fixture)
    rmat_graph,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# 0 ──▶ 1 ──▶ 2      TINY: a cycle through 4 nodes, node 4 isolated
# ▲           │
# └──── 3 ◀───┘
TINY = CSRGraph.from_edges(np.array([0, 1, 2, 3]), np.array([1, 2, 3, 0]), num_nodes=5)


def check(gnn: StreamingGNN, oracle: Oracle, model, tol: float) -> float:
    nodes, expected = oracle.embeddings(model)
    np.testing.assert_array_equal(gnn.live_nodes(), nodes)
    got = gnn.embeddings(nodes)
    err = float(np.abs(got - expected).max(initial=0.0))
    assert err <= tol * (1 + np.abs(expected).max(initial=0.0)), err
    return err


@pytest.mark.parametrize("name", sorted(MODELS))
def test_exact_after_every_flush_with_deletions(name: str) -> None:
    """2k updates, 20% deletions, 10% features (a third of them new nodes)."""
    graph = rmat_graph(scale=8, edge_factor=4)
    x = features(graph.num_nodes)
    live = np.ones(graph.num_nodes, bool)
    live[::17] = False  # some nodes start without features
    model = make_model(name)
    gnn = StreamingGNN(StreamingModel.from_module(model), dtype=np.float64)
    gnn.initialize(graph, x, live)
    oracle = Oracle(graph, x, live)
    # GCN's batch layer computes its coefficients in float32 (6e-8 relative).
    tol = 1e-6 if name == "gcn" else 1e-9
    check(gnn, oracle, model, tol)
    stream = UpdateStream(graph, feature_dim=IN_DIM, mix=(0.7, 0.2, 0.1), new_nodes=0.3)
    for batch in stream.batches(num_updates=2000, batch_size=100):
        gnn.apply_updates(batch)
        oracle.apply(batch)
        check(gnn, oracle, model, tol)
    assert gnn.applied_updates == 2000


@pytest.mark.parametrize("name", ["sage-mean", "gcn", "sage-max"])
def test_float32_embeddings_within_1e5(name: str) -> None:
    graph = rmat_graph(scale=7, edge_factor=4, seed=3)
    x = features(graph.num_nodes, seed=3)
    model = make_model(name, seed=3)
    gnn = StreamingGNN(StreamingModel.from_module(model))  # float32 between layers
    gnn.initialize(graph, x)
    oracle = Oracle(graph, x)
    stream = UpdateStream(graph, feature_dim=IN_DIM, seed=3)
    for batch in stream.batches(num_updates=1000, batch_size=50):
        gnn.apply_updates(batch)
        oracle.apply(batch)
    check(gnn, oracle, model, 1e-5)


def test_multigraph_loops_dropped_deletes_and_liveness() -> None:
    """Parallel copies, loops, deletes of absent edges, nodes turning live."""
    model = make_model("gcn")
    x = features(5)
    live = np.array([True, True, True, True, False])
    gnn = StreamingGNN(StreamingModel.from_module(model), dtype=np.float64)
    gnn.initialize(TINY, x, live)
    oracle = Oracle(TINY, x, live)
    batches = [
        edge_updates(
            [0, 0, 2, 4], [1, 1, 2, 0], event_time=0
        ),  # copies, loop, dead src
        edge_updates(
            [3, 3, 0], [4, 4, 1], remove=True, event_time=0
        ),  # absent: dropped
        feature_updates([4], np.ones((1, IN_DIM), np.float32), event_time=0),  # 4 live
        make_updates(
            [0, 1, 1, 3],
            src=[4, 0, 0, 0],
            dst=[3, 1, 1, 0],
            node=[0, 0, 0, 7],
            feature=np.ones((4, IN_DIM), np.float32),
            event_time=0,
        ),
        edge_updates([2, 2], [2, 2], remove=True, event_time=0),
    ]
    for batch in batches:
        gnn.apply_updates(batch)
        oracle.apply(batch)
        check(gnn, oracle, model, 1e-6)
    layer = gnn.layers[0]
    assert layer.topology.dropped_deletes == oracle.graph.dropped_deletes == 3
    # n[v] is the live in-degree without loops (GCN's convention), at every layer
    src, dst = oracle.graph.edges()
    keep = oracle.live[src] & (src != dst)
    degree = np.bincount(dst[keep], minlength=oracle.graph.num_nodes)
    for layer in gnn.layers:
        np.testing.assert_array_equal(layer.acc.counts[: len(degree)], degree)


def test_an_add_and_delete_of_the_same_copy_cancel() -> None:
    layer = StreamingLayer(StreamingModel.from_module(make_model("sage-mean")).rules[0])
    layer.initialize(TINY, features(5))
    out = layer.apply(LayerDelta.edges([0, 0], [3, 3], [1, -1]))
    assert out.num_edge_ops == 0
    assert out.nodes.tolist() == []


def test_max_deletes_of_the_argmax_and_ties() -> None:
    """Pitfall 6: deleting a maximum, or one of two tied maxima, recomputes."""
    model = make_model("sage-max")
    x = np.zeros((4, IN_DIM), np.float32)
    x[0], x[1], x[2] = 3.0, 3.0, 1.0  # 0 and 1 tie for the max at node 3
    graph = CSRGraph.from_edges(np.array([0, 1, 2]), np.array([3, 3, 3]), num_nodes=4)
    gnn = StreamingGNN(StreamingModel.from_module(model), dtype=np.float64)
    gnn.initialize(graph, x)
    oracle = Oracle(graph, x)
    for batch in [
        edge_updates([0], [3], remove=True, event_time=0),  # one of the tie
        feature_updates([1], np.full((1, IN_DIM), 2.0, np.float32), event_time=0),
        edge_updates([1], [3], remove=True, event_time=0),  # the argmax
        edge_updates([2], [3], remove=True, event_time=0),  # the last in-edge
    ]:
        gnn.apply_updates(batch)
        oracle.apply(batch)
        check(gnn, oracle, model, 1e-12)
    assert not gnn.layers[0].acc.stale.any()


@pytest.mark.parametrize("name", ["sage-mean", "gcn", "sage-max"])
def test_snapshot_restore_continues_exactly(name: str) -> None:
    graph = rmat_graph(scale=7)
    x = features(graph.num_nodes)
    sm = StreamingModel.from_module(make_model(name))
    batches = list(
        UpdateStream(graph, feature_dim=IN_DIM, new_nodes=0.5).batches(600, 60)
    )
    straight = StreamingGNN(sm, dtype=np.float64)
    straight.initialize(graph, x)
    resumed = StreamingGNN(sm, dtype=np.float64)
    resumed.initialize(graph, x)
    for batch in batches[:5]:
        straight.apply_updates(batch)
        resumed.apply_updates(batch)
    state = resumed.snapshot()
    fresh = StreamingGNN(sm, dtype=np.float64)
    fresh.restore(state)
    for batch in batches[5:]:
        straight.apply_updates(batch)
        fresh.apply_updates(batch)
    np.testing.assert_array_equal(fresh.embeddings(), straight.embeddings())
    assert fresh.stats() == straight.stats()


@pytest.mark.parametrize("name", ["sage-mean", "gcn", "sage-max"])
def test_shards_give_the_single_process_result(name: str) -> None:
    """Each shard aggregates its own destinations; together they equal one layer."""
    graph = rmat_graph(scale=7)
    x = features(graph.num_nodes)
    sm = StreamingModel.from_module(make_model(name))
    ref = StreamingGNN(sm, dtype=np.float64)
    ref.initialize(graph, x)
    k, placement = 3, Placement(3)
    shards = [
        [
            StreamingLayer(
                rule,
                last=i == 1,
                act=sm.act,
                dtype=np.float64,
                placement=placement,
                shard=s,
            )
            for s in range(k)
        ]
        for i, rule in enumerate(sm.rules)
    ]
    inputs = x
    for i in range(2):
        for layer in shards[i]:
            layer.initialize(graph, inputs)
        inputs = ref.layers[i].outputs(np.arange(graph.num_nodes))
    stream = UpdateStream(graph, feature_dim=IN_DIM, new_nodes=0.3, seed=5)
    for batch in stream.batches(600, 40):
        delta = LayerDelta.from_updates(batch)
        ref.apply(delta)
        received = [delta] * k
        for i in range(2):  # every shard sends its part to every shard of the next
            sent = [shards[i][s].apply(received[s]) for s in range(k)]
            received = [LayerDelta.concat(sent)] * k
    nodes = ref.live_nodes()
    owner = placement.owners(nodes)
    got = np.stack(
        [shards[1][o].outputs(nodes[i : i + 1])[0] for i, o in enumerate(owner)]
    )
    np.testing.assert_allclose(got, ref.embeddings(nodes), atol=1e-12)


def test_unsupported_layers_are_refused() -> None:
    with pytest.raises(OperatorError, match=r"attention \(GATConv\)"):
        StreamingModel.from_module(GAT(4, 4, 2))
