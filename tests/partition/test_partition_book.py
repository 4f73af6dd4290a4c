import networkx as nx
import numpy as np
import pytest

from strata.partition.baselines import RandomPartitioner
from strata.partition.book import PartitionBook, build_book
from strata.partition.chunking import ChunkConfig, split_chunks
from strata.partition.errors import PartitionError, PartitionKeyError
from strata.partition.hdrf import HDRFPartitioner
from strata.partition.metrics import undirected_edges
from strata.partition.multilevel import MultilevelPartitioner
from strata.storage import CSRGraph


def brute_halo(graph, owner, part, hops):
    """Non-owned vertices within `hops` in-hops of the part (networkx BFS)."""
    g = nx.DiGraph()
    g.add_nodes_from(range(graph.num_nodes))
    src, dst = graph.to_coo()
    g.add_edges_from(zip(dst.tolist(), src.tolist(), strict=True))  # reversed: in-hops
    found = set()
    for v in np.flatnonzero(owner == part):
        found |= set(nx.single_source_shortest_path_length(g, int(v), cutoff=hops))
    return sorted(x for x in found if owner[x] != part)


@pytest.mark.parametrize("hops", [1, 2])
def test_halos_match_brute_force(hops):
    rng = np.random.default_rng(hops)
    g = CSRGraph.from_edges(rng.integers(0, 60, 150), rng.integers(0, 60, 150), 60)
    p = RandomPartitioner(4, seed=0).partition(g)
    book = build_book(g, p, halo_hops=hops)
    for part in range(4):
        assert book.halo(part).tolist() == brute_halo(g, p.assignment, part, hops)


def test_local_ids_round_trip(community):
    p = MultilevelPartitioner(5, seed=0).partition(community)
    book = build_book(community, p, halo_hops=2)
    for part in range(5):
        ids = np.concatenate([book.owned_ids(part), book.halo(part)])
        local = book.to_local(part, ids)
        assert local.tolist() == list(range(book.num_local(part)))
        assert np.array_equal(book.to_global(part, local), ids)
        owned = book.owned_ids(part)
        assert (book.owner_of(owned) == part).all()
        assert np.array_equal(book.local_id[owned], np.arange(owned.size))


def test_to_local_names_the_first_stranger(ring8):
    p = RandomPartitioner(2, seed=0).partition(ring8)
    book = build_book(ring8, p, halo_hops=0)
    other = book.owned_ids(1)
    with pytest.raises(
        PartitionKeyError, match=f"got {other[0]} \\(owned by part 1\\)"
    ):
        book.to_local(0, np.concatenate([book.owned_ids(0), other]))


def test_arrays_round_trip_with_chunks(community):
    p = MultilevelPartitioner(2, seed=0).partition(community)
    chunks = split_chunks(community, p.assignment, 2, ChunkConfig(3))
    book = build_book(community, p, chunks=chunks)
    arrays = book.to_arrays()
    for a in arrays.values():
        a.flags.writeable = False  # stored arrays come back read-only
    again = PartitionBook.from_arrays(arrays)
    for name in ("owner", "local_id", "owned_ptr", "owned", "halo_ptr", "halo_ids"):
        assert np.array_equal(getattr(again, name), getattr(book, name))
    assert (again.k, again.halo_hops) == (2, 1)
    assert again.chunks is not None
    for part in range(2):
        for c in range(3):
            cid = chunks.order[part, c]
            expected = np.setdiff1d(chunks.src_of(cid), chunks.dst_of(cid))
            assert np.array_equal(again.chunk_halo(part, c), expected)


def test_vertex_cut_replicas(powerlaw):
    p = HDRFPartitioner(4, seed=0).partition(powerlaw)
    book = build_book(powerlaw, p)
    u, v = undirected_edges(powerlaw)
    for part in range(4):
        on = p.edge_assignment == part
        touched = np.unique(np.concatenate([u[on], v[on]]))
        expected = touched[p.assignment[touched] != part]
        assert np.array_equal(book.replicas(part), expected)
    again = PartitionBook.from_arrays(book.to_arrays())
    assert np.array_equal(again.replicas(2), book.replicas(2))


def test_errors(ring8):
    p = RandomPartitioner(2).partition(ring8)
    book = build_book(ring8, p)
    with pytest.raises(PartitionError, match="a chunked book"):
        book.chunk_halo(0, 0)
    with pytest.raises(PartitionError, match="a vertex-cut book"):
        book.replicas(0)
    with pytest.raises(PartitionError, match="halo_hops >= 0"):
        build_book(ring8, p, halo_hops=-1)
