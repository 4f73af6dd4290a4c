"""Where vertices and edges of a graph live on a mesh of P ranks (tdorch.md §5).

Vertex ``v`` is owned by rank ``hash(v) mod P`` (SplitMix64's finaliser, so id
ranges that a generator makes hot do not land on one rank). Two placements of the
edges, both deterministic functions of ``(graph, P)``:

- :class:`Hash`: every edge lives at the owner of its source ("owner computes");
  ``combiner`` says whether a rank folds its updates per destination before
  sending them (Pregel's combiner).
- :class:`HubSplit`: as :class:`Hash`, except the edges of a *hub* (out-degree above
  ``h * |E| / P``) are cut into P contiguous chunks dealt round-robin over all ranks,
  starting at the hub's owner. A rank holding a chunk of a remote hub needs
  ``state[hub]`` every superstep: the push-pull rule (a group of more than K tasks
  on one key pulls the key) decides it. Because the graph is static the rule runs
  once here: a group of at most K edges moves to the hub's owner for good (the
  tasks are pushed), a larger one stays and pulls the hub's value every superstep.
  Combining is always on for HubSplit.

:func:`partition_rank` cuts one rank's share: every rank can compute its own
share from the whole graph without talking to the others.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from strata.operators.algorithms.errors import AlgorithmError
from strata.operators.orchestration.plan import break_even_k, decide, hash_owner
from strata.storage.csr import CSRGraph

#: Bytes the break-even rule counts: a vertex value (D), one edge task moved to
#: the owner (T: destination id + weight), no result (R); F's default header.
VALUE_BYTES, TASK_BYTES, RESULT_BYTES = 8, 12, 0


def hub_k() -> int:
    """The push-pull threshold for hub chunks: the byte break-even (tdorch.md §3).

    Examples:
        >>> hub_k()
        2
    """
    return break_even_k(VALUE_BYTES, TASK_BYTES, RESULT_BYTES)


@dataclass(frozen=True, slots=True)
class Hash:
    """Hash placement, owner computes; ``combiner`` folds updates per (rank, dst).

    Examples:
        >>> Hash(), Hash(combiner=True).name
        (Hash(combiner=False), 'hash-combiner')
    """

    combiner: bool = False

    @property
    def name(self) -> str:
        """The CLI spelling: ``hash`` or ``hash-combiner``."""
        return "hash-combiner" if self.combiner else "hash"


@dataclass(frozen=True, slots=True)
class HubSplit:
    """Hash owners; edges of hubs (outdeg > ``h * |E| / P``) dealt over all ranks.

    ``k`` is the push-pull threshold (None: the byte break-even, :func:`hub_k`).

    Examples:
        >>> HubSplit().h, HubSplit().name
        (0.1, 'hubsplit')
    """

    h: float = 0.1
    k: int | None = None

    @property
    def combiner(self) -> bool:
        """HubSplit always folds updates per (rank, dst)."""
        return True

    @property
    def name(self) -> str:
        """The CLI spelling."""
        return "hubsplit"


Placement = Hash | HubSplit


def placement_named(name: str) -> Placement:
    """``hash`` | ``hash-combiner`` | ``hubsplit`` -> a placement with defaults.

    Examples:
        >>> placement_named("hash-combiner")
        Hash(combiner=True)
    """
    table: dict[str, Placement] = {
        "hash": Hash(),
        "hash-combiner": Hash(combiner=True),
        "hubsplit": HubSplit(),
    }
    if name not in table:
        raise AlgorithmError.build(
            "placement", "placement_named", f"one of {sorted(table)}", name
        )
    return table[name]


@dataclass(frozen=True, slots=True)
class Layout:
    """Vertex ownership on P ranks: owner and position of every vertex there."""

    size: int
    owner: NDArray[np.int64]  # owner rank of each vertex
    local: NDArray[np.int64]  # position of each vertex in its owner's list
    counts: NDArray[np.int64]  # vertices per rank

    @classmethod
    def build(cls, num_nodes: int, size: int) -> Layout:
        """Owners by :func:`hash_owner`; each owner lists its vertices by id."""
        owner = hash_owner(np.arange(num_nodes, dtype=np.int64), size)
        order = np.argsort(owner, kind="stable")
        counts = np.bincount(owner, minlength=size).astype(np.int64)
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        local = np.empty(num_nodes, dtype=np.int64)
        local[order] = np.arange(num_nodes, dtype=np.int64) - starts[owner[order]]
        return cls(size, owner, local, counts)

    def owned(self, rank: int) -> NDArray[np.int64]:
        """The global ids rank ``rank`` owns, ascending."""
        return np.flatnonzero(self.owner == rank).astype(np.int64)


@dataclass(frozen=True, slots=True)
class RankPart:
    """One rank's share of a graph.

    Source values live in one array per superstep: the rank's own vertex states
    (``num_own``) followed by the pulled copies, peer by peer (``pull_ptr``).
    Local edges are sorted by source slot (``src_ptr`` indexes them like a CSR).

    Attributes:
        rank, size, num_nodes: Where this share sits.
        own: Global ids owned here, ascending (position = local index).
        own_outdeg: Their out-degree in the whole graph.
        pull_ids: Local indices (at their owner) of the remote sources pulled,
            grouped by owner; ``pull_ptr[p]:pull_ptr[p + 1]`` come from rank ``p``.
        src_ptr: CSR offsets of local edges over the source slots.
        src_outdeg: Out-degree (whole graph) of every source slot.
        dst_owner: Owner rank of each edge's destination.
        dst_local: Local index of each edge's destination at its owner.
        weight: Edge weights (float64), or None.
    """

    rank: int
    size: int
    num_nodes: int
    own: NDArray[np.int64]
    own_outdeg: NDArray[np.int64]
    pull_ids: NDArray[np.int64]
    pull_ptr: NDArray[np.int64]
    src_ptr: NDArray[np.int64]
    src_outdeg: NDArray[np.int64]
    dst_owner: NDArray[np.int64]
    dst_local: NDArray[np.int64]
    weight: NDArray[np.float64] | None
    combiner: bool

    @property
    def num_own(self) -> int:
        """Vertices owned here."""
        return int(self.own.shape[0])

    @property
    def num_edges(self) -> int:
        """Edges stored here."""
        return int(self.dst_owner.shape[0])


def edge_ranks(graph: CSRGraph, size: int, placement: Placement) -> NDArray[np.int64]:
    """The rank that stores each CSR edge of ``graph`` under ``placement``.

    Examples:
        >>> g = CSRGraph.from_edges(np.zeros(16, np.int64), np.arange(1, 17), 17)
        >>> sorted(set(edge_ranks(g, 4, HubSplit(h=0.1)).tolist()))
        [0, 1, 2, 3]
    """
    src = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), np.diff(graph.indptr))
    owner = hash_owner(src, size)
    if isinstance(placement, Hash) or size == 1:
        return owner
    outdeg = np.diff(graph.indptr)
    hubs = outdeg > placement.h * graph.num_edges / size
    is_hub_edge = hubs[src]
    # Position j of an edge in its hub's row -> chunk j * P // deg (P contiguous
    # chunks of near-equal size), dealt round-robin from the owner.
    pos = np.arange(graph.num_edges, dtype=np.int64) - graph.indptr[src]
    chunk = (pos * size) // np.maximum(outdeg[src], 1)
    where = np.where(is_hub_edge, (owner + chunk) % size, owner)
    # The push-pull rule on each (rank, remote hub) group, once for a static graph:
    # at most K tasks of one key are pushed (the edges move to the owner).
    k = placement.k if placement.k is not None else hub_k()
    hub_edges = np.flatnonzero(is_hub_edge)
    key = src[hub_edges] * size + where[hub_edges]
    groups, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    group_rank, group_owner = groups % size, owner[groups // size]
    push = np.zeros(groups.shape[0], dtype=np.bool_)
    for rank in range(size):
        on = group_rank == rank
        push[on] = decide(counts[on], group_owner[on], rank, k).push
    moved = hub_edges[push[inverse]]
    where[moved] = owner[moved]
    return where


@dataclass(frozen=True, slots=True)
class Cut:
    """A whole placement computed once: vertex layout and the rank of every edge.

    A driver builds it once and hands it to every rank, so P ranks in one process
    do not each repeat the O(|E|) placement work.
    """

    layout: Layout
    edge_rank: NDArray[np.int16]

    @classmethod
    def build(cls, graph: CSRGraph, size: int, placement: Placement) -> Cut:
        """Lay out ``graph`` on ``size`` ranks under ``placement``."""
        where = edge_ranks(graph, size, placement).astype(np.int16)
        return cls(Layout.build(graph.num_nodes, size), where)


def partition_rank(
    graph: CSRGraph,
    size: int,
    rank: int,
    placement: Placement,
    cut: Cut | None = None,
) -> RankPart:
    """Cut rank ``rank``'s share of ``graph`` (see the module docstring).

    Examples:
        >>> g = CSRGraph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]), 3)
        >>> parts = [partition_rank(g, 2, r, Hash()) for r in range(2)]
        >>> sum(p.num_edges for p in parts), sum(p.num_own for p in parts)
        (3, 3)
    """
    cut = cut or Cut.build(graph, size, placement)
    layout = cut.layout
    mine = np.flatnonzero(cut.edge_rank == rank)
    src = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), np.diff(graph.indptr))[
        mine
    ]
    dst = graph.indices[mine].astype(np.int64)
    own = layout.owned(rank)
    outdeg = np.diff(graph.indptr).astype(np.int64)
    remote_src = np.unique(src[layout.owner[src] != rank])
    # Pulled sources grouped by owner (then by local index, the owner's order).
    order = np.lexsort((layout.local[remote_src], layout.owner[remote_src]))
    remote_src = remote_src[order]
    pull_ptr = np.concatenate(
        ([0], np.cumsum(np.bincount(layout.owner[remote_src], minlength=size)))
    ).astype(np.int64)
    slot_of = np.full(graph.num_nodes, -1, dtype=np.int64)
    slot_of[own] = np.arange(own.shape[0])
    slot_of[remote_src] = own.shape[0] + np.arange(remote_src.shape[0])
    slots = slot_of[src]
    by_slot = np.argsort(slots, kind="stable")
    num_slots = own.shape[0] + remote_src.shape[0]
    src_ptr = np.concatenate(([0], np.cumsum(np.bincount(slots, minlength=num_slots))))
    weight = None
    if graph.edge_weight is not None:
        weight = graph.edge_weight[mine][by_slot].astype(np.float64)
    dst = dst[by_slot]
    return RankPart(
        rank=rank,
        size=size,
        num_nodes=graph.num_nodes,
        own=own,
        own_outdeg=outdeg[own],
        pull_ids=layout.local[remote_src],
        pull_ptr=pull_ptr,
        src_ptr=src_ptr.astype(np.int64),
        src_outdeg=np.concatenate((outdeg[own], outdeg[remote_src])),
        dst_owner=layout.owner[dst],
        dst_local=layout.local[dst],
        weight=weight,
        combiner=placement.combiner,
    )
