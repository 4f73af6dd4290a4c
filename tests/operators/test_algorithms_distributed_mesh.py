"""Distributed algorithms on the engine's meshes (sim, zmq) and inside a pipeline step.

The full algorithm x placement x P matrix runs on the SimMesh in
``test_algorithms_distributed.py``; here the same oracles check a few zmq cases
(P = 2, real processes) and the pipeline step on every executor.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse import csgraph
from test_algorithms_distributed import (
    cc_oracle,
    pagerank_oracle,
    scipy_matrix,
    skewed_graph,
)

from strata.engine import execute
from strata.engine.pipeline import Pipeline
from strata.operators.algorithms.distributed import distributed_step, run_distributed
from strata.operators.io.datasets import Payload, dataset_payload
from strata.storage import GraphDataset

GRAPH = skewed_graph(300, 2000, seed=2)


def small_graph() -> Payload:
    """The pipeline's source step (module level: the process executor imports it);
    a payload, as graphs cross executors."""
    payload = dataset_payload(GraphDataset(GRAPH))
    payload["edge_weight"] = GRAPH.edge_weight
    return payload


@pytest.mark.multiprocess
@pytest.mark.parametrize(
    ("algorithm", "placement"),
    [
        ("pagerank", "hubsplit"),
        ("bfs", "hash-combiner"),
        ("sssp", "hubsplit"),
        ("cc", "hash"),
    ],
)
def test_zmq_mesh_matches_the_oracles(algorithm: str, placement: str) -> None:
    params = {"iterations": 20} if algorithm == "pagerank" else {"source": 0}
    if algorithm == "cc":
        params = {}
    values, report = run_distributed(
        algorithm, GRAPH, 2, placement, mesh="zmq", **params
    )
    assert report.mesh == "zmq"
    assert report.workers == 2
    matrix = scipy_matrix(GRAPH)
    if algorithm == "pagerank":
        assert np.abs(values - pagerank_oracle(GRAPH, 20)).sum() <= 1e-9
    elif algorithm == "bfs":
        expected = csgraph.shortest_path(matrix, unweighted=True, indices=0)
        np.testing.assert_array_equal(
            values, np.where(np.isinf(expected), -1, expected)
        )
    elif algorithm == "sssp":
        np.testing.assert_array_equal(values, csgraph.dijkstra(matrix, indices=0))
    else:
        np.testing.assert_array_equal(values, cc_oracle(GRAPH))


def test_step_gives_the_same_values_on_every_executor(executor: str) -> None:
    p = Pipeline("distributed_pagerank")
    p.step("graph", small_graph)
    p.step(
        "ranks",
        distributed_step,
        "graph",
        algorithm="pagerank",
        workers=2,
        placement="hubsplit",
        iterations=20,
    )
    p.step(
        "labels", distributed_step, "graph", algorithm="cc", workers=2, placement="hash"
    )
    result = execute(p, executor, collect=("ranks", "labels"))
    (ranks,) = result.collected["ranks"]
    (labels,) = result.collected["labels"]
    assert np.abs(ranks["values"] - pagerank_oracle(GRAPH, 20)).sum() <= 1e-9
    assert ranks["report"]["supersteps"] == 20
    assert ranks["report"]["workers"] == 2
    np.testing.assert_array_equal(labels["values"], cc_oracle(GRAPH))
