"""``strata plot`` for a ``jobs/geo_bench.py`` run report: latency CDFs and a read map.

The report's ``outputs`` (written by :func:`strata.operators.io.geo_bench.summarize`)
hold, per configuration, the quantiles of its request latencies (``cdf_ms``, read
requests on the twin, unscaled milliseconds) and an origin x serving-region matrix of
the items its reads fetched (``served_by``). The figure has three panels:

* left: one latency CDF per configuration, log-x, GeoLayer drawn thickest;
* middle and right: for GeoLayer and one baseline (Random-3 with random routing,
  or the first other configuration), the share of each origin region's read items
  served by each region, as a heatmap (rows sum to 1; the diagonal is local).

Examples:
    >>> outputs = {
    ...     "regions": ["A", "B"],
    ...     "configs": {
    ...         "geolayer": {"cdf_ms": [1.0, 2.0], "served_by": [[3, 1], [0, 4]]},
    ...     },
    ... }
    >>> is_geo_report({"steps": {}, "outputs": outputs})
    True
    >>> shares([[3, 1], [0, 4]]).tolist()
    [[0.75, 0.25], [0.0, 1.0]]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

#: The configuration drawn beside GeoLayer's map, in order of preference.
BASELINES = ("random3-random", "random3-nearest", "top3-random", "hash")
GEOLAYER = "geolayer"


def is_geo_report(data: Mapping[str, Any]) -> bool:
    """Whether ``data`` is a run report of ``jobs/geo_bench.py`` (has ``configs``)."""
    outputs = data.get("outputs")
    return isinstance(outputs, Mapping) and "configs" in outputs


def check_geo_report(data: Mapping[str, Any], where: str) -> None:
    """Raise a :class:`~strata.engine.errors.UsageError` naming what is malformed."""
    from strata.engine.errors import UsageError

    outputs = data["outputs"]
    regions = outputs.get("regions")
    configs = outputs.get("configs")
    if not isinstance(regions, list) or not regions:
        raise UsageError.build(
            "outputs.regions", where, "a non-empty list of region names", repr(regions)
        )
    if not isinstance(configs, Mapping) or not configs:
        raise UsageError.build(
            "outputs.configs",
            where,
            "a non-empty mapping of configuration -> results",
            repr(configs)[:80],
        )
    size = len(regions)
    for name, config in configs.items():
        subject = f"outputs.configs.{name}"
        cdf = config.get("cdf_ms") if isinstance(config, Mapping) else None
        if not _numbers(cdf) or not cdf or min(cdf) <= 0 or sorted(cdf) != list(cdf):
            raise UsageError.build(
                f"{subject}.cdf_ms",
                where,
                "a non-empty ascending list of positive latencies (ms)",
                repr(cdf)[:80],
            )
        matrix = config.get("served_by")
        rows_ok = isinstance(matrix, list) and len(matrix) == size
        if not rows_ok or not all(
            _numbers(row) and len(row) == size and min(row) >= 0 for row in matrix
        ):
            raise UsageError.build(
                f"{subject}.served_by",
                where,
                f"a {size} x {size} matrix of non-negative counts "
                "(origin x serving region)",
                repr(matrix)[:80],
            )


def _numbers(values: Any) -> bool:
    return isinstance(values, list) and all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        for v in values
    )


def shares(matrix: Sequence[Sequence[float]]) -> npt.NDArray[np.float64]:
    """Each row of ``matrix`` divided by its sum (an all-zero row stays zero)."""
    array = np.asarray(matrix, dtype=np.float64)
    totals = array.sum(axis=1, keepdims=True)
    out = np.zeros_like(array)
    np.divide(array, totals, out=out, where=totals > 0)
    return out


def baseline_of(configs: Mapping[str, Any]) -> str | None:
    """The configuration drawn beside GeoLayer's map (:data:`BASELINES` first)."""
    for name in BASELINES:
        if name in configs:
            return name
    others = [name for name in configs if name != GEOLAYER]
    return others[0] if others else None


def draw_geo(plt: Any, report: Mapping[str, Any], title: str | None = None) -> Any:
    """The figure of a geo_bench run report (module docs)."""
    outputs = report["outputs"]
    regions: list[str] = list(outputs["regions"])
    configs: Mapping[str, Any] = outputs["configs"]
    maps = [
        n for n in (GEOLAYER, baseline_of(configs)) if n is not None and n in configs
    ]
    figure, axes = plt.subplots(
        1,
        1 + len(maps),
        figsize=(6.5 + 4.2 * len(maps), 5.2),
        squeeze=False,
        gridspec_kw={"width_ratios": [1.4] + [1.0] * len(maps), "wspace": 0.3},
    )
    _draw_cdfs(plt, axes[0][0], configs)
    image = None
    for index, (ax, name) in enumerate(zip(axes[0][1:], maps, strict=True)):
        image = _draw_map(ax, name, regions, configs[name]["served_by"])
        if index == 0:  # the maps share their rows: label them once
            ax.set_ylabel("origin region")
    if image is not None:
        figure.colorbar(image, ax=list(axes[0][1:]), shrink=0.8, label="share of reads")
    seed = outputs.get("seed")
    heading = title or (
        f"{report.get('job', 'geo_bench')}: {len(configs)} configurations"
        + (f", seed {seed}" if seed is not None else "")
    )
    figure.suptitle(heading)
    return figure


def _draw_cdfs(plt: Any, ax: Any, configs: Mapping[str, Any]) -> None:
    # tab20 keeps up to 20 lines apart; GeoLayer is black and thickest.
    colors = plt.get_cmap("tab20").colors
    others = 0
    for name, config in configs.items():
        values = np.asarray(config["cdf_ms"], dtype=np.float64)
        fraction = np.linspace(0.0, 1.0, len(values)) if len(values) > 1 else [1.0]
        if name == GEOLAYER:
            style = {"color": "black", "linewidth": 2.6, "zorder": 3}
        else:
            style = {"color": colors[others % len(colors)], "linewidth": 1.3}
            others += 1
        ax.plot(values, fraction, label=name, drawstyle="steps-post", **style)
    ax.set_xscale("log")
    ax.set_xlabel("read latency (ms, unscaled)")
    ax.set_ylabel("fraction of requests")
    ax.set_ylim(0.0, 1.0)
    ax.grid(alpha=0.3, which="both")
    # below the axes: 11 names would cover the curves or the next panel
    ax.legend(
        fontsize=7,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.16),
        ncol=3,
        frameon=False,
    )
    ax.set_title("latency CDF per configuration")


def _draw_map(
    ax: Any, name: str, regions: list[str], matrix: Sequence[Sequence[float]]
) -> Any:
    share = shares(matrix)
    image = ax.imshow(share, vmin=0.0, vmax=1.0, cmap="viridis")
    ticks = list(range(len(regions)))
    ax.set_xticks(ticks, regions, rotation=45)
    ax.set_yticks(ticks, regions)
    ax.set_xlabel("serving region")
    ax.set_title(f"{name}: where reads were served", fontsize=9)
    for i in ticks:
        for j in ticks:
            if share[i, j] >= 0.005:
                color = "black" if share[i, j] > 0.6 else "white"
                label = f"{share[i, j]:.2f}"
                ax.text(j, i, label, ha="center", va="center", fontsize=7, color=color)
    return image
