"""PyG's ``FeatureStore`` / ``GraphStore`` over Strata stores.

PyG loaders and models accept a ``(feature_store, graph_store)`` pair; these adapters
let them read a Strata :class:`~strata.storage.features.FeatureStore` (in memory or
Arrow, memory-mapped) and a :class:`CSRGraph` without copying everything into a
``Data``.

* Tensors are addressed by PyG's ``TensorAttr(group_name, attr_name, index)``; a
  ``group_name`` of ``None`` (homogeneous graphs) means Strata's ``"node"`` group.
  Gets with an index gather rows through the store's parallel kernel; puts replace
  whole tensors (partial puts and removal are not supported, and return False).
* The graph store is read-only and serves ``COO``, ``CSR`` and ``CSC`` layouts.

Examples:
    >>> import numpy as np, torch
    >>> from strata.storage.csr import CSRGraph
    >>> from strata.storage.features import InMemoryFeatureStore
    >>> g = CSRGraph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]))
    >>> fs, gs = to_pyg_stores(
    ...     InMemoryFeatureStore({("node", "x"): torch.eye(3)}), g)
    >>> fs.get_tensor(group_name=None, attr_name="x", index=torch.tensor([2])).tolist()
    [[0.0, 0.0, 1.0]]
    >>> rowptr, col = gs.get_edge_index(edge_type=None, layout="csr")
    >>> rowptr.tolist(), col.tolist()
    ([0, 1, 2, 3], [1, 2, 0])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from strata.storage.csr import CSRGraph, as_tensor
from strata.storage.features.store import FeatureStore, Key
from strata.storage.interop._guard import require

_HINT = "pip install torch-geometric (or strata-gnn[pyg])"
_CLASSES: dict[str, Any] = {}


def _key(attr: Any) -> Key:
    return Key(
        "node" if attr.group_name is None else str(attr.group_name), attr.attr_name
    )


def _ids(index: Any, rows: int) -> Any:
    if isinstance(index, slice):
        return torch.arange(rows)[index]
    if isinstance(index, int):
        return torch.tensor([index])
    return index


def _classes() -> tuple[Any, Any]:
    """Define the adapter classes on first use (PyG is imported only then)."""
    if not _CLASSES:
        data = require("torch_geometric.data", "to_pyg_stores", _HINT)

        class StrataFeatureStore(data.FeatureStore):  # type: ignore[misc, name-defined]
            """PyG ``FeatureStore`` reading a Strata feature store."""

            def __init__(self, store: FeatureStore) -> None:
                super().__init__()
                self.__dict__["store"] = store

            def _put_tensor(self, tensor: Any, attr: Any) -> bool:
                if attr.index is not None:
                    return False
                self.store.put(_key(attr), tensor)
                return True

            def _get_tensor(self, attr: Any) -> Any:
                key = _key(attr)
                if key not in self.store:
                    return None
                if attr.index is None:
                    return self.store.get(key)
                rows = self.store.schema()[key].num_rows
                return self.store.get(key, _ids(attr.index, rows))

            def _remove_tensor(self, attr: Any) -> bool:
                return False

            def _get_tensor_size(self, attr: Any) -> Any:
                schema = self.store.schema().get(_key(attr))
                return None if schema is None else schema.shape

            def get_all_tensor_attrs(self) -> list[Any]:
                keys = self.store.schema()
                return [data.TensorAttr(k.group, k.attr) for k in keys]

        class StrataGraphStore(data.GraphStore):  # type: ignore[misc, name-defined]
            """Read-only PyG ``GraphStore`` over a :class:`CSRGraph`."""

            def __init__(self, graph: CSRGraph, edge_type: Any = None) -> None:
                super().__init__()
                self.__dict__["graph"] = graph
                self.__dict__["edge_type"] = edge_type

            def _put_edge_index(self, edge_index: Any, edge_attr: Any) -> bool:
                return False

            def _remove_edge_index(self, edge_attr: Any) -> bool:
                return False

            def _get_edge_index(self, edge_attr: Any) -> Any:
                if edge_attr.edge_type != self.edge_type:
                    return None
                layout = str(edge_attr.layout.value)
                graph = self.graph.csc() if layout == "csc" else self.graph
                if layout in ("csr", "csc"):
                    return (
                        as_tensor(graph.indptr),
                        as_tensor(graph.indices).to(torch.int64),
                    )
                if edge_attr.is_sorted:  # COO sorted by destination: CSC order
                    csc = self.graph.csc()
                    dst, src = csc.to_coo()
                    return torch.from_numpy(src.astype(np.int64)), torch.from_numpy(dst)
                src, dst = self.graph.to_coo()
                return torch.from_numpy(src), as_tensor(dst).to(torch.int64)

            def get_all_edge_attrs(self) -> list[Any]:
                size = (self.graph.num_nodes, self.graph.num_nodes)
                return [
                    data.EdgeAttr(self.edge_type, layout, size=size)
                    for layout in ("coo", "csr", "csc")
                ]

        _CLASSES["feature"] = StrataFeatureStore
        _CLASSES["graph"] = StrataGraphStore
    return _CLASSES["feature"], _CLASSES["graph"]


def to_pyg_stores(
    features: FeatureStore, graph: CSRGraph, *, edge_type: Any = None
) -> tuple[Any, Any]:
    """Wrap a Strata feature store and graph as PyG's ``(FeatureStore, GraphStore)``.

    Args:
        features: any Strata feature store (tensors stay where they are).
        graph: the graph (out-adjacency CSR).
        edge_type: the PyG edge type to answer for (``None`` for homogeneous).

    Returns:
        ``(feature_store, graph_store)`` instances of PyG's base classes.
    """
    feature_cls, graph_cls = _classes()
    return feature_cls(features), graph_cls(graph, edge_type)
