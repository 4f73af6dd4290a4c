"""Converters to and from scipy.sparse, networkx, PyG and DGL.

Each library is imported inside the function that needs it, so all of them stay
optional; a missing library is an ImportError that says how to install it.
"""

from storage.interop.dgl import from_dgl, to_dgl
from storage.interop.networkx import from_networkx, to_networkx
from storage.interop.pyg import from_pyg, to_pyg
from storage.interop.scipy import from_scipy, to_scipy

__all__ = [
    "from_dgl",
    "from_networkx",
    "from_pyg",
    "from_scipy",
    "to_dgl",
    "to_networkx",
    "to_pyg",
    "to_scipy",
]
