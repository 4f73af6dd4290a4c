import numpy as np
import pytest

from strata.partition.baselines import RandomPartitioner
from strata.partition.errors import PartitionError
from strata.partition.grem import ArrayEdgeChunks, GremPartitioner, ScoreDType
from strata.partition.metrics import balance_cap, undirected_edges
from strata.partition.multilevel import MultilevelPartitioner
from strata.partition.streaming import FennelPartitioner


def test_close_to_multilevel_on_communities(community):
    ml = MultilevelPartitioner(8, seed=0).partition(community).report.edge_cut
    grem = GremPartitioner(8, seed=0).partition(community).report
    assert grem.edge_cut <= 1.15 * ml
    assert grem.vertex_balance <= 1.03


@pytest.mark.parametrize("graph", ["community", "geometric"])
def test_refinement_ablation(graph, request):
    g = request.getfixturevalue(graph)
    on = GremPartitioner(8, seed=1).partition(g).report.edge_cut
    off = GremPartitioner(8, seed=1, refine=False).partition(g).report.edge_cut
    assert on < off


def test_beats_restreamed_fennel_on_geometric_graphs(geometric):
    grem = GremPartitioner(8, seed=0).partition(geometric).report.edge_cut
    fennel = FennelPartitioner(8, passes=5, seed=0).partition(geometric)
    assert grem < fennel.report.edge_cut


def test_stream_equals_graph_entry_point(community):
    src, dst = undirected_edges(community)
    perm = np.random.default_rng(4).permutation(src.size)
    stream = ArrayEdgeChunks(src[perm], dst[perm])
    cfg = GremPartitioner(4, seed=4)
    a = cfg.partition(community)
    b = cfg.partition_stream(stream, community.num_nodes)  # report from the stream
    assert np.array_equal(a.assignment, b.assignment)
    assert a.report.edge_cut == b.report.edge_cut
    assert a.report.replication_factor == pytest.approx(b.report.replication_factor)
    assert a.report.edge_balance == pytest.approx(b.report.edge_balance)


def test_bfloat16_scores_and_small_chunks(powerlaw):
    cap = balance_cap(powerlaw.num_nodes, 4, 0.03)
    for cfg in (
        GremPartitioner(4, score_dtype=ScoreDType.BFLOAT16),
        GremPartitioner(4, chunk_edges=500, seed_chunk_edges=2000, passes=2),
    ):
        p = cfg.partition(powerlaw)
        assert max(p.report.part_sizes) <= cap
        random_cut = RandomPartitioner(4).partition(powerlaw).report.edge_cut
        assert p.report.edge_cut < random_cut


def test_deterministic(community):
    a = GremPartitioner(4, seed=9).partition(community).assignment
    b = GremPartitioner(4, seed=9).partition(community).assignment
    assert np.array_equal(a, b)


def test_phases_and_errors(ring8):
    r = GremPartitioner(2, passes=2).partition(ring8).report
    assert list(r.phase_seconds) == ["seed", "pass_1", "pass_2", "finish"]
    with pytest.raises(PartitionError, match="node_weights"):
        GremPartitioner(2).partition(ring8, node_weights=np.ones(8))
    empty = ArrayEdgeChunks(np.empty(0, np.int64), np.empty(0, np.int64))
    with pytest.raises(PartitionError, match="at least one edge"):
        GremPartitioner(2).partition_stream(empty, 8)
