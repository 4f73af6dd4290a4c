"""The WAN delay shim (spec §3.4): one FIFO per directed link, one rule with the twin.

Every region process (and every client) delays its *own* outbound sends. A send of
``n`` bytes at time ``now`` on the link to ``dst`` is scheduled by
:func:`link_schedule`::

    start = max(now, free[dst]); free[dst] = start + 8n/BW; deliver at free[dst] + RTT/2

with every delay multiplied by the time scale ``s``. A small request and its reply
therefore cost ``RTT + 8*reply_bytes/BW`` (spec §2.1), and transfers on one link queue
behind each other. The analytic twin (``twin.py``) calls the same pure function, so the
harness and the twin can only differ in transport, never in the rule (pitfall 7).

Units: times are seconds, RTT is milliseconds, bandwidth is Mbit/s (10^6 bit/s).

Examples:
    >>> # 1 MB on a 69 ms / 96 Mbps link, unscaled: 83.3 ms on the wire, then RTT/2.
    >>> free, at = link_schedule(0.0, 0.0, 1_000_000, 69.0, 96.0, 1.0)
    >>> round(free * 1e3, 2), round(at * 1e3, 2)
    (83.33, 117.83)
    >>> # A second send at t=0 queues behind the first (FIFO).
    >>> round(link_schedule(free, 0.0, 1_000_000, 69.0, 96.0, 1.0)[1] * 1e3, 2)
    201.17
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np

__all__ = ["DelayShim", "LinkMatrices", "link_schedule", "transfer_s"]


class LinkMatrices(Protocol):
    """What the shim reads from a ``Topology``: (R, R) RTT (ms), bandwidth (Mbit/s)."""

    @property
    def rtt_ms(self) -> np.ndarray:
        """Round-trip times in milliseconds, (R, R)."""
        ...

    @property
    def bw_mbps(self) -> np.ndarray:
        """Bandwidths in Mbit/s, (R, R)."""
        ...


def transfer_s(nbytes: int, bw_mbps: float, time_scale: float) -> float:
    """Seconds (scaled) that ``nbytes`` occupy a link of ``bw_mbps`` Mbit/s.

    >>> transfer_s(125_000, 1.0, 0.5)
    0.5
    """
    return time_scale * 8.0 * float(nbytes) / (bw_mbps * 1e6)


def link_schedule(
    free_at: float,
    now: float,
    nbytes: int,
    rtt_ms: float,
    bw_mbps: float,
    time_scale: float,
) -> tuple[float, float]:
    """The per-link FIFO rule: return ``(new_free_at, deliver_at)`` for one send.

    ``free_at`` is when the link's previous transfer leaves the wire (0.0 for an idle
    link); ``now`` is the send time. Pure, so the shim and the twin share it exactly.

    >>> link_schedule(0.0, 1.0, 0, 100.0, 10.0, 0.2)
    (1.0, 1.01)
    """
    start = now if now > free_at else free_at
    new_free = start + transfer_s(nbytes, bw_mbps, time_scale)
    return new_free, new_free + time_scale * rtt_ms / 2000.0


class DelayShim:
    """The FIFO state of every directed link one sender (``self_region``) sends on.

    ``rtt_ms`` and ``bw_mbps`` are the (R, R) matrices of a ``Topology`` (the
    diagonal carries the intra-region values). Not thread-safe: one sender thread
    owns a shim.

    Examples:
        >>> import numpy as np
        >>> rtt = np.array([[1.0, 100.0], [100.0, 1.0]])
        >>> bw = np.array([[10_000.0, 8.0], [8.0, 10_000.0]])
        >>> shim = DelayShim.from_matrices(rtt, bw, self_region=0, time_scale=1.0)
        >>> round(shim.schedule(1, 1_000_000, now=0.0), 3)    # 1 s on the wire + 50 ms
        1.05
        >>> round(shim.schedule(1, 0, now=0.5), 3)            # queues behind it
        1.05
    """

    def __init__(
        self,
        topology: LinkMatrices,
        self_region: int,
        time_scale: float = 0.2,
    ) -> None:
        rtt = np.asarray(topology.rtt_ms, dtype=np.float64)
        bw = np.asarray(topology.bw_mbps, dtype=np.float64)
        self._init(rtt, bw, self_region, time_scale)

    @classmethod
    def from_matrices(
        cls,
        rtt_ms: np.ndarray,
        bw_mbps: np.ndarray,
        self_region: int,
        time_scale: float = 0.2,
    ) -> DelayShim:
        """A shim from raw (R, R) RTT (ms) and bandwidth (Mbit/s) matrices."""
        shim = cls.__new__(cls)
        shim._init(
            np.asarray(rtt_ms, dtype=np.float64),
            np.asarray(bw_mbps, dtype=np.float64),
            self_region,
            time_scale,
        )
        return shim

    def _init(
        self, rtt: np.ndarray, bw: np.ndarray, self_region: int, time_scale: float
    ) -> None:
        if rtt.ndim != 2 or rtt.shape[0] != rtt.shape[1] or bw.shape != rtt.shape:
            raise ValueError(
                f"DelayShim: expected square rtt_ms and bw_mbps of one shape, "
                f"got {rtt.shape} and {bw.shape}"
            )
        regions = rtt.shape[0]
        if not 0 <= self_region < regions:
            raise ValueError(
                f"DelayShim: self_region {self_region} out of range, "
                f"expected 0..{regions - 1}"
            )
        if not (math.isfinite(time_scale) and time_scale >= 0.0):
            raise ValueError(
                f"DelayShim: time_scale must be finite and >= 0, got {time_scale}"
            )
        if np.any(bw[self_region] <= 0.0) or np.any(rtt[self_region] < 0.0):
            raise ValueError(
                f"DelayShim: region {self_region}'s links need bw > 0 and rtt >= 0"
            )
        self.self_region = int(self_region)
        self.time_scale = float(time_scale)
        self._rtt = [float(x) for x in rtt[self_region]]
        self._bw = [float(x) for x in bw[self_region]]
        self._free = [0.0] * regions

    @property
    def num_regions(self) -> int:
        """How many regions (links) this shim knows."""
        return len(self._free)

    def schedule(self, dst: int, nbytes: int, now: float) -> float:
        """Book ``nbytes`` sent at ``now`` to ``dst``; return the delivery time."""
        if not 0 <= dst < len(self._free):
            raise ValueError(
                f"DelayShim.schedule: destination region {dst} out of range, "
                f"expected 0..{len(self._free) - 1}"
            )
        self._free[dst], deliver_at = link_schedule(
            self._free[dst], now, nbytes, self._rtt[dst], self._bw[dst], self.time_scale
        )
        return deliver_at

    def reset(self) -> None:
        """Forget every link's queue (all links idle)."""
        self._free = [0.0] * len(self._free)
