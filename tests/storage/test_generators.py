import networkx as nx
import numba
import numpy as np
import pytest

from strata.storage import DuplicatePolicy, GraphError, SelfLoopPolicy
from strata.storage.errors import FeatureError
from strata.storage.generators import (
    community_features,
    random_geometric,
    rmat,
    rmat_edges,
    rmat_edges_reference,
    sbm,
    split_masks,
)


def test_rmat_is_seeded_and_thread_count_independent():
    a = rmat_edges(10, 8, seed=3)
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        b = rmat_edges(10, 8, seed=3)
    finally:
        numba.set_num_threads(threads)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    c = rmat_edges(10, 8, seed=4)
    assert not np.array_equal(a[0], c[0])


def test_rmat_permutation_relabels_the_same_draws():
    src, dst = rmat_edges(9, 4, seed=5, permute=False)
    psrc, pdst = rmat_edges(9, 4, seed=5, permute=True)
    perm = np.random.default_rng(5).permutation(1 << 9)
    np.testing.assert_array_equal(perm[src], psrc)
    np.testing.assert_array_equal(perm[dst], pdst)


def _quadrant_frequencies(src, dst, scale):
    """Fraction of (src bit, dst bit) pairs over all levels: estimates a, b, c, d."""
    counts = np.zeros(4)
    for bit in range(scale):
        s = (src >> bit) & 1
        d = (dst >> bit) & 1
        counts += np.bincount(2 * s + d, minlength=4)
    return counts / counts.sum()


def test_rmat_matches_reference_distribution():
    scale, ef = 12, 16
    src, dst = rmat_edges(scale, ef, seed=0, permute=False)
    rsrc, rdst = rmat_edges_reference(scale, ef, seed=0)
    assert src.shape == rsrc.shape == (ef << scale,)
    ours = _quadrant_frequencies(src, dst, scale)
    ref = _quadrant_frequencies(rsrc, rdst, scale)
    np.testing.assert_allclose(ours, [0.57, 0.19, 0.19, 0.05], atol=2e-3)
    np.testing.assert_allclose(ref, [0.57, 0.19, 0.19, 0.05], atol=2e-3)
    # Degree distributions agree in shape: isolated fraction and the top degrees.
    deg = np.bincount(src, minlength=1 << scale)
    rdeg = np.bincount(rsrc, minlength=1 << scale)
    assert abs((deg == 0).mean() - (rdeg == 0).mean()) < 0.03
    assert 0.8 < deg.max() / rdeg.max() < 1.25


def test_rmat_graph_policies():
    g = rmat(
        8,
        8,
        seed=0,
        symmetrize=True,
        self_loops=SelfLoopPolicy.REMOVE,
        duplicates=DuplicatePolicy.REMOVE,
    )
    assert g.num_nodes == 256
    assert g.is_symmetric()
    assert not g.has_self_loops()
    raw = rmat(8, 8, seed=0)
    assert raw.num_edges == 8 * 256


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"scale": 0}, "1 <= scale <= 40"),
        ({"scale": 4, "edge_factor": -1}, "edge_factor >= 0"),
        ({"scale": 4, "a": 0.9, "b": 0.2}, "probabilities"),
    ],
)
def test_rmat_bad_arguments(kwargs, match):
    with pytest.raises(GraphError, match=match):
        rmat_edges(**kwargs)


def test_sbm_blocks_and_intra_fraction():
    g, blocks = sbm(3000, 6, avg_degree=12, intra_fraction=0.7, seed=1)
    assert g.is_symmetric()
    assert not g.has_self_loops()
    assert np.bincount(blocks).tolist() == [500] * 6
    src, dst = g.to_coo()
    assert abs((blocks[src] == blocks[dst]).mean() - 0.7) < 0.02
    assert 11.5 < g.num_edges / g.num_nodes < 12.01
    g2, blocks2 = sbm(3000, 6, avg_degree=12, intra_fraction=0.7, seed=1)
    np.testing.assert_array_equal(g.indices, g2.indices)
    np.testing.assert_array_equal(blocks, blocks2)
    _, contiguous = sbm(10, 2, 2, seed=0, permute=False)
    assert contiguous.tolist() == [0] * 5 + [1] * 5


def test_sbm_bad_arguments():
    with pytest.raises(GraphError, match="num_blocks"):
        sbm(10, 11)
    with pytest.raises(GraphError, match="intra_fraction"):
        sbm(10, 2, intra_fraction=1.5)


def test_random_geometric_matches_networkx():
    g, pos = random_geometric(1500, 0.06, seed=2)
    ref = nx.random_geometric_graph(
        1500, 0.06, pos={i: tuple(p) for i, p in enumerate(pos)}
    )
    ours = set(zip(*(a.tolist() for a in g.to_coo()), strict=True))
    theirs = {(u, v) for u, v in ref.edges()} | {(v, u) for u, v in ref.edges()}
    assert ours == theirs
    for u in range(0, 1500, 97):
        assert np.all(np.diff(g.neighbors(u)) > 0)


def test_random_geometric_tiny_radius_and_errors():
    g, _ = random_geometric(100, 1e-9, seed=0)
    assert g.num_edges == 0
    g, _ = random_geometric(50, 2.0, seed=0)
    assert g.num_edges == 50 * 49
    with pytest.raises(GraphError, match="radius > 0"):
        random_geometric(10, 0.0)


def _nearest_centroid_accuracy(x, labels):
    k = labels.max() + 1
    centres = np.stack([x[labels == c].mean(axis=0) for c in range(k)])
    dist = ((x[:, None, :] - centres[None]) ** 2).sum(axis=-1)
    return (dist.argmin(axis=1) == labels).mean()


def test_community_features_reward_neighbour_aggregation():
    g, blocks = sbm(2000, 4, avg_degree=10, intra_fraction=0.85, seed=0)
    x = community_features(blocks, 32, noise=1.0, seed=0)
    assert x.dtype == np.float32
    assert x.shape == (2000, 32)
    src, dst = g.to_coo()
    mean = np.zeros_like(x)
    np.add.at(mean, src, x[dst])
    mean /= np.maximum(g.out_degree(), 1)[:, None]
    alone = _nearest_centroid_accuracy(x, blocks)
    aggregated = _nearest_centroid_accuracy((x + mean) / 2, blocks)
    assert 0.3 < alone < 0.75  # hard but above chance (0.25)
    assert aggregated > alone + 0.1


def test_split_masks_shape_and_determinism():
    labels = np.repeat(np.arange(4), [30, 30, 30, 5])
    train, val, test = split_masks(labels, train_per_class=10, num_val=20, num_test=40)
    assert np.bincount(labels[train], minlength=4).tolist() == [10, 10, 10, 5]
    assert int(val.sum()) == 20
    assert int(test.sum()) == 40
    assert not (train & val).any()
    assert not (val & test).any()
    again = split_masks(labels, train_per_class=10, num_val=20, num_test=40)
    np.testing.assert_array_equal(train, again[0])
    with pytest.raises(FeatureError, match="integer"):
        split_masks(np.array([0.5]))
    with pytest.raises(FeatureError, match="num_features >= 1"):
        community_features(labels, 0)
