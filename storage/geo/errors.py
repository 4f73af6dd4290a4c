"""The error class of the geo-distributed store, in the project's one error template.

Examples:
    >>> print(GeoError.build("rtt_ms", "Topology", "symmetric", "rtt[0,1]=69 != 70"))
    rtt_ms in Topology: expected symmetric, got rtt[0,1]=69 != 70.
"""

from __future__ import annotations

from strata.storage.errors import StorageError

__all__ = ["GeoError"]


class GeoError(StorageError):
    """Bad input to the geo store: topology, regions, sizes, placements, requests."""
