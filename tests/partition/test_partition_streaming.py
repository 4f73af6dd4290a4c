import numpy as np
import pytest

from strata.partition.baselines import HashPartitioner, RandomPartitioner
from strata.partition.metrics import balance_cap
from strata.partition.streaming import FennelPartitioner, LDGPartitioner, StreamOrder

RULES = [LDGPartitioner, FennelPartitioner]


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("graph", ["community", "geometric", "powerlaw", "grid"])
def test_better_than_hash(rule, graph, request):
    g = request.getfixturevalue(graph)
    hashed = HashPartitioner(8).partition(g).report.edge_cut
    assert rule(8, seed=0).partition(g).report.edge_cut < hashed


@pytest.mark.parametrize("rule", RULES)
def test_restreaming_improves_one_pass(rule, community, geometric):
    for g in (community, geometric):
        one = rule(8, seed=0).partition(g).report.edge_cut
        five = rule(8, seed=0, passes=5).partition(g).report.edge_cut
        assert five < one


@pytest.mark.parametrize("order", list(StreamOrder))
@pytest.mark.parametrize("rule", RULES)
def test_orders_respect_the_cap(rule, order, community):
    p = rule(6, order=order, seed=3, passes=2).partition(community)
    assert max(p.report.part_sizes) <= balance_cap(community.num_nodes, 6, 0.03)


def test_bfs_order_helps_geometric_graphs(geometric):
    rnd = FennelPartitioner(8, seed=0).partition(geometric).report.edge_cut
    bfs = FennelPartitioner(8, seed=0, order=StreamOrder.BFS).partition(geometric)
    assert bfs.report.edge_cut < 0.5 * rnd


def test_deterministic_for_a_seed(powerlaw):
    a = FennelPartitioner(4, seed=2, passes=3).partition(powerlaw).assignment
    b = FennelPartitioner(4, seed=2, passes=3).partition(powerlaw).assignment
    assert np.array_equal(a, b)


def test_phase_seconds_name_the_passes(community):
    r = LDGPartitioner(4, passes=3).partition(community).report
    assert list(r.phase_seconds)[:1] == ["pass_1"]
    assert r.method == "ldg"


def test_random_is_exactly_balanced(community):
    p = RandomPartitioner(7, seed=1).partition(community)
    assert max(p.report.part_sizes) - min(p.report.part_sizes) <= 1
