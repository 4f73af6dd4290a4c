import numpy as np
import pytest

from strata.partition.errors import PartitionError
from strata.partition.hdrf import EdgeOrder, HDRFPartitioner, HDRFState
from strata.partition.metrics import undirected_edges, vertex_cut_replication
from strata.partition.multilevel import MultilevelPartitioner
from strata.partition.types import CutKind


@pytest.mark.parametrize("k", [4, 8])
def test_replication_well_below_random(powerlaw, community, k):
    for g in (powerlaw, community):
        p = HDRFPartitioner(k, seed=0).partition(g)
        u, v = undirected_edges(g)
        rnd = np.random.default_rng(0).integers(0, k, u.size).astype(np.int32)
        random_rf = vertex_cut_replication(u, v, rnd, g.num_nodes, k)
        assert p.report.replication_factor <= 0.75 * random_rf
        assert p.report.edge_balance <= 1.05


def test_vertex_cut_partition_shape(powerlaw):
    p = HDRFPartitioner(4, order=EdgeOrder.NATURAL).partition(powerlaw)
    u, v = undirected_edges(powerlaw)
    assert p.kind is CutKind.VERTEX_CUT
    assert p.edge_assignment is not None
    assert p.edge_assignment.shape == u.shape
    assert p.report.edge_cut == 0.0
    # every vertex's master holds one of its edges
    has_edge = np.zeros(powerlaw.num_nodes, bool)
    holds = np.zeros((powerlaw.num_nodes, 4), bool)
    holds[u, p.edge_assignment] = holds[v, p.edge_assignment] = True
    has_edge[u] = has_edge[v] = True
    masters = p.assignment[has_edge]
    assert holds[np.flatnonzero(has_edge), masters].all()


def test_rf_not_worse_than_metis_induced_vertex_cut(powerlaw):
    k = 8
    u, v = undirected_edges(powerlaw)
    owner = MultilevelPartitioner(k, seed=0).partition(powerlaw).assignment
    induced = vertex_cut_replication(u, v, owner[u], powerlaw.num_nodes, k)
    hdrf = HDRFPartitioner(k, seed=0).partition(powerlaw).report.replication_factor
    assert hdrf <= induced


def test_incremental_state_equals_batch():
    rng = np.random.default_rng(0)
    src = rng.integers(0, 50, 400)
    dst = rng.integers(0, 50, 400)
    batch = HDRFState.empty(50, 3).place_batch(src, dst)
    one = HDRFState.empty(10, 3)  # grows as ids arrive
    single = [one.place(int(a), int(b)) for a, b in zip(src, dst, strict=True)]
    assert batch.tolist() == single


def test_snapshot_restore_round_trip():
    rng = np.random.default_rng(1)
    src, dst = rng.integers(0, 30, 200), rng.integers(0, 30, 200)
    a = HDRFState.empty(30, 4, lam=2.0)
    a.place_batch(src[:100], dst[:100])
    snap = a.snapshot()
    b = HDRFState.empty(1, 1)
    b.restore(snap)
    assert (b.k, b.lam) == (4, 2.0)
    assert (
        a.place_batch(src[100:], dst[100:]).tolist()
        == b.place_batch(src[100:], dst[100:]).tolist()
    )
    snap["degree"][:] = 0  # snapshots are copies
    assert a.degree.sum() > 0


def test_bad_input():
    with pytest.raises(PartitionError, match="k >= 1"):
        HDRFState.empty(3, 0)
    with pytest.raises(PartitionError, match="ids >= 0"):
        HDRFState.empty(3, 2).place_batch(np.array([-1]), np.array([0]))
