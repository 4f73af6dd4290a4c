"""PartitionBook: owners, global <-> local ids, halo (ghost) sets per part and chunk.

Built by :func:`build_book` from a graph and a
:class:`~strata.partition.types.Partition`. Local ids on part p: owned vertices ``0 ..
n_p - 1`` (ascending global id), then the halo ``n_p .. n_p + h_p - 1`` (ascending). The
halo of part p holds the vertices owned elsewhere within ``halo_hops`` *in*-hops of p's
vertices (the rows a message-passing layer on p reads). A chunked book also carries the
:class:`~strata.partition.chunking.ChunkSchedule`; a vertex-cut book lists, per part,
the vertices that have an edge there but their master elsewhere (:meth:`replicas`).

:meth:`PartitionBook.to_arrays` / :meth:`~PartitionBook.from_arrays` convert to a
dict of numpy arrays; ``strata.operators.io.partition_book`` stores them in a dataset
directory (``partition/`` itself does no I/O).

Examples:
    >>> import numpy as np
    >>> from strata.storage import CSRGraph
    >>> from strata.partition.types import CutKind, Partition
    >>> from strata.partition.baselines import RandomPartitioner
    >>> src = np.arange(6); ring = CSRGraph.from_edges(src, (src + 1) % 6)
    >>> p = RandomPartitioner(k=2, seed=0).partition(ring)
    >>> book = build_book(ring, p)
    >>> owned = book.owned_ids(0); owned.tolist()
    [...]
    >>> ids = np.concatenate([owned, book.halo(0)])
    >>> bool((book.to_global(0, book.to_local(0, ids)) == ids).all())
    True
    >>> again = PartitionBook.from_arrays(book.to_arrays())
    >>> bool((again.halo(1) == book.halo(1)).all())
    True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from strata.partition._types import Int32Array, Int64Array
from strata.partition.chunking import ChunkSchedule
from strata.partition.errors import PartitionError, PartitionKeyError
from strata.partition.metrics import undirected_edges
from strata.partition.types import CutKind, Partition
from strata.storage import CSRGraph, format_error

_WHERE = "build_book"
_CHUNK_PREFIX = "chunk_"


def _gather(indptr: np.ndarray, indices: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Concatenated CSR rows ``rows`` (vectorised)."""
    starts = indptr[rows]
    lens = indptr[rows + 1] - starts
    total = int(lens.sum())
    if total == 0:
        return np.empty(0, dtype=indices.dtype)
    offsets = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(total)
    return indices[offsets]


