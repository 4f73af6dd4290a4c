"""The in-memory :class:`FeatureStore`: a dict of arrays, the reference backend.

``put`` keeps a reference to the given (C-contiguous) array or tensor memory, as
PyG's dict store does; copy before ``put`` if you will keep mutating it.

Examples:
    >>> import numpy as np
    >>> store = InMemoryFeatureStore({("node", "y"): np.array([5, 6, 7])})
    >>> store.get(("node", "y"), [2, 2, 0]).tolist()
    [7, 7, 5]
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from strata.storage.csr import as_tensor
from strata.storage.features.gather import gather_rows, torch_dtype_of
from strata.storage.features.store import FeatureSchema, FeatureStore, Key, KeyLike


class InMemoryFeatureStore(FeatureStore):
    """Feature tensors held in memory, gathered by a parallel numba kernel."""

    def __init__(
        self,
        tensors: Mapping[KeyLike, torch.Tensor | np.ndarray] | None = None,
        *,
        allow_nonfinite: bool = False,
    ) -> None:
        """Create a store, optionally filled with ``put`` of every item.

        Args:
            tensors: initial tensors by key.
            allow_nonfinite: accept NaN/inf in the initial tensors.
        """
        self._arrays: dict[Key, np.ndarray] = {}
        for key, value in (tensors or {}).items():
            self.put(key, value, allow_nonfinite=allow_nonfinite)

    def _schema(self) -> dict[Key, FeatureSchema]:
        return {
            k: FeatureSchema(torch_dtype_of(a.dtype), tuple(a.shape))
            for k, a in self._arrays.items()
        }

    def _get_all(self, key: Key) -> torch.Tensor:
        return as_tensor(self._arrays[key])

    def _gather(self, key: Key, ids: np.ndarray, out: torch.Tensor) -> torch.Tensor:
        return gather_rows(self._arrays[key], ids, out)

    def _put(self, key: Key, array: np.ndarray) -> None:
        self._arrays[key] = array

    def __repr__(self) -> str:
        return f"InMemoryFeatureStore({', '.join(str(k) for k in self.keys())})"
