import numpy as np
import pytest

from strata.partition.chunk_order import chain_order, overlap_matrix, total_overlap
from strata.partition.chunking import (
    ChunkConfig,
    ChunkMethod,
    ChunkOrdering,
    split_chunks,
)
from strata.partition.errors import PartitionError
from strata.partition.multilevel import MultilevelPartitioner
from strata.storage import CSRGraph


@pytest.fixture(scope="module")
def directed(community):
    # a directed graph: keep each edge one way, so in- and out-neighbours differ
    src, dst = community.to_coo()
    keep = (src * 7 + dst) % 3 != 0
    return CSRGraph.from_edges(src[keep], dst[keep], community.num_nodes)


@pytest.mark.parametrize("method", list(ChunkMethod))
def test_every_vertex_in_one_chunk_and_halos(directed, method):
    k, m = 3, 4
    part = MultilevelPartitioner(k, seed=0).partition(directed).assignment
    s = split_chunks(directed, part, k, ChunkConfig(m, method=method))
    assert np.array_equal(np.sort(s.dst), np.arange(directed.num_nodes))
    csc = directed.csc()
    for c in range(s.num_chunks):
        d = s.dst_of(c)
        assert (part[d] == c // m).all()
        in_nbrs = np.concatenate(
            [csc.indices[csc.indptr[v] : csc.indptr[v + 1]] for v in d] + [d]
        )
        expected = np.unique(in_nbrs)
        assert np.array_equal(s.src_of(c), expected)
        assert np.array_equal(s.halo_of(c), np.setdiff1d(expected, d))
        indptr, indices = s.csr_of(c)
        for i, v in enumerate(d):  # local CSR reproduces the in-edges
            local = s.src_of(c)[indices[indptr[i] : indptr[i + 1]]]
            assert np.array_equal(local, csc.indices[csc.indptr[v] : csc.indptr[v + 1]])
    assert s.alpha > 1.0


def test_recursive_chunks_read_fewer_rows(community):
    part = MultilevelPartitioner(2, seed=0).partition(community).assignment
    rec = split_chunks(community, part, 2, ChunkConfig(8, seed=0))
    order = np.random.default_rng(0).permutation(community.num_nodes)
    shuffled = split_chunks(
        community, part, 2, ChunkConfig(8, method=ChunkMethod.CONTIGUOUS)
    )
    assert rec.alpha < shuffled.alpha or rec.alpha < 4
    assert order.size == community.num_nodes


def test_chain_order_never_lowers_total_overlap(community):
    part = MultilevelPartitioner(2, seed=1).partition(community).assignment
    natural = split_chunks(
        community, part, 2, ChunkConfig(6, ordering=ChunkOrdering.NATURAL)
    )
    chained = split_chunks(community, part, 2, ChunkConfig(6))
    for p in range(2):
        ov = overlap_matrix(natural, p)
        before = total_overlap(ov, np.arange(6))
        after = total_overlap(ov, chained.order[p] - p * 6)
        assert after >= before
        assert sorted(chained.order[p].tolist()) == list(range(p * 6, p * 6 + 6))


def test_chain_order_small():
    ov = np.array([[0, 9, 0, 1], [9, 0, 1, 0], [0, 1, 0, 9], [1, 0, 9, 0]])
    assert total_overlap(ov, chain_order(ov)) == 19


def test_round_trip_and_errors(ring8):
    part = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    s = split_chunks(ring8, part, 2, ChunkConfig(3))  # 4 vertices in 3 chunks
    again = type(s).from_arrays(s.to_arrays())
    assert np.array_equal(again.src, s.src)
    assert np.array_equal(again.order, s.order)
    assert s.chunk_sizes().sum() == 8
    with pytest.raises(PartitionError, match="num_chunks >= 1"):
        split_chunks(ring8, part, 2, ChunkConfig(0))
    with pytest.raises(PartitionError, match="part in split_chunks"):
        split_chunks(ring8, part[:5], 2, ChunkConfig(2))
