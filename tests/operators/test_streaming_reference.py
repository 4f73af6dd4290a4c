"""The DGL-style baseline (affected recompute) is exact, so its speed is comparable."""

from __future__ import annotations

import numpy as np
import pytest

from strata.operators.streaming import AffectedRecompute, UpdateStream
from strata.storage import UpdateKind, decode_updates
from tests.operators.streaming_helpers import (
    IN_DIM,
    Oracle,
    features,
    make_model,
    one_torch_thread,  # noqa: F401 (fixture)
    rmat_graph,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("name", ["sage-mean", "sage-max", "gcn"])
def test_affected_recompute_keeps_the_table_exact(name: str) -> None:
    graph = rmat_graph(scale=7, seed=4)
    x = features(graph.num_nodes, seed=4)
    model = make_model(name, seed=4)
    oracle = Oracle(graph, x)
    baseline = AffectedRecompute(model, oracle.graph, oracle.x, oracle.live)
    stream = UpdateStream(graph, feature_dim=IN_DIM, seed=4)  # no new nodes
    for batch in stream.batches(600, 60):
        oracle.apply(batch)
        u = decode_updates(batch)
        edges = (u.kind == UpdateKind.ADD_EDGE) | (u.kind == UpdateKind.REMOVE_EDGE)
        baseline.features = oracle.x
        baseline.update(u.dst[edges], u.node[u.kind == UpdateKind.SET_FEATURE])
        nodes, expected = oracle.embeddings(model)
        np.testing.assert_allclose(baseline.table[nodes], expected, atol=1e-6)
    assert baseline.recomputed > 0
