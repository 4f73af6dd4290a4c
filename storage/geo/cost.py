"""The latency and dollar model of spec §2.1 (the paper's Eq. 1-6), vectorised.

Per request, region ``d`` serving ``bytes_d`` to origin ``o`` answers in
``RTT(o, d) + 8 * bytes_d / BW(o, d)``; the request's latency is the maximum over the
regions it contacts. Costs, all in US dollars:

* C(S) = bytes stored per region x storage price, for ``window_hours`` of a
  730-hour month (pitfall 5);
* C(R) = one GET per item read at its serving region, plus transfer of its bytes when
  the serving region is not the reader's;
* C(W) = one PUT at the writer's region, plus a PUT and a transfer per replica in
  another region (synchronous updates);
* C(A) = ``lambda1 * (regions - 1) + lambda2 * (max - min) / min`` latency per request,
  unitless in the paper; Strata weighs it by ``assoc_usd`` and reports it apart.

Examples:
    >>> import numpy as np
    >>> from strata.storage.geo.topology import table1
    >>> topo = table1()
    >>> b = np.zeros((1, 5)); b[0, 0] = 1200; b[0, 1] = 96_000
    >>> lat = region_latency_ms(topo, np.array([0]), b, b > 0)
    >>> np.round(lat, 3).tolist()  # local: 1 ms + 1200 B / 10 Gbps; USW: 69 + 8 ms
    [[1.001, 77.0, 0.0, 0.0, 0.0]]
    >>> request_latency_ms(lat).tolist()
    [77.0]
    >>> round(float(assoc_units(lat, b > 0)[0]), 2)  # 0.5 + 0.5 * (77 - 1.001) / 1.001
    38.46
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from strata.storage.geo.items import ItemSpace, Placement, popcount32
from strata.storage.geo.topology import Prices, Topology

__all__ = [
    "HOURS_PER_MONTH",
    "CostBreakdown",
    "CostConfig",
    "assoc_units",
    "read_cost_usd",
    "region_latency_ms",
    "request_latency_ms",
    "storage_cost_usd",
    "write_cost_usd",
]

#: Storage is priced per month; requests per window (pitfall 5).
HOURS_PER_MONTH = 730.0
_GB = 1e9


@dataclass(frozen=True, slots=True)
class CostConfig:
    """Weights of the association penalty and the billing window."""

    lambda1: float = 0.5
    lambda2: float = 0.5
    assoc_usd: float = 1e-6
    window_hours: float = 1.0


@dataclass(frozen=True, slots=True)
class CostBreakdown:
    """C(S), C(R), C(W) in dollars and C(A) in penalty units (dollars = x assoc_usd)."""

    storage_usd: float
    read_usd: float
    write_usd: float
    assoc_units: float
    assoc_usd: float

    @property
    def dollars_usd(self) -> float:
        """The pure-dollar sum C(S) + C(R) + C(W)."""
        return self.storage_usd + self.read_usd + self.write_usd

    @property
    def total_usd(self) -> float:
        """C(S) + C(R) + C(W) + assoc_usd * C(A)."""
        return self.dollars_usd + self.assoc_usd

    def scaled(self, factor: float) -> CostBreakdown:
        """Request terms (R, W, A) times ``factor``; storage unchanged."""
        return CostBreakdown(
            self.storage_usd,
            self.read_usd * factor,
            self.write_usd * factor,
            self.assoc_units * factor,
            self.assoc_usd * factor,
        )


def region_latency_ms(
    topology: Topology,
    origin: np.ndarray,
    served_bytes: np.ndarray,
    contacted: np.ndarray,
) -> np.ndarray:
    """(n, R) per-region answer time ``RTT + 8 * bytes / BW`` (0 if not contacted)."""
    o = np.asarray(origin, dtype=np.int64)
    rtt = topology.rtt_ms[o]
    bw = topology.bw_mbps[o]
    lat = rtt + 8.0 * np.asarray(served_bytes, dtype=np.float64) / (bw * 1e3)
    return np.where(contacted, lat, 0.0)


def request_latency_ms(region_lat: np.ndarray) -> np.ndarray:
    """Per request: the maximum over contacted regions (one parallel round)."""
    return np.asarray(region_lat.max(axis=1), dtype=np.float64)


def assoc_units(
    region_lat: np.ndarray, contacted: np.ndarray, config: CostConfig | None = None
) -> np.ndarray:
    """Per request ``lambda1 * (k - 1) + lambda2 * (max - min) / min``."""
    cfg = config or CostConfig()
    k = contacted.sum(axis=1)
    hi = np.where(contacted, region_lat, -np.inf).max(axis=1, initial=-np.inf)
    lo = np.where(contacted, region_lat, np.inf).min(axis=1, initial=np.inf)
    spread = np.where(k > 0, (hi - lo) / np.where(k > 0, lo, 1.0), 0.0)
    return np.where(k > 0, cfg.lambda1 * (k - 1) + cfg.lambda2 * spread, 0.0)


def storage_cost_usd(
    placement: Placement, space: ItemSpace, topology: Topology, hours: float = 1.0
) -> float:
    """C(S): stored bytes x storage price for ``hours`` of a 730-hour month."""
    total = float(placement.storage_bytes(space, topology.num_regions).sum())
    return total / _GB * topology.prices.storage_usd_gb_month * hours / HOURS_PER_MONTH


def read_cost_usd(
    origin: np.ndarray,
    served_items: np.ndarray,
    served_bytes: np.ndarray,
    prices: Prices,
) -> np.ndarray:
    """C(R) per request from (n, R) items and bytes served per region."""
    r = served_items.shape[1]
    remote = np.arange(r)[None, :] != np.asarray(origin)[:, None]
    gets = served_items.sum(axis=1) * prices.get_usd_per_million / 1e6
    transfer = (served_bytes * remote).sum(axis=1) / _GB * prices.transfer_usd_per_gb
    return np.asarray(gets + transfer, dtype=np.float64)


def write_cost_usd(
    origin: int,
    items: np.ndarray,
    placement: Placement,
    space: ItemSpace,
    prices: Prices,
) -> float:
    """C(W) of one write of ``items`` from ``origin``.

    A PUT at the writer's region, plus a PUT and a transfer per replica elsewhere.
    """
    ids = np.asarray(items, dtype=np.int64)
    h = placement.holders[ids]
    others = popcount32(h & ~np.uint32(1 << origin))
    puts = ids.shape[0] + int(others.sum())
    moved = float((others * space.item_bytes[ids]).sum())
    put_usd = puts * prices.put_usd_per_million / 1e6
    return float(put_usd + moved / _GB * prices.transfer_usd_per_gb)
