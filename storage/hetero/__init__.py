"""Typed (heterogeneous) graphs: node types, relations, typed CSRs and features.

* :class:`Relation`: an edge type ``src -name-> dst``.
* :class:`RelationCSR`: one relation's edges as a CSR over its destination nodes.
* :class:`TypedGraph`: node counts per type and a CSR per relation, validated.
* Typed feature-store groups (``Key(node_type, attr)``): :func:`typed_feature_store`,
  :func:`check_typed_features`, :func:`gather_typed`.
"""

from strata.storage.hetero.features import (
    check_typed_features,
    gather_typed,
    typed_feature_store,
)
from strata.storage.hetero.relation import Relation, RelationCSR
from strata.storage.hetero.typed_graph import TypedGraph

__all__ = [
    "Relation",
    "RelationCSR",
    "TypedGraph",
    "check_typed_features",
    "gather_typed",
    "typed_feature_store",
]
