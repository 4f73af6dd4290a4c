"""The report of ``jobs/geo_bench.py``: per-configuration figures, A1, the table.

Plain arrays in, JSON-ready dicts out. :func:`summarize` is the job's ``summary``
step over the outputs of :mod:`strata.operators.io.geo_bench`'s steps. Latencies are
unscaled milliseconds (the modelled WAN); the servers' are measured in wall time and
divided by the time scale ``s``.

A1 (spec §3.5, §4; :func:`a1_agreement`): on the same requests with the same
arrivals, the servers' p50 and p99 within 10% of the twin's and every request within
``max(10%, 3 ms)``, the 3 ms being wall-clock time (``3 / s`` unscaled), the floor of
what Python's own overhead may add.

Examples:
    >>> percentiles(np.array([1.0, 2.0, 3.0, 4.0]))
    {'mean': 2.5, 'p50': 2.5, 'p95': 3.85, 'p99': 3.97}
    >>> cdf_points(np.array([5.0, 1.0]))[:3]
    [1.0, 1.04, 1.08]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from strata.operators.errors import OperatorError
from strata.operators.io.geo_bench import configurations, topology_of
from strata.storage.geo.summary import figures, mean, per_origin, percentiles
from strata.storage.geo.workload import GeoWorkloadConfig, Requests

__all__ = [
    "A1_FLOOR_MS",
    "A1_RELATIVE",
    "CDF_POINTS",
    "a1_agreement",
    "cdf_points",
    "per_origin",
    "percentiles",
    "render_outputs",
    "summarize",
]

#: Points of each configuration's latency CDF in the outputs (quantiles 0..1).
CDF_POINTS = 101
#: A1's per-request tolerance floor, in wall-clock milliseconds (spec §3.5).
A1_FLOOR_MS = 3.0
A1_RELATIVE = 0.10


def cdf_points(latency_ms: np.ndarray) -> list[float]:
    """:data:`CDF_POINTS` quantiles of ``latency_ms``, ascending (for the plot)."""
    if latency_ms.size == 0:
        return []
    points = np.quantile(latency_ms, np.linspace(0.0, 1.0, CDF_POINTS))
    return [round(float(v), 4) for v in np.maximum.accumulate(points)]


def a1_agreement(
    twin_ms: np.ndarray, server_ms: np.ndarray, time_scale: float
) -> dict[str, Any]:
    """Spec §3.5 / A1: servers against the twin on the same requests (unscaled ms).

    ``met`` needs the servers' p50 and p99 within 10% of the twin's and every request
    within ``max(10%, 3 ms)``, the 3 ms being wall-clock time (``3 / time_scale``
    unscaled). ``within`` is the fraction of requests inside that tolerance; a
    request the servers did not answer (NaN) is outside it and counted in ``failed``.

    Examples:
        >>> twin = np.array([100.0, 200.0, 300.0])
        >>> a = a1_agreement(twin, twin * 1.05, time_scale=0.2)
        >>> a["p50_ratio"], a["within"], a["met"]
        (1.05, 1.0, True)
        >>> a1_agreement(twin, twin + [0, 0, 40], time_scale=0.2)["met"]
        False
    """
    twin = np.asarray(twin_ms, dtype=np.float64)
    server = np.asarray(server_ms, dtype=np.float64)
    if twin.shape != server.shape or twin.size == 0:
        raise OperatorError.build(
            "latencies",
            "a1_agreement",
            "two non-empty arrays of the same shape",
            f"{twin.shape} and {server.shape}",
        )
    floor = A1_FLOOR_MS / time_scale
    tolerance = np.maximum(A1_RELATIVE * twin, floor)
    answered = np.isfinite(server)
    if not answered.any():
        raise OperatorError.build(
            "server latencies", "a1_agreement", "some answered requests", "none"
        )
    error = np.where(answered, np.abs(server - twin), np.inf)
    t50, t99 = np.percentile(twin, [50, 99])
    s50, s99 = np.percentile(server[answered], [50, 99])
    p50_ratio, p99_ratio = float(s50 / t50), float(s99 / t99)
    within = float(np.mean(error <= tolerance))
    ratios_ok = all(abs(r - 1.0) <= A1_RELATIVE for r in (p50_ratio, p99_ratio))
    return {
        "requests": int(twin.size),
        "twin_p50": round(float(t50), 4),
        "twin_p99": round(float(t99), 4),
        "server_p50": round(float(s50), 4),
        "server_p99": round(float(s99), 4),
        "p50_ratio": round(p50_ratio, 4),
        "p99_ratio": round(p99_ratio, 4),
        "within": round(within, 6),
        # absolute gaps: at ~1 ms (local reads) 10% is below any harness's noise
        "p50_gap_ms": round(float(s50 - t50), 4),
        "p99_gap_ms": round(float(s99 - t99), 4),
        "failed": int(np.count_nonzero(~answered)),
        "max_error_ms": round(float(error[answered].max()), 4),
        "tolerance_floor_ms": round(floor, 4),
        "met": bool(ratios_ok and within == 1.0),
    }


# -- the summary step ----------------------------------------------------------------


def summarize(
    workload_payload: Mapping[str, Any],
    placements: Mapping[str, Mapping[str, Any]],
    twin: Mapping[str, Mapping[str, Any]],
    servers: Mapping[str, Mapping[str, Any]],
    *,
    workload: GeoWorkloadConfig,
    configs: Sequence[str],
    semantics: str,
    time_scale: float,
) -> dict[str, Any]:
    """The ``summary`` step: the run's outputs, per configuration (JSON-ready)."""
    topology = topology_of(str(workload_payload["topology"]))
    regions = list(topology.regions)
    test = Requests(**workload_payload["test"])
    history = Requests(**workload_payload["history"])
    reads = ~test.is_write
    seen = np.isin(test.source, history.source[~history.is_write])
    rows: dict[str, Any] = {}
    for config in configurations(configs):
        t = twin[config.name]
        latency = np.asarray(t["latency_ms"])
        row: dict[str, Any] = {
            "placement": config.placement,
            "router": config.router,
            "placement_s": round(float(placements[config.placement]["placement_s"]), 4),
            **figures(
                t,
                is_write=test.is_write,
                origin=test.origin,
                slo_ms=test.slo_ms,
                regions=regions,
                seen=seen,
            ),
            "cdf_ms": cdf_points(latency[reads]),
        }
        if config.name in servers:
            row["servers"] = _server_row(
                servers[config.name], t, test, regions, time_scale
            )
        rows[config.name] = row
    served = [row["servers"]["a1"]["met"] for row in rows.values() if "servers" in row]
    return {
        "seed": int(workload_payload["seed"]),
        "topology": str(workload_payload["topology"]),
        "regions": regions,
        "semantics": semantics,
        "time_scale": time_scale,
        "num_vertices": len(workload_payload["indptr"]) - 1,
        "num_edges": len(workload_payload["indices"]),
        "history_ops": history.num_requests,
        "test_ops": test.num_requests,
        "rate_per_s": round(float(workload_payload["rate_per_s"]), 4),
        "configs": rows,
        "a1_met": all(served) if served else None,
    }


