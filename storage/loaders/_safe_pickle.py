"""A restricted unpickler for the Planetoid raw files, which needs no scipy.

The Planetoid files are Python 2 pickles of scipy sparse matrices, numpy arrays and a
``defaultdict`` of lists. Unpickling runs arbitrary callables named in the file, so a
plain ``pickle.load`` on a downloaded file is a code-execution hole. This unpickler
resolves only the handful of globals those files use; scipy's sparse classes resolve
to a stand-in that keeps the pickled state, which :func:`sparse_to_dense` turns into
a dense array, so scipy is not needed at runtime either.
"""

from __future__ import annotations

import collections
import importlib
import io
import pickle
from typing import Any

import numpy as np

from strata.storage.errors import FormatError

_SPARSE_NAMES = {"csr_matrix", "csc_matrix"}
_SPARSE_MODULES = {
    "scipy.sparse",
    "scipy.sparse.csr",
    "scipy.sparse._csr",
    "scipy.sparse.csc",
    "scipy.sparse._csc",
}


class SparseState:
    """Stand-in for a pickled scipy CSR/CSC matrix: only its state is kept."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.state: dict[str, Any] = {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.state = dict(state)


def _sparse_class(kind: str) -> type[SparseState]:
    class _Sparse(SparseState):
        # NEWOBJ calls cls.__new__(cls) without __init__; set the kind here.
        def __new__(cls) -> _Sparse:
            obj = object.__new__(cls)
            SparseState.__init__(obj, kind)
            return obj

        def __init__(self) -> None:
            pass

    return _Sparse


def _numpy_reconstruct() -> Any:
    # numpy 2 moved numpy.core to numpy._core; 1.26 has only a stub _core.
    for name in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            return importlib.import_module(name)._reconstruct
        except (ImportError, AttributeError):
            continue
    raise ImportError("numpy's array unpickling helper was not found")


def _latin1_encode(text: str, encoding: str = "utf-8") -> bytes:
    """``_codecs.encode`` as protocol-2 pickles use it for bytes: latin-1 only."""
    if encoding not in ("latin1", "latin-1") or not isinstance(text, str):
        raise pickle.UnpicklingError(f"codec {encoding!r} is not allowed")
    return text.encode("latin1")


_ALLOWED: dict[tuple[str, str], Any] = {
    # Python 3 writes bytes in protocol-2 pickles as _codecs.encode(str, "latin1").
    ("_codecs", "encode"): _latin1_encode,
    ("collections", "defaultdict"): collections.defaultdict,
    ("__builtin__", "list"): list,
    ("builtins", "list"): list,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("numpy.core.multiarray", "_reconstruct"): _numpy_reconstruct(),
    ("numpy._core.multiarray", "_reconstruct"): _numpy_reconstruct(),
}


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickler that resolves only the globals the Planetoid files need."""

    def __init__(self, data: bytes, source: str) -> None:
        super().__init__(io.BytesIO(data), encoding="latin1")
        self._source = source

    def find_class(self, module: str, name: str) -> Any:
        """Return an allowed global, or raise :class:`FormatError`."""
        if module in _SPARSE_MODULES and name in _SPARSE_NAMES:
            return _sparse_class(name[:3])
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise FormatError.build(
                "pickle global",
                self._source,
                "one of numpy arrays, scipy CSR/CSC matrices, defaultdict, list",
                f"{module}.{name}",
                "the file is not a Planetoid raw file, or it was tampered with",
            ) from None


def load_restricted(data: bytes, source: str) -> Any:
    """Unpickle ``data`` with :class:`RestrictedUnpickler`; errors name ``source``."""
    try:
        out = RestrictedUnpickler(data, source).load()
    except FormatError:
        raise
    except Exception as err:  # pickle raises many types on corrupt input
        raise FormatError.build(
            "pickle", source, "a readable pickle", f"{type(err).__name__}: {err}"
        ) from err
    if isinstance(out, np.ndarray) and out.dtype.hasobject:
        raise FormatError.build("array", source, "a numeric array", "an object array")
    return out


def sparse_to_dense(matrix: SparseState | np.ndarray, source: str) -> np.ndarray:
    """Densify a pickled CSR/CSC state (duplicates summed, as scipy does)."""
    if isinstance(matrix, np.ndarray):
        return matrix
    if not isinstance(matrix, SparseState):
        raise FormatError.build(
            "matrix", source, "a sparse matrix or array", type(matrix).__name__
        )
    state = matrix.state
    try:
        raw_shape = state["_shape"] if "_shape" in state else state["shape"]
        shape = tuple(int(v) for v in raw_shape)
        indptr = np.asarray(state["indptr"], dtype=np.int64)
        indices = np.asarray(state["indices"], dtype=np.int64)
        data = np.asarray(state["data"])
    except (KeyError, TypeError, ValueError) as err:
        raise FormatError.build(
            "sparse matrix state", source, "indptr, indices, data and shape", str(err)
        ) from err
    major, minor = shape if matrix.kind == "csr" else shape[::-1]
    if indptr.shape != (major + 1,) or indices.shape != data.shape[:1]:
        raise FormatError.build(
            "sparse matrix state",
            source,
            f"indptr of length {major + 1} and one index per value",
            f"{indptr.shape[0]} and {indices.shape[0]} vs {data.shape[0]}",
        )
    if indices.size and (indices.min() < 0 or indices.max() >= minor):
        raise FormatError.build(
            "sparse matrix indices", source, f"indices in [0, {minor})", "out of range"
        )
    dense = np.zeros((major, minor), dtype=data.dtype)
    rows = np.repeat(np.arange(major), np.diff(indptr))
    np.add.at(dense, (rows, indices), data)
    return dense if matrix.kind == "csr" else dense.T.copy()
