"""A sampled layer of a typed graph: per node type sources, per relation a CSR.

A :class:`TypedBlock` is the heterogeneous :class:`~strata.operators.samplers.Block`.
For every node type it lists the layer's source nodes (global ids of that type),
**the destination nodes first** (``num_dst[type]`` of them, possibly 0), and for
every relation a :class:`~strata.storage.hetero.RelationCSR` in **local** ids: row
``i`` is destination ``i`` of the relation's ``dst`` type and its entries are
local ids of the ``src`` type, i.e. rows of ``src_global_ids[rel.src]``.

A layer reading the block takes ``num_src(type)`` input rows per type and returns
``num_dst[type]`` output rows per destination type; a relation's root term reads
the destination rows ``x[rel.dst][:num_dst[rel.dst]]``.

Examples:
    >>> import numpy as np
    >>> from strata.storage.hetero import Relation, RelationCSR, TypedGraph
    >>> clicked = Relation("user", "clicked", "item")
    >>> block = TypedBlock(
    ...     src_global_ids={"item": np.array([4]), "user": np.array([7, 2])},
    ...     num_dst={"item": 1, "user": 0},
    ...     relations={clicked: RelationCSR(np.array([0, 2]), np.array([0, 1]))},
    ... )
    >>> block.num_src("user"), block.dst_global_ids("item").tolist(), block.num_edges
    (2, [4], 2)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from strata.operators.errors import OperatorError
from strata.storage._types import Int64Array
from strata.storage.hetero import Relation, RelationCSR, TypedGraph


@dataclass(frozen=True, slots=True, eq=False)
class TypedBlock:
    """One layer of a sampled typed mini-batch.

    Attributes:
        src_global_ids: per node type, int64 global ids of the layer's source
            nodes, the ``num_dst[type]`` destination nodes first.
        num_dst: per node type, the number of destination nodes.
        relations: per relation, a CSR over the destination type's
            ``num_dst`` rows whose indices are local source ids.

    Raises:
        OperatorError: on inconsistent counts or local ids out of range.
    """

    src_global_ids: Mapping[str, Int64Array]
    num_dst: Mapping[str, int]
    relations: Mapping[Relation, RelationCSR]

    def __post_init__(self) -> None:
        where = "TypedBlock"
        if set(self.num_dst) != set(self.src_global_ids):
            raise OperatorError.build(
                "num_dst",
                where,
                f"one count per node type {sorted(self.src_global_ids)}",
                str(sorted(self.num_dst)),
            )
        for node_type, ids in self.src_global_ids.items():
            if not 0 <= self.num_dst[node_type] <= ids.shape[0]:
                raise OperatorError.build(
                    f"num_dst[{node_type!r}]",
                    where,
                    f"0 <= num_dst <= num_src ({ids.shape[0]})",
                    str(self.num_dst[node_type]),
                )
        for rel, csr in self.relations.items():
            for end in (rel.src, rel.dst):
                if end not in self.num_dst:
                    raise OperatorError.build(
                        f"relation {rel}", where, "known node types", repr(end)
                    )
            if csr.num_dst != self.num_dst[rel.dst]:
                raise OperatorError.build(
                    f"relation {rel}",
                    where,
                    f"{self.num_dst[rel.dst]} rows (num_dst[{rel.dst!r}])",
                    f"{csr.num_dst} rows",
                )
            num_src = self.num_src(rel.src)
            if csr.num_edges and (
                int(csr.indices.min()) < 0 or int(csr.indices.max()) >= num_src
            ):
                raise OperatorError.build(
                    f"local source ids of relation {rel}",
                    where,
                    f"ids in [0, {num_src})",
                    f"[{int(csr.indices.min())}, {int(csr.indices.max())}]",
                )
        # Own plain dicts (picklable, for prefetching processes), typed read-only.
        object.__setattr__(self, "src_global_ids", dict(self.src_global_ids))
        object.__setattr__(self, "num_dst", dict(self.num_dst))
        object.__setattr__(self, "relations", dict(self.relations))

    @property
    def node_types(self) -> tuple[str, ...]:
        """The node types of the block."""
        return tuple(self.src_global_ids)

    def num_src(self, node_type: str) -> int:
        """Number of source nodes of ``node_type`` (destinations included)."""
        return int(self.src_global_ids[node_type].shape[0])

    def dst_global_ids(self, node_type: str) -> Int64Array:
        """Global ids of the destination nodes of ``node_type`` (a view)."""
        return self.src_global_ids[node_type][: self.num_dst[node_type]]

    @property
    def num_edges(self) -> int:
        """Sampled edges over every relation."""
        return sum(csr.num_edges for csr in self.relations.values())

    def nbytes(self) -> int:
        """Bytes held by the block's arrays."""
        ids = sum(a.nbytes for a in self.src_global_ids.values())
        return ids + sum(csr.nbytes() for csr in self.relations.values())

    def __repr__(self) -> str:
        sizes = ", ".join(
            f"{t}: {self.num_src(t)}/{self.num_dst[t]}" for t in self.node_types
        )
        return f"TypedBlock(src/dst {sizes}; num_edges={self.num_edges})"


def full_graph_block(graph: TypedGraph) -> TypedBlock:
    """The whole typed graph as one block: every node a source and a destination.

    Local ids are global ids and the relations are the graph's own CSRs (no
    copy), so a layer run on this block is full-neighbourhood inference.
    """
    return TypedBlock(
        src_global_ids={
            t: np.arange(n, dtype=np.int64) for t, n in graph.num_nodes.items()
        },
        num_dst=dict(graph.num_nodes),
        relations=dict(graph.relations),
    )
