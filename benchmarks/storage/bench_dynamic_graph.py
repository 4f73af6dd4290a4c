"""DynamicGraph at RMAT scale 18 (262k nodes, 4.2M base edges): apply, compact, query.

Run: .venv/bin/python -m pytest benchmarks/storage/bench_dynamic_graph.py \
    --benchmark-only
The stream is 80% new RMAT edges and 20% deletes of existing edges, applied as Arrow
update batches (decoding included). Rates are in ``extra_info['updates_per_s']``.
"""

import numpy as np
import pytest

from strata.storage.csr import CSRGraph
from strata.storage.dynamic import DynamicGraph
from strata.storage.generators import rmat_edges
from strata.storage.updates import UpdateKind, make_updates

SCALE = 18
STREAM = 100_000


@pytest.fixture(scope="module")
def base():
    src, dst = rmat_edges(SCALE, 16, seed=1)
    return CSRGraph.from_edges(src, dst, 1 << SCALE)


@pytest.fixture(scope="module")
def stream(base):
    rng = np.random.default_rng(0)
    new_src, new_dst = rmat_edges(SCALE, 1, seed=2)
    old_src, old_dst = base.to_coo()
    pick = rng.integers(0, base.num_edges, STREAM)
    delete = rng.random(STREAM) < 0.2
    kind = np.where(delete, UpdateKind.REMOVE_EDGE, UpdateKind.ADD_EDGE)
    src = np.where(delete, old_src[pick], new_src[:STREAM])
    dst = np.where(delete, old_dst[pick], new_dst[:STREAM])
    return kind.astype(np.int8), src, dst


@pytest.mark.parametrize("rows", [100, 1000, 10_000])
def test_apply(benchmark, base, stream, rows):
    kind, src, dst = stream
    total = STREAM
    batches = [
        make_updates(kind[i : i + rows], src=src[i : i + rows], dst=dst[i : i + rows],
                     event_time=0)
        for i in range(0, total, rows)
    ]  # fmt: skip

    def setup():
        return (DynamicGraph(base),), {}

    def run(graph):
        for batch in batches:
            graph.apply(batch)
        return graph

    graph = benchmark.pedantic(run, setup=setup, rounds=5, iterations=1)
    assert graph.num_edges > base.num_edges
    if benchmark.stats is not None:
        benchmark.extra_info.update(
            updates_per_s=round(total / benchmark.stats.stats.mean),
            rows_per_batch=rows,
            delta_pairs=graph.delta_size,
        )


def test_compact_after_stream(benchmark, base, stream):
    kind, src, dst = stream
    batch = make_updates(kind, src=src, dst=dst, event_time=0)

    def setup():
        graph = DynamicGraph(base)
        graph.apply(batch)
        return (graph,), {}

    snap = benchmark.pedantic(lambda g: g.snapshot(), setup=setup, rounds=5)
    assert snap.num_edges > base.num_edges


@pytest.mark.parametrize("direction", ["out", "in"])
def test_adjacency_of_1000_nodes_with_delta(benchmark, base, stream, direction):
    kind, src, dst = stream
    graph = DynamicGraph(base)
    graph.apply(make_updates(kind, src=src, dst=dst, event_time=0))
    nodes = np.random.default_rng(3).integers(0, base.num_nodes, 1000)
    query = graph.out_adjacency if direction == "out" else graph.in_adjacency
    query(nodes)  # the base's transpose is built once, outside the timer
    indptr, _ = benchmark(query, nodes)
    assert indptr.shape == (1001,)
