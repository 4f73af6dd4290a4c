"""Per-configuration figures of a run (spec ``systems/geolayer.md`` §4), JSON-ready.

Spec §4 reports, for every configuration: read latency p50/p95/p99 (overall and per
origin), the SLO violation rate, mean regions contacted, WAN bytes per request,
storage bytes and the cost terms per 1-hour window. The job's report
(:mod:`strata.operators.io.geo_report`) and the twin harness
(``benchmarks/storage/geo/twin_acceptance.py``) both compute them here. Values are
rounded (4 digits for latencies, 6 for rates); ``None`` marks an empty selection.

Examples:
    >>> percentiles(np.array([1.0, 2.0, 3.0, 4.0]))
    {'mean': 2.5, 'p50': 2.5, 'p95': 3.85, 'p99': 3.97}
    >>> per_origin(np.array([1.0, 3.0]), np.array([1, 1]), ["USE", "LON"])["LON"]["p50"]
    2.0
    >>> rate(np.array([True, False, False, False])), rate(np.array([], dtype=bool))
    (0.25, None)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from strata.storage.geo.cost import CostBreakdown
from strata.storage.geo.twin import TwinResult

__all__ = [
    "cost_figures",
    "figures",
    "mean",
    "per_origin",
    "percentiles",
    "rate",
    "run_arrays",
    "twin_figures",
]


def percentiles(latency_ms: np.ndarray) -> dict[str, float | None]:
    """Mean, p50, p95 and p99 of the finite ``latency_ms`` (None when there are none).

    A NaN is a request the servers did not answer; the A1 check counts those.
    """
    values = np.asarray(latency_ms, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return dict.fromkeys(("mean", "p50", "p95", "p99"), None)
    p50, p95, p99 = np.percentile(values, [50, 95, 99])
    return {
        "mean": round(float(values.mean()), 4),
        "p50": round(float(p50), 4),
        "p95": round(float(p95), 4),
        "p99": round(float(p99), 4),
    }


def per_origin(
    latency_ms: np.ndarray, origin: np.ndarray, regions: Sequence[str]
) -> dict[str, dict[str, float | None]]:
    """:func:`percentiles` of each origin region's requests (regions with any)."""
    return {
        name: percentiles(latency_ms[origin == r])
        for r, name in enumerate(regions)
        if np.any(origin == r)
    }


def rate(flags: np.ndarray) -> float | None:
    """The fraction of true ``flags`` (None when there are none)."""
    return round(float(np.mean(flags)), 6) if flags.size else None


def mean(values: np.ndarray) -> float | None:
    """The mean of ``values`` (None when there are none)."""
    return round(float(np.mean(values)), 4) if values.size else None


def cost_figures(cost: CostBreakdown) -> dict[str, float]:
    """The cost terms per window, the total and the pure-dollar sum, by name."""
    return {
        "storage_usd": cost.storage_usd,
        "read_usd": cost.read_usd,
        "write_usd": cost.write_usd,
        "assoc_units": cost.assoc_units,
        "assoc_usd": cost.assoc_usd,
        "dollars_usd": cost.dollars_usd,
        "total_usd": cost.total_usd,
    }


def run_arrays(result: TwinResult) -> dict[str, Any]:
    """A run's per-request and per-region outcomes, as :func:`figures` reads them.

    Plain arrays and a cost dict (:func:`cost_figures`): wire-encodable, so a job
    step can send them on.
    """
    return {
        "latency_ms": result.latency_ms,
        "regions_contacted": result.regions_contacted,
        "wan_bytes": result.wan_bytes,
        "local_only": result.local_only,
        "served_by": result.served_items,
        "storage_bytes": result.storage_bytes,
        "cost": cost_figures(result.cost),
    }


def figures(
    run: Mapping[str, Any],
    *,
    is_write: np.ndarray,
    origin: np.ndarray,
    slo_ms: np.ndarray,
    regions: Sequence[str],
    seen: np.ndarray | None = None,
) -> dict[str, Any]:
    """Spec §4's figures of one configuration's run (:func:`run_arrays`'s keys).

    ``is_write``, ``origin`` and ``slo_ms`` describe the requests. Latency, SLO,
    regions and locality figures are over reads (writes: ``write_ms``); WAN bytes
    are over every request. ``seen`` (reads whose source the history read) adds
    ``slo_violation_rate_seen`` (A5).
    """
    latency = np.asarray(run["latency_ms"], dtype=np.float64)
    reads = ~np.asarray(is_write, dtype=bool)
    violated = latency > slo_ms
    out: dict[str, Any] = {
        "read_ms": percentiles(latency[reads]),
        "read_ms_per_origin": per_origin(latency[reads], origin[reads], regions),
        "write_ms": percentiles(latency[~reads]),
        "slo_violation_rate": rate(violated[reads]),
    }
    if seen is not None:
        out["slo_violation_rate_seen"] = rate(violated[reads & seen])
    storage = np.asarray(run["storage_bytes"], dtype=np.float64)
    out.update(
        {
            "regions_contacted_mean": mean(np.asarray(run["regions_contacted"])[reads]),
            "wan_bytes_per_request": mean(np.asarray(run["wan_bytes"])),
            "local_only_fraction": rate(np.asarray(run["local_only"])[reads]),
            "storage_bytes": float(storage.sum()),
            "storage_bytes_per_region": [float(b) for b in storage],
            "cost_per_hour": {k: float(v) for k, v in run["cost"].items()},
            "served_by": np.asarray(run["served_by"]).astype(int).tolist(),
        }
    )
    return out


def twin_figures(
    result: TwinResult, regions: Sequence[str], seen: np.ndarray | None = None
) -> dict[str, Any]:
    """:func:`figures` of a :func:`~strata.storage.geo.twin.simulate` result."""
    return figures(
        run_arrays(result),
        is_write=result.is_write,
        origin=result.origin,
        slo_ms=result.slo_ms,
        regions=regions,
        seen=seen,
    )
