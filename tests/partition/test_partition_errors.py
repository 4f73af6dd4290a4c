import numpy as np
import pytest

from strata.partition.baselines import HashPartitioner, RandomPartitioner
from strata.partition.errors import PartitionError
from strata.partition.multilevel import MultilevelPartitioner
from strata.partition.streaming import FennelPartitioner, LDGPartitioner
from strata.storage import CSRGraph

FACTORIES = [
    MultilevelPartitioner,
    LDGPartitioner,
    FennelPartitioner,
    HashPartitioner,
    RandomPartitioner,
]


@pytest.fixture(params=FACTORIES, ids=lambda f: f.__name__)
def make(request):
    return request.param


def test_k_above_num_nodes(make, ring8):
    with pytest.raises(PartitionError, match=r"k in .*: expected 1 <= k <= 8"):
        make(9).partition(ring8)


@pytest.mark.parametrize("k", [0, -1])
def test_k_below_one_is_refused_by_the_config(make, k):
    with pytest.raises(PartitionError, match=rf"k in .*: expected k >= 1 .*got {k}"):
        make(k)


def test_empty_graph(make):
    empty = CSRGraph.from_edges(np.array([], dtype=np.int64), np.array([]), 0)
    with pytest.raises(PartitionError, match=r"expected at least one vertex"):
        make(1).partition(empty)


def test_isolated_vertices_only(make):
    lonely = CSRGraph.from_edges(np.array([0, 1]), np.array([0, 1]), 5)  # loops only
    with pytest.raises(PartitionError, match=r"at least one edge.*5 isolated vertices"):
        make(2).partition(lonely)


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        (
            np.array([1, 1, 1, -1, 1, 1, 1, 1.0]),
            r"weights >= 0, got -1.0 at position 3",
        ),
        (np.array([1, np.nan, 1, 1, 1, 1, 1, 1.0]), r"finite weights, got nan"),
        (np.array([1, np.inf, 1, 1, 1, 1, 1, 1.0]), r"finite weights, got inf"),
        (np.ones(7), r"expected shape \(8,\), got shape \(7,\)"),
        (np.zeros(8), "positive total weight"),
    ],
)
def test_bad_node_weights(make, ring8, weights, message):
    with pytest.raises(PartitionError, match=message):
        make(2).partition(ring8, node_weights=weights)


def test_negative_edge_weights(make):
    g = CSRGraph.from_edges(
        np.array([0, 1, 2]), np.array([1, 2, 0]), edge_weight=np.array([1.0, -2.0, 1.0])
    )
    with pytest.raises(PartitionError, match=r"edge_weight .* finite weights >= 0"):
        make(2).partition(g)


def test_directed_input_is_symmetrised(make, ring8):
    # documented decision: directed graphs are read as undirected
    src, dst = ring8.to_coo()
    both = CSRGraph.from_edges(np.concatenate([src, dst]), np.concatenate([dst, src]))
    a = make(2, seed=3).partition(ring8)
    b = make(2, seed=3).partition(both)
    assert np.array_equal(a.assignment, b.assignment)
    assert a.report.num_edges == 8
