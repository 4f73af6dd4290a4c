"""Feature stores: tensors keyed by (group, attr), gathered by row id.

* :class:`FeatureStore`: the interface (validating public methods, private hooks).
* :class:`InMemoryFeatureStore`: dict-backed reference backend.
* :class:`ArrowFeatureStore`: columns of a dataset directory, memory-mapped.
* :func:`gather_rows` / :func:`validate_ids`: the parallel gather kernel and id checks.
"""

from strata.storage.features.arrow import ArrowFeatureStore
from strata.storage.features.gather import alloc_rows, gather_rows, validate_ids
from strata.storage.features.memory import InMemoryFeatureStore
from strata.storage.features.store import FeatureSchema, FeatureStore, Key

__all__ = [
    "ArrowFeatureStore",
    "FeatureSchema",
    "FeatureStore",
    "InMemoryFeatureStore",
    "Key",
    "alloc_rows",
    "gather_rows",
    "validate_ids",
]
