"""A typed (heterogeneous) graph: node types with counts, relations with CSRs.

:class:`TypedGraph` is the storage every heterogeneous GNN reads: each node type
has its own id space ``[0, num_nodes[type])`` and each :class:`Relation` its own
:class:`RelationCSR` over the destination type's nodes. Node features live in a
:class:`~strata.storage.features.FeatureStore` with one group per node type
(``Key(node_type, "x")``, :mod:`strata.storage.hetero.features`).

Node types and relations are kept **sorted** (by name; relations by
``(src, name, dst)``), so two graphs built from the same edges in any order are
the same graph, and samplers key their random draws by the same relation index.

Examples:
    >>> import numpy as np
    >>> clicked = Relation("user", "clicked", "item")
    >>> g = TypedGraph.from_edges(
    ...     {clicked: (np.array([0, 1, 1]), np.array([2, 0, 2]))},
    ...     num_nodes={"user": 2, "item": 3},
    ... ).with_reverse(clicked, "clicked_by")
    >>> g.node_types, [str(r) for r in g.relations]
    (('item', 'user'), ['item-clicked_by->user', 'user-clicked->item'])
    >>> [str(r) for r in g.relations_into("user")], g.num_edges(clicked)
    (['item-clicked_by->user'], 3)
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import numpy as np

from strata.storage.errors import GraphError
from strata.storage.hetero.relation import Relation, RelationCSR, _check_ids

EdgeArrays = (
    tuple[np.ndarray, np.ndarray] | tuple[np.ndarray, np.ndarray, np.ndarray | None]
)


class TypedGraph:
    """Node types with counts and relations with CSRs over their destinations.

    Args:
        num_nodes: node count of every node type (``>= 0``).
        relations: the CSR of every relation; its ``src`` and ``dst`` types must
            be in ``num_nodes``, its rows one per destination node, its source
            ids in range of the source type.

    Raises:
        GraphError: on an unknown node type, a bad count, a CSR of the wrong
            number of rows or with out-of-range source ids (naming the relation).
    """

    def __init__(
        self, num_nodes: Mapping[str, int], relations: Mapping[Relation, RelationCSR]
    ) -> None:
        where = "TypedGraph"
        counts = _check_counts(num_nodes, where)
        checked: dict[Relation, RelationCSR] = {}
        for rel in sorted(relations, key=tuple):
            checked[_check_relation(rel, counts, where)] = relations[rel]
            csr = relations[rel]
            if not isinstance(csr, RelationCSR):
                raise GraphError.build(
                    f"relation {rel}", where, "a RelationCSR", type(csr).__name__
                )
            if csr.num_dst != counts[rel.dst]:
                raise GraphError.build(
                    f"relation {rel}",
                    where,
                    f"{counts[rel.dst]} CSR rows (num_nodes[{rel.dst!r}])",
                    f"{csr.num_dst} rows",
                )
            _check_ids(
                f"source ids of relation {rel}",
                csr.indices,
                counts[rel.src],
                f"{rel.src!r}",
                where,
            )
        # Plain dicts (picklable: graphs cross process executors); the
        # properties hand out read-only views.
        self._num_nodes = counts
        self._relations = checked

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_edges(
        cls, edges: Mapping[Relation, EdgeArrays], num_nodes: Mapping[str, int]
    ) -> TypedGraph:
        """Build from ``{relation: (src_ids, dst_ids[, weights])}`` edge lists.

        Raises:
            GraphError: as the constructor, and on ids out of range of their
                node type (naming the relation and the position).
        """
        counts = _check_counts(num_nodes, "TypedGraph.from_edges")
        relations: dict[Relation, RelationCSR] = {}
        for rel, arrays in edges.items():
            where = f"TypedGraph.from_edges[{rel}]"
            rel = _check_relation(rel, counts, "TypedGraph.from_edges")
            if not isinstance(arrays, tuple) or len(arrays) not in (2, 3):
                raise GraphError.build(
                    f"edges of relation {rel}",
                    where,
                    "a (src_ids, dst_ids) or (src_ids, dst_ids, weights) tuple",
                    type(arrays).__name__,
                )
            weights = arrays[2] if len(arrays) == 3 else None
            relations[rel] = RelationCSR.from_edges(
                arrays[0],
                arrays[1],
                num_src=counts[rel.src],
                num_dst=counts[rel.dst],
                weights=weights,
                where=where,
            )
        return cls(counts, relations)

    def with_reverse(self, rel: Relation, name: str) -> TypedGraph:
        """This graph plus the reverse of ``rel``, named ``name``.

        Raises:
            GraphError: if ``rel`` is not a relation of the graph or the reverse
                already exists.
        """
        csr = self.csr(rel)
        reverse = rel.reversed(name)
        if reverse in self._relations:
            raise GraphError.build(
                "reverse relation",
                "TypedGraph.with_reverse",
                "a relation not yet in the graph",
                str(reverse),
            )
        relations = dict(self._relations)
        relations[reverse] = csr.transpose(self._num_nodes[rel.src])
        return TypedGraph(self._num_nodes, relations)

    # ------------------------------------------------------------------ queries
    @property
    def num_nodes(self) -> Mapping[str, int]:
        """Node count per node type (read-only, sorted by type)."""
        return MappingProxyType(self._num_nodes)

    @property
    def node_types(self) -> tuple[str, ...]:
        """The node types, sorted."""
        return tuple(self._num_nodes)

    @property
    def relations(self) -> Mapping[Relation, RelationCSR]:
        """Every relation's CSR (read-only; iterates relations sorted)."""
        return MappingProxyType(self._relations)

    def csr(self, rel: Relation) -> RelationCSR:
        """The CSR of relation ``rel``.

        Raises:
            GraphError: if ``rel`` is not a relation of the graph.
        """
        csr = self._relations.get(Relation(*rel))
        if csr is None:
            raise GraphError.build(
                "relation",
                "TypedGraph",
                f"one of {[str(r) for r in self._relations]}",
                str(rel),
            )
        return csr

    def relations_into(self, dst_type: str) -> tuple[Relation, ...]:
        """The relations whose destination type is ``dst_type`` (sorted)."""
        return tuple(r for r in self._relations if r.dst == dst_type)

    def num_edges(self, rel: Relation | None = None) -> int:
        """Edges of relation ``rel``, or of every relation when None."""
        if rel is None:
            return sum(c.num_edges for c in self._relations.values())
        return self.csr(rel).num_edges

    def nbytes(self) -> int:
        """Bytes held by the relations' arrays."""
        return sum(c.nbytes() for c in self._relations.values())

    def __repr__(self) -> str:
        nodes = ", ".join(f"{t}={n}" for t, n in self._num_nodes.items())
        rels = ", ".join(f"{r}: {c.num_edges}" for r, c in self._relations.items())
        return f"TypedGraph(nodes: {nodes}; edges: {rels})"


