"""Feature stores: tensors keyed by (group, attr), gathered by row id.

* :class:`FeatureStore`: the interface (validating public methods, private hooks).
* :class:`InMemoryFeatureStore`: dict-backed reference backend.
* :class:`ArrowFeatureStore`: columns of a dataset directory, memory-mapped.
* :func:`gather_rows` / :func:`validate_ids`: the parallel gather kernel and id checks.
* Partitioned over the network: :class:`FeatureServer` (one partition's rows on a
  pyzmq socket), :class:`FeatureServerGroup` (one server process per partition,
  rows in shared memory), :class:`RemoteFeatureStore` (the client),
  :class:`NetworkModel` (a simulated link), :class:`Traffic` counters.
"""

from strata.storage.features.arrow import ArrowFeatureStore
from strata.storage.features.gather import alloc_rows, gather_rows, validate_ids
from strata.storage.features.memory import InMemoryFeatureStore
from strata.storage.features.network import NetworkModel
from strata.storage.features.remote import FeatureServerTimeout, RemoteFeatureStore
from strata.storage.features.server import FeatureServer
from strata.storage.features.server_group import FeatureServerGroup
from strata.storage.features.store import FeatureSchema, FeatureStore, Key
from strata.storage.features.traffic import InProcessOwners, OwnerFetcher, Traffic
from strata.storage.features.wire import FrameError

__all__ = [
    "ArrowFeatureStore",
    "FeatureSchema",
    "FeatureServer",
    "FeatureServerGroup",
    "FeatureServerTimeout",
    "FeatureStore",
    "FrameError",
    "InMemoryFeatureStore",
    "InProcessOwners",
    "Key",
    "NetworkModel",
    "OwnerFetcher",
    "RemoteFeatureStore",
    "Traffic",
    "alloc_rows",
    "gather_rows",
    "validate_ids",
]
