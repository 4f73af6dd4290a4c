"""Typed feature-store groups: one FeatureStore group per node type.

A heterogeneous graph's node features live in an ordinary
:class:`~strata.storage.features.FeatureStore`, the node type as the group:
``Key("user", "x")``, ``Key("item", "x")``. Row ``i`` of a group is node ``i`` of
that type. :func:`typed_feature_store` builds such a store, :func:`check_typed_features`
checks its row counts against a :class:`TypedGraph`, and :func:`gather_typed`
gathers the rows of a sampled block's source nodes, per type.

Examples:
    >>> import numpy as np, torch
    >>> from strata.storage.hetero import Relation, TypedGraph
    >>> g = TypedGraph.from_edges(
    ...     {Relation("user", "clicked", "item"): (np.array([0, 1]), np.array([1, 1]))},
    ...     num_nodes={"user": 2, "item": 2})
    >>> store = typed_feature_store({"user": {"x": torch.zeros(2, 3)},
    ...                              "item": {"x": torch.ones(2, 4)}})
    >>> check_typed_features(store, g, attrs=("x",))
    >>> {t: tuple(x.shape) for t, x in gather_typed(store, {"item": [1]}).items()}
    {'item': (1, 4)}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import torch

from strata.storage.errors import FeatureError
from strata.storage.features import InMemoryFeatureStore
from strata.storage.features.gather import IdsLike
from strata.storage.features.store import FeatureStore, Key
from strata.storage.hetero.typed_graph import TypedGraph


def typed_feature_store(
    features: Mapping[str, Mapping[str, torch.Tensor | np.ndarray]],
    *,
    graph: TypedGraph | None = None,
    allow_nonfinite: bool = False,
) -> InMemoryFeatureStore:
    """An in-memory store with one group per node type: ``Key(type, attr)``.

    Args:
        features: ``{node_type: {attr: tensor}}``; rows are node ids of the type.
        graph: when given, every group is checked against its node count.
        allow_nonfinite: accept NaN/inf (rejected by default).

    Raises:
        FeatureError: on a non-finite value, or (with ``graph``) an unknown node
            type or a row count that differs from the type's node count.
    """
    store = InMemoryFeatureStore(
        {
            Key(node_type, attr): value
            for node_type, attrs in features.items()
            for attr, value in attrs.items()
        },
        allow_nonfinite=allow_nonfinite,
    )
    if graph is not None:
        check_typed_features(store, graph)
    return store


def check_typed_features(
    store: FeatureStore, graph: TypedGraph, attrs: Iterable[str] = ()
) -> None:
    """Raise unless every node-type group of ``store`` fits ``graph``.

    Every tensor whose group is a node type must have ``num_nodes[type]`` rows;
    every attribute in ``attrs`` must exist for every node type. Groups that are
    no node type (``"edge"``, a relation's name) are not checked.

    Raises:
        FeatureError: listing every mismatch at once.
    """
    where = "check_typed_features"
    schema = store.schema()
    problems = [
        f"{key} has {entry.num_rows} rows, num_nodes[{key.group!r}] is "
        f"{graph.num_nodes[key.group]}"
        for key, entry in schema.items()
        if key.group in graph.num_nodes and entry.num_rows != graph.num_nodes[key.group]
    ]
    problems += [
        f"{Key(node_type, attr)} is missing"
        for attr in attrs
        for node_type in graph.node_types
        if Key(node_type, attr) not in schema
    ]
    if problems:
        raise FeatureError.build(
            "typed features",
            where,
            "one row per node of the group's type",
            "; ".join(problems),
            "store node type T's features under Key(T, attr), row i = node i of T",
        )


def gather_typed(
    store: FeatureStore, ids: Mapping[str, IdsLike], attr: str = "x"
) -> dict[str, torch.Tensor]:
    """Rows ``ids[type]`` of ``Key(type, attr)`` for every type in ``ids``.

    Raises:
        FeatureError: on an unknown key or out-of-range ids.
    """
    return {
        node_type: store.get(Key(node_type, attr), i) for node_type, i in ids.items()
    }
