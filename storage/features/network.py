"""A simulated network link: each reply waits ``latency + bytes / bandwidth``.

One machine then behaves like a cluster in tests and benchmarks: a
:class:`~strata.storage.features.server.FeatureServer` holds every reply back by
:meth:`NetworkModel.delay` of its counted bytes (ids out plus rows back, the
``payload_bytes`` rule of :mod:`~strata.storage.features.traffic`). Replies are
held in a queue, not by blocking the server, so concurrent requests overlap their
latencies as on a real link. Each reply is delayed on its own: the model has no
contention, so many concurrent replies share no bandwidth.

Examples:
    >>> link = NetworkModel(latency_s=0.001, bandwidth_Bps=1e9)
    >>> round(link.delay(1_000_000), 6)
    0.002
    >>> NetworkModel().delay(10**9)
    0.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from strata.storage.errors import FeatureError

__all__ = ["NetworkModel"]


@dataclass(frozen=True, slots=True)
class NetworkModel:
    """Latency (seconds) and bandwidth (bytes per second) of one simulated link.

    Args:
        latency_s: fixed delay of every reply, >= 0.
        bandwidth_Bps: bytes per second, > 0; ``inf`` (default) adds no delay.
    """

    latency_s: float = 0.0
    bandwidth_Bps: float = math.inf  # bytes, not bits

    def __post_init__(self) -> None:
        if not (self.latency_s >= 0 and math.isfinite(self.latency_s)):
            raise FeatureError.build(
                "latency_s",
                "NetworkModel",
                "a finite number >= 0",
                repr(self.latency_s),
            )
        if not self.bandwidth_Bps > 0:
            raise FeatureError.build(
                "bandwidth_Bps",
                "NetworkModel",
                "a number > 0",
                repr(self.bandwidth_Bps),
            )

    def delay(self, nbytes: int) -> float:
        """Seconds a reply moving ``nbytes`` waits."""
        return self.latency_s + nbytes / self.bandwidth_Bps