def _server_row(
    replayed: Mapping[str, Any],
    twin: Mapping[str, Any],
    test: Requests,
    regions: Sequence[str],
    time_scale: float,
) -> dict[str, Any]:
    latency = np.asarray(replayed["latency_ms"], dtype=np.float64)
    n = latency.shape[0]
    reads = ~test.is_write[:n]
    origin = test.origin[:n]
    return {
        "requests": n,
        "read_ms": percentiles(latency[reads]),
        "read_ms_per_origin": per_origin(latency[reads], origin[reads], regions),
        "write_ms": percentiles(latency[~reads]),
        "regions_contacted_mean": mean(
            np.asarray(replayed["regions_contacted"])[reads]
        ),
        "a1": a1_agreement(np.asarray(twin["prefix_latency_ms"]), latency, time_scale),
    }


def render_outputs(outputs: Mapping[str, Any]) -> str:
    """One line per configuration: latency, SLO misses, regions, bytes, cost, A1."""
    lines = [
        f"geo_bench on {outputs['topology']} ({', '.join(outputs['regions'])}), seed "
        f"{outputs['seed']}: {outputs['num_vertices']:,} vertices, "
        f"{outputs['num_edges']:,} edges, {outputs['test_ops']:,} test requests "
        f"({outputs['semantics']} reads; ms unscaled)",
        f"  {'configuration':<17} {'mean':>7} {'p50':>7} {'p99':>7} {'SLO miss':>8} "
        f"{'regions':>7} {'WAN B/req':>9} {'local':>6} {'$/hour':>9} "
        f"{'server p50/p99':>15} {'A1':>4}",
    ]
    for name, row in outputs["configs"].items():
        read = row["read_ms"]
        server = row.get("servers")
        a1 = "-" if server is None else ("met" if server["a1"]["met"] else "NO")
        agreement = (
            "-"
            if server is None
            else f"{server['read_ms']['p50']:.0f}/{server['read_ms']['p99']:.0f}"
        )
        lines.append(
            f"  {name:<17} {_ms(read['mean'])} {_ms(read['p50'])} {_ms(read['p99'])} "
            f"{_pct(row['slo_violation_rate'])} "
            f"{row['regions_contacted_mean'] or 0:>7.2f} "
            f"{row['wan_bytes_per_request'] or 0:>9,.0f} "
            f"{_pct(row['local_only_fraction'], 6)} "
            f"{row['cost_per_hour']['total_usd']:>9.4f} {agreement:>15} {a1:>4}"
        )
    return "\n".join(lines)


def _ms(value: float | None) -> str:
    return f"{'-':>7}" if value is None else f"{value:>7.1f}"


def _pct(value: float | None, width: int = 8) -> str:
    return f"{'-':>{width}}" if value is None else f"{100 * value:>{width - 1}.1f}%"