def _check_relation(rel: object, num_nodes: Mapping[str, int], where: str) -> Relation:
    """``rel`` as a :class:`Relation` whose node types are in ``num_nodes``."""
    if not (
        isinstance(rel, tuple)
        and len(rel) == 3
        and all(isinstance(part, str) and part for part in rel)
    ):
        raise GraphError.build(
            "relation",
            where,
            "a Relation(src, name, dst) of non-empty strings",
            repr(rel),
        )
    relation = Relation(*rel)
    for end, node_type in (("src", relation.src), ("dst", relation.dst)):
        if node_type not in num_nodes:
            raise GraphError.build(
                f"{end} type of relation {relation}",
                where,
                f"one of the node types {sorted(num_nodes)}",
                repr(node_type),
                "give every node type a count in num_nodes",
            )
    return relation


def _check_counts(num_nodes: Mapping[str, int], where: str) -> dict[str, int]:
    """``num_nodes`` as ``{type: count}`` sorted by type, each an int ``>= 0``."""
    counts: dict[str, int] = {}
    for node_type in sorted(num_nodes):
        count = num_nodes[node_type]
        if not isinstance(node_type, str) or not node_type:
            raise GraphError.build(
                "node type", where, "a non-empty str", repr(node_type)
            )
        if isinstance(count, bool) or not isinstance(count, int | np.integer):
            raise GraphError.build(
                f"num_nodes[{node_type!r}]", where, "an int", repr(count)
            )
        if count < 0:
            raise GraphError.build(
                f"num_nodes[{node_type!r}]", where, "a count >= 0", str(count)
            )
        counts[node_type] = int(count)
    return counts