def _ptr(groups: list[np.ndarray]) -> tuple[Int64Array, Int64Array]:
    ptr = np.zeros(len(groups) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([g.size for g in groups])
    flat = np.concatenate(groups).astype(np.int64) if groups else np.empty(0, np.int64)
    return ptr, flat


def halo_sets(
    graph: CSRGraph, owner: np.ndarray, k: int, hops: int
) -> list[Int64Array]:
    """Per part, sorted non-owned vertices within ``hops`` in-hops (BFS)."""
    csc = graph.csc()
    out: list[Int64Array] = []
    for p in range(k):
        seen = owner == p
        frontier = np.flatnonzero(seen)
        found: list[np.ndarray] = []
        for _ in range(hops):
            nbrs = np.unique(_gather(csc.indptr, csc.indices, frontier))
            frontier = nbrs[~seen[nbrs]]
            seen[frontier] = True
            found.append(frontier)
        out.append(
            np.sort(np.concatenate(found)).astype(np.int64)
            if found
            else np.empty(0, np.int64)
        )
    return out


@dataclass(frozen=True, slots=True, eq=False)
class PartitionBook:
    """Who owns what, and the local id space of every part.

    Attributes:
        k: number of parts.
        owner: ``(n,)`` int32 part of every vertex (the master for vertex-cuts).
        local_id: ``(n,)`` int32 position of each vertex among its owner's vertices.
        owned_ptr: ``(k + 1,)`` offsets into ``owned``.
        owned: owned vertices per part, ascending.
        halo_ptr: ``(k + 1,)`` offsets into ``halo``.
        halo: per part, sorted non-owned vertices within ``halo_hops`` in-hops.
        halo_hops: hops of the halo.
        chunks: the level-2 split, when built with one.
        replica_ptr: vertex-cut only: offsets into ``replica``.
        replica: vertex-cut only: per part, vertices with an edge there whose
            master is elsewhere (ascending).
    """

    k: int
    owner: Int32Array
    local_id: Int32Array
    owned_ptr: Int64Array
    owned: Int64Array
    halo_ptr: Int64Array
    halo_ids: Int64Array
    halo_hops: int
    chunks: ChunkSchedule | None = None
    replica_ptr: Int64Array | None = None
    replica: Int64Array | None = None

    @property
    def num_nodes(self) -> int:
        """Vertices in the graph."""
        return int(self.owner.shape[0])

    def owned_ids(self, part: int) -> Int64Array:
        """Global ids owned by ``part`` (ascending)."""
        result: Int64Array = self.owned[self.owned_ptr[part] : self.owned_ptr[part + 1]]
        return result

    def halo(self, part: int) -> Int64Array:
        """Global ids of ``part``'s halo (ascending)."""
        result: Int64Array = self.halo_ids[
            self.halo_ptr[part] : self.halo_ptr[part + 1]
        ]
        return result

    def num_local(self, part: int) -> int:
        """Owned plus halo vertices of ``part``."""
        return int(
            self.owned_ptr[part + 1]
            - self.owned_ptr[part]
            + self.halo_ptr[part + 1]
            - self.halo_ptr[part]
        )

    def owner_of(self, ids: np.ndarray) -> Int32Array:
        """Owner of each global id."""
        result: Int32Array = self.owner[np.asarray(ids, dtype=np.int64)]
        return result

    def to_local(self, part: int, ids: np.ndarray) -> Int64Array:
        """Local ids of global ``ids`` on ``part``.

        Raises:
            PartitionKeyError: naming the first id that is neither owned by nor in
                the halo of ``part``.
        """
        ids = np.asarray(ids, dtype=np.int64)
        out = np.empty(ids.shape, dtype=np.int64)
        own = self.owner[ids] == part
        out[own] = self.local_id[ids[own]]
        rest = ids[~own]
        halo = self.halo(part)
        pos = np.searchsorted(halo, rest)
        if halo.size:
            hit = (pos < halo.size) & (halo[np.minimum(pos, halo.size - 1)] == rest)
        else:
            hit = np.zeros(rest.shape, dtype=bool)
        if not hit.all():
            bad = int(rest[np.argmin(hit)])
            raise PartitionKeyError(
                format_error(
                    "id",
                    f"PartitionBook.to_local(part={part})",
                    "an owned or halo vertex of the part",
                    f"{bad} (owned by part {int(self.owner[bad])})",
                    f"raise halo_hops (now {self.halo_hops}) if the part reads it",
                )
            )
        out[~own] = self.owned_ptr[part + 1] - self.owned_ptr[part] + pos
        return out

    def to_global(self, part: int, local: np.ndarray) -> Int64Array:
        """Global ids of ``part``'s local ids."""
        table = np.concatenate([self.owned_ids(part), self.halo(part)])
        result: Int64Array = table[np.asarray(local, dtype=np.int64)]
        return result

    def chunk_halo(self, part: int, chunk: int) -> Int64Array:
        """Sources minus destinations of ``part``'s ``chunk``-th chunk (in order)."""
        if self.chunks is None:
            raise PartitionError.build(
                "chunks",
                "PartitionBook.chunk_halo",
                "a chunked book",
                "None",
                "build_book(..., chunks=split_chunks(...))",
            )
        return self.chunks.halo_of(int(self.chunks.order[part, chunk]))

    def replicas(self, part: int) -> Int64Array:
        """Vertex-cut: vertices with an edge on ``part`` whose master is elsewhere."""
        if self.replica_ptr is None or self.replica is None:
            raise PartitionError.build(
                "replicas",
                "PartitionBook.replicas",
                "a vertex-cut book",
                "an edge-cut book",
            )
        result: Int64Array = self.replica[
            self.replica_ptr[part] : self.replica_ptr[part + 1]
        ]
        return result

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Plain numpy arrays (meta as a small int array); see :meth:`from_arrays`."""
        arrays: dict[str, np.ndarray] = {
            "meta": np.array([self.k, self.halo_hops], dtype=np.int64),
            "owner": self.owner,
            "local_id": self.local_id,
            "owned_ptr": self.owned_ptr,
            "owned": self.owned,
            "halo_ptr": self.halo_ptr,
            "halo": self.halo_ids,
        }
        if self.replica_ptr is not None and self.replica is not None:
            arrays["replica_ptr"] = self.replica_ptr
            arrays["replica"] = self.replica
        if self.chunks is not None:
            for name, array in self.chunks.to_arrays().items():
                arrays[_CHUNK_PREFIX + name] = array
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> PartitionBook:
        """Rebuild a book from :meth:`to_arrays` (arrays may be read-only maps)."""
        k, hops = (int(x) for x in arrays["meta"])
        chunk_arrays = {
            name[len(_CHUNK_PREFIX) :]: a
            for name, a in arrays.items()
            if name.startswith(_CHUNK_PREFIX)
        }
        return cls(
            k=k,
            owner=np.asarray(arrays["owner"], dtype=np.int32),
            local_id=np.asarray(arrays["local_id"], dtype=np.int32),
            owned_ptr=np.asarray(arrays["owned_ptr"], dtype=np.int64),
            owned=np.asarray(arrays["owned"], dtype=np.int64),
            halo_ptr=np.asarray(arrays["halo_ptr"], dtype=np.int64),
            halo_ids=np.asarray(arrays["halo"], dtype=np.int64),
            halo_hops=hops,
            chunks=ChunkSchedule.from_arrays(chunk_arrays) if chunk_arrays else None,
            replica_ptr=None
            if "replica_ptr" not in arrays
            else np.asarray(arrays["replica_ptr"], dtype=np.int64),
            replica=None
            if "replica" not in arrays
            else np.asarray(arrays["replica"], dtype=np.int64),
        )


def build_book(
    graph: CSRGraph,
    partition: Partition,
    halo_hops: int = 1,
    chunks: ChunkSchedule | None = None,
) -> PartitionBook:
    """Build the :class:`PartitionBook` of ``partition`` on ``graph``.

    Args:
        graph: the partitioned graph (halos follow its in-edges).
        partition: any partition of it (edge- or vertex-cut).
        halo_hops: BFS depth of the halos (>= 0).
        chunks: an optional level-2 split of the same partition.

    Returns:
        The book.

    Raises:
        PartitionError: on a size mismatch or ``halo_hops < 0``.
    """
    n = graph.num_nodes
    owner = np.asarray(partition.assignment, dtype=np.int32)
    if owner.shape != (n,):
        raise PartitionError.build(
            "partition", _WHERE, f"an assignment of shape ({n},)", f"{owner.shape}"
        )
    if halo_hops < 0:
        raise PartitionError.build(
            "halo_hops", _WHERE, "halo_hops >= 0", str(halo_hops)
        )
    k = partition.k
    order = np.argsort(owner, kind="stable")
    counts = np.bincount(owner, minlength=k)
    owned_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    local_id = np.empty(n, dtype=np.int32)
    local_id[order] = (np.arange(n) - np.repeat(owned_ptr[:-1], counts)).astype(
        np.int32
    )
    halo_ptr, halo = _ptr(halo_sets(graph, owner, k, halo_hops))
    replica_ptr = replica = None
    if partition.kind is CutKind.VERTEX_CUT and partition.edge_assignment is not None:
        src, dst = undirected_edges(graph)
        parts = partition.edge_assignment
        groups = []
        for p in range(k):
            on_p = parts == p
            touched = np.unique(np.concatenate([src[on_p], dst[on_p]]))
            groups.append(touched[owner[touched] != p])
        replica_ptr, replica = _ptr(groups)
    return PartitionBook(
        k=k,
        owner=owner,
        local_id=local_id,
        owned_ptr=owned_ptr,
        owned=order.astype(np.int64),
        halo_ptr=halo_ptr,
        halo_ids=halo,
        halo_hops=halo_hops,
        chunks=chunks,
        replica_ptr=replica_ptr,
        replica=replica,
    )
