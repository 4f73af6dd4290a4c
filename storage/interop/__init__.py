"""Converters to and from scipy.sparse, networkx, PyG and DGL.

:func:`to_pyg_stores` wraps a Strata feature store and graph as PyG's
``(FeatureStore, GraphStore)`` pair. Each library is imported inside the function
that needs it, so all of them stay optional; a missing library is an ImportError
that says how to install it.
"""

from strata.storage.interop.dgl import from_dgl, to_dgl
from strata.storage.interop.networkx import (
    dataset_from_networkx,
    from_networkx,
    to_networkx,
)
from strata.storage.interop.pyg import from_pyg, to_pyg
from strata.storage.interop.pyg_store import to_pyg_stores
from strata.storage.interop.scipy import from_scipy, to_scipy

__all__ = [
    "dataset_from_networkx",
    "from_dgl",
    "from_networkx",
    "from_pyg",
    "from_scipy",
    "to_dgl",
    "to_networkx",
    "to_pyg",
    "to_pyg_stores",
    "to_scipy",
]
