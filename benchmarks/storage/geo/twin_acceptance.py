"""GeoLayer twin-side acceptance (spec systems/geolayer.md §4): A2-A10 and A8.

Every configuration of spec §3.6 runs on the SAME synthetic workload (full size: 200k
vertices, ~2M edges, 1e5 history and 1e4 test operations) for each seed; figures are
the mean of per-seed ratios, spreads the per-seed min and max.

    .venv/bin/python -m benchmarks.storage.geo.twin_acceptance [--seeds 0 1 2] [--quick]

Writes ``benchmarks/results/geo_twin.json`` (acceptance rows) and
``benchmarks/results/geo_twin_configs.json`` (per-configuration summaries per seed).
Importable pieces for the pytest-benchmark suite and the job:
:func:`run_twin_configurations` (one seed, all configurations), :func:`acceptance_rows`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numba
import numpy as np

from strata.storage.geo.configurations import (
    ALL_CONFIGURATIONS,
    BuiltConfiguration,
    build,
    configuration,
    configurations,
    router_of,
)
from strata.storage.geo.cost import CostConfig
from strata.storage.geo.layers import LayerTree
from strata.storage.geo.optimal import evaluate_holders, solve_optimal, tiny_instance
from strata.storage.geo.placement import GeoPlaceConfig, geolayer_place
from strata.storage.geo.routing import Router
from strata.storage.geo.summary import twin_figures
from strata.storage.geo.topology import Topology, table1, uniform
from strata.storage.geo.twin import Semantics, TwinResult, simulate
from strata.storage.geo.workload import (
    GeoWorkload,
    GeoWorkloadConfig,
    synthetic_workload,
)

RESULTS = Path(__file__).resolve().parents[2] / "results"
COMMAND = ".venv/bin/python -m benchmarks.storage.geo.twin_acceptance"

# Rows name configurations by their display labels (strata.storage.geo.configurations).
GEOLAYER = configuration("geolayer").label
RANDOM3 = configuration("random3-random").label
RANDOM3_NEAREST = configuration("random3-nearest").label
TOP3 = configuration("top3-random").label
TOP3_NEAREST = configuration("top3-nearest").label
SINGLE = configuration("single-primary").label
HASH = configuration("hash").label
FULL = configuration("full-replication").label
HOME = configuration("home-only").label
ABL_ROUTING = configuration("random3-layered").label
ABL_PLACEMENT = configuration("geolayer-random").label
GEO_NEAREST = configuration("geolayer-nearest").label
ALL_CONFIGS = tuple(c.label for c in ALL_CONFIGURATIONS)


@dataclass(frozen=True, eq=False)
class ConfigResult:
    """One configuration's twin run on one seed."""

    name: str
    seed: int
    placement_s: float
    twin: TwinResult
    from_history: np.ndarray
    semantics: str = "pattern"
    kind: np.ndarray | None = None

    @property
    def reads(self) -> np.ndarray:
        """Read-request mask."""
        return self.twin.reads

    @property
    def read_latency_ms(self) -> np.ndarray:
        """Latency of the read requests (ms)."""
        return self.twin.latency_ms[self.reads]

    @property
    def storage_bytes(self) -> float:
        """Total bytes stored over all regions."""
        return float(self.twin.storage_bytes.sum())

    def summary(self, region_names: Sequence[str]) -> dict[str, Any]:
        """The figures spec §4 reports for every configuration.

        Computed by :func:`~strata.storage.geo.summary.twin_figures` (as the job's
        report), under the key names ``geo_twin_configs.json`` has always used.
        """
        f = twin_figures(self.twin, region_names)
        read, write, c = f["read_ms"], f["write_ms"], f["cost_per_hour"]
        return {
            "config": self.name,
            "seed": self.seed,
            "semantics": self.semantics,
            "read_p50_p95_p99_ms": [read["p50"], read["p95"], read["p99"]],
            "read_mean_ms": read["mean"],
            "read_per_origin_p50_p95_p99_ms": {
                name: [p["p50"], p["p95"], p["p99"]]
                for name, p in f["read_ms_per_origin"].items()
            },
            "write_p50_p99_ms": None
            if write["p50"] is None
            else [write["p50"], write["p99"]],
            "slo_violation_rate": f["slo_violation_rate"],
            "mean_regions_contacted": f["regions_contacted_mean"],
            "wan_bytes_per_request": f["wan_bytes_per_request"],
            "local_only_fraction": f["local_only_fraction"],
            "storage_bytes": f["storage_bytes"],
            "cost_per_hour": {
                "C(S)": c["storage_usd"],
                "C(R)": c["read_usd"],
                "C(W)": c["write_usd"],
                "C(A)_units": c["assoc_units"],
                "C(A)_usd": c["assoc_usd"],
                "dollars": c["dollars_usd"],
                "total": c["total_usd"],
            },
            "served_by_items": f["served_by"],
            "placement_s": self.placement_s,
        }


def run_twin_configurations(
    topology: Topology,
    cfg: GeoWorkloadConfig,
    seed: int,
    names: Sequence[str] = ALL_CONFIGS,
    semantics: Semantics = "pattern",
    workload: GeoWorkload | None = None,
    cost_config: CostConfig | None = None,
    traversal_names: Sequence[str] = (),
    place_cfg: GeoPlaceConfig | None = None,
) -> list[ConfigResult]:
    """Every named configuration on one seed's workload, simulated on the twin.

    Configurations in ``traversal_names`` are simulated once more with traversal
    semantics (appended, ``semantics="traversal"``), reusing their placements.
    """
    w = workload or synthetic_workload(topology, cfg, seed)
    test = w.test
    from_history = np.isin(test.source, w.history.source[~w.history.is_write])
    built = build(configurations(names), w, topology, seed, place_cfg)

    def run(b: BuiltConfiguration, router: Router, mode: Semantics) -> ConfigResult:
        res = simulate(
            test,
            b.placement,
            router,
            topology,
            space=b.space,
            semantics=mode,
            cost_config=cost_config,
        )
        label, took = b.config.label, b.placement_s
        return ConfigResult(label, seed, took, res, from_history, mode, test.kind)

    out = [run(b, b.router, semantics) for b in built]
    # Traversal reruns get fresh routers: a random one replays the same stream.
    out += [
        run(
            b,
            router_of(b.config.router, b.placement, topology, b.tree, seed),
            "traversal",
        )
        for b in built
        if b.config.label in traversal_names
    ]
    return out


# ------------------------------------------------------------------ acceptance rows


def _row(
    work: str,
    metric: str,
    better: str,
    strata: Sequence[float],
    peer: str,
    peer_values: Sequence[float],
    ratios: Sequence[float],
    target: str,
    met: bool,
    note: str = "",
) -> dict[str, Any]:
    s, pv = np.asarray(strata, float), np.asarray(peer_values, float)
    return {
        "work": work,
        "metric": metric,
        "better": better,
        "strata": float(s.mean()),
        "strata_spread": [float(s.min()), float(s.max())],
        "peer": peer,
        "peer_value": float(pv.mean()),
        "peer_spread": [float(pv.min()), float(pv.max())],
        "ratio": float(s.mean() / pv.mean()) if pv.mean() else float("inf"),
        "target": target,
        "met": bool(met),
        "command": COMMAND,
        "note": (
            note + f" Mean of per-seed ratios {float(np.mean(ratios)):.4g} "
            f"(per seed {[round(float(x), 4) for x in ratios]})."
        ).strip(),
    }


def _by_name(results: list[ConfigResult]) -> dict[str, ConfigResult]:
    return {r.name: r for r in results}


def _p(x: np.ndarray, q: float) -> float:
    return float(np.quantile(x, q)) if x.size else float("nan")


def _slo_by_kind(seeds: list[dict[str, ConfigResult]]) -> str:
    """GeoLayer's SLO violations among reads with a seen source, per request kind."""
    parts = []
    for kind, label in ((1, "1-hop"), (2, "2-hop"), (3, "3-hop walk")):
        rates = []
        for d in seeds:
            c = d[GEOLAYER]
            if c.kind is None:
                continue
            sel = c.reads & c.from_history & (c.kind == kind)
            rates.append(float(c.twin.slo_violation[sel].mean()) if sel.any() else 0.0)
        if rates:
            parts.append(f"{label} {np.mean(rates):.1%}")
    return "Evidence, per kind: " + ", ".join(parts) + "." if parts else ""


def acceptance_rows(
    per_seed: list[list[ConfigResult]],
    uniform_per_seed: list[list[ConfigResult]] | None = None,
) -> list[dict[str, Any]]:
    """A2-A7, A9 and A10 rows from per-seed runs of every configuration."""
    seeds = [_by_name(x) for x in per_seed]
    rows: list[dict[str, Any]] = []

    def metric_rows(
        work: str,
        metric: str,
        fn: Callable[[ConfigResult], float],
        peers: Sequence[str],
        target: str,
        limit: float,
        note: str = "",
        better: str = "lower",
    ) -> None:
        for peer in peers:
            s = [fn(d[GEOLAYER]) for d in seeds]
            pv = [fn(d[peer]) for d in seeds]
            ratios = [a / b if b else float("inf") for a, b in zip(s, pv, strict=True)]
            mean_ratio = float(np.mean(ratios))
            met = mean_ratio <= limit if better == "lower" else mean_ratio >= limit
            rows.append(
                _row(work, metric, better, s, peer, pv, ratios, target, met, note)
            )

    fair = (
        "Pitfall 9: same baseline with nearest routing, so gains are not routing only."
    )
    metric_rows(
        "A2 online latency, mean (reads, Table I)",
        "ms",
        lambda c: float(c.read_latency_ms.mean()),
        [RANDOM3, TOP3],
        "<= 0.667 (>= 1.5x lower)",
        1 / 1.5,
    )

    def far(c: ConfigResult) -> float:
        return float((c.read_latency_ms >= 200.0).mean())

    def budget_used(d: dict[str, ConfigResult]) -> float:
        return d[GEOLAYER].storage_bytes / d[HOME].storage_bytes - 1.0

    near = [d[GEO_NEAREST] for d in seeds if GEO_NEAREST in d]
    near_txt = ", ".join(f"{far(c):.1%}" for c in near)
    near_p99 = np.mean([_p(c.read_latency_ms, 0.99) for c in near]) if near else np.nan
    p99_note = (
        "Evidence: GeoLayer reads at >= 200 ms per seed "
        + ", ".join(f"{far(d[GEOLAYER]):.1%}" for d in seeds)
        + f" (same placement, nearest routing: {near_txt}; p99 {near_p99:.1f} ms); "
        + "replicas use "
        + ", ".join(f"{budget_used(d):.2f}" for d in seeds)
        + "x home bytes (budget 1.0x). Over 1% of reads still need an item held only "
        "in a region >= 200 ms away, so p99 sits at the slowest links (LON-BJS 256 ms)."
    )
    metric_rows(
        "A2 online latency, p99 (reads, Table I)",
        "ms",
        lambda c: _p(c.read_latency_ms, 0.99),
        [RANDOM3, TOP3],
        "<= 0.769 (>= 1.3x lower)",
        1 / 1.3,
        p99_note,
    )
    metric_rows(
        "A2 online latency, mean (reads; fairness rows)",
        "ms",
        lambda c: float(c.read_latency_ms.mean()),
        [RANDOM3_NEAREST, TOP3_NEAREST],
        "<= 0.667 (>= 1.5x lower)",
        1 / 1.5,
        fair,
    )
    metric_rows(
        "A2 online latency, p99 (reads; fairness rows)",
        "ms",
        lambda c: _p(c.read_latency_ms, 0.99),
        [RANDOM3_NEAREST, TOP3_NEAREST],
        "<= 0.769 (>= 1.3x lower)",
        1 / 1.3,
        fair,
    )

    def non_use_p50(c: ConfigResult) -> float:
        sel = c.reads & (c.twin.origin != 0)
        return _p(c.twin.latency_ms[sel], 0.5)

    metric_rows(
        "A3 p50 latency, reads from non-USE origins",
        "ms",
        non_use_p50,
        [SINGLE],
        "<= 0.5 (>= 2x lower)",
        0.5,
    )

    # A4: absolute local fraction, and storage / C(W) against full replication.
    s = [float(d[GEOLAYER].twin.local_only[d[GEOLAYER].reads].mean()) for d in seeds]
    pv = [float(d[FULL].twin.local_only[d[FULL].reads].mean()) for d in seeds]
    rows.append(
        _row(
            "A4 reads served entirely in the origin region",
            "fraction",
            "higher",
            s,
            FULL,
            pv,
            [a / b for a, b in zip(s, pv, strict=True)],
            ">= 0.5 of reads (absolute)",
            float(np.mean(s)) >= 0.5,
            "Target is on the absolute fraction (strata), not the ratio.",
        )
    )
    metric_rows(
        "A4 storage bytes", "bytes", lambda c: c.storage_bytes, [FULL], "<= 0.5", 0.5
    )

    def fanout(c: ConfigResult) -> float:
        return float(c.twin.regions_contacted[c.twin.is_write].mean())

    cw_note = (
        "Evidence: mean holders per written vertex (synchronous fan-out) GeoLayer "
        + ", ".join(f"{fanout(d[GEOLAYER]):.2f}" for d in seeds)
        + " vs full replication "
        + ", ".join(f"{fanout(d[FULL]):.2f}" for d in seeds)
        + ", home-only "
        + ", ".join(f"{fanout(d[HOME]):.2f}" for d in seeds)
        + ": mutable vertices are also the Zipf-hot reads, so they are the most"
        " replicated (the paper also reports C(W) rising under GeoLayer)."
    )
    metric_rows(
        "A4 C(W) per 1-hour window",
        "USD",
        lambda c: c.twin.cost.write_usd,
        [FULL],
        "<= 0.5",
        0.5,
        cw_note,
    )

    def slo(c: ConfigResult) -> float:
        return float(c.twin.slo_violation[c.reads].mean())

    metric_rows(
        "A5 SLO violation rate (reads)",
        "fraction",
        slo,
        [RANDOM3, TOP3, HASH],
        "< 1 (below the baseline)",
        1.0 - 1e-12,
    )
    s = [
        float(
            d[GEOLAYER]
            .twin.slo_violation[d[GEOLAYER].reads & d[GEOLAYER].from_history]
            .mean()
        )
        for d in seeds
    ]
    pv = [
        float(
            d[RANDOM3]
            .twin.slo_violation[d[RANDOM3].reads & d[RANDOM3].from_history]
            .mean()
        )
        for d in seeds
    ]
    rows.append(
        _row(
            "A5 SLO violation rate, reads whose source is in the history",
            "fraction",
            "lower",
            s,
            RANDOM3,
            pv,
            [a / b for a, b in zip(s, pv, strict=True)],
            "<= 0.10 (absolute)",
            float(np.mean(s)) <= 0.10,
            "Target is on the absolute rate (strata). " + _slo_by_kind(seeds),
        )
    )
    metric_rows(
        "A6 mean regions contacted (reads)",
        "regions",
        lambda c: float(c.twin.regions_contacted[c.reads].mean()),
        [HASH, RANDOM3],
        "<= 1.0",
        1.0,
    )
    metric_rows(
        "A6 WAN bytes per request",
        "bytes",
        lambda c: float(c.twin.wan_bytes.mean()),
        [HASH, RANDOM3],
        "<= 1.0",
        1.0,
    )
    dollars = [
        (
            d[GEOLAYER].twin.cost.dollars_usd,
            d[RANDOM3].twin.cost.dollars_usd,
            d[TOP3].twin.cost.dollars_usd,
        )
        for d in seeds
    ]
    note = (
        "Total = C(S)+C(R)+C(W)+assoc_usd*C(A) per 1-hour window (assoc_usd=1e-6); "
        "pure-dollar "
        "sum C(S)+C(R)+C(W) GeoLayer/Random-3/Top-3 per seed: "
        + "; ".join(f"{a:.4g}/{b:.4g}/{c:.4g}" for a, b, c in dollars)
        + "."
    )
    metric_rows(
        "A7 total cost per 1-hour window",
        "USD",
        lambda c: c.twin.cost.total_usd,
        [RANDOM3, TOP3],
        "<= 0.75 (>= 25% lower)",
        0.75,
        note,
    )
    # A9: both > placement only > routing only > neither (mean read latency).
    order = [
        (GEOLAYER, ABL_PLACEMENT),
        (ABL_PLACEMENT, ABL_ROUTING),
        (ABL_ROUTING, RANDOM3),
    ]
    local_note = (
        " Reads served entirely in the origin: placement only "
        + ", ".join(
            f"{d[ABL_PLACEMENT].twin.local_only[d[ABL_PLACEMENT].reads].mean():.1%}"
            for d in seeds
        )
        + "; random routing spreads each pattern over its holders even when the"
        " origin holds a copy, so a placement that adds one nearby copy gains little"
        " without the router, while Random-3 has three copies for layered routing."
    )
    for a, b in order:
        s = [float(d[a].read_latency_ms.mean()) for d in seeds]
        pv = [float(d[b].read_latency_ms.mean()) for d in seeds]
        ratios = [x / y for x, y in zip(s, pv, strict=True)]
        rows.append(
            _row(
                f"A9 ablation order: {a} faster than {b}",
                "ms",
                "lower",
                s,
                b,
                pv,
                ratios,
                "< 1",
                float(np.mean(ratios)) < 1.0,
                f"strata here is '{a}'." + (local_note if a == ABL_PLACEMENT else ""),
            )
        )
    if uniform_per_seed:
        useeds = [_by_name(x) for x in uniform_per_seed]
        s = [
            float(
                d[RANDOM3].read_latency_ms.mean() / d[GEOLAYER].read_latency_ms.mean()
            )
            for d in seeds
        ]
        pv = [
            float(
                d[RANDOM3].read_latency_ms.mean() / d[GEOLAYER].read_latency_ms.mean()
            )
            for d in useeds
        ]
        ratios = [x / y for x, y in zip(s, pv, strict=True)]
        rows.append(
            _row(
                "A10 heterogeneity: speedup over Random-3 (mean read latency)",
                "x",
                "higher",
                s,
                "uniform 70 ms / 90 Mbps matrix",
                pv,
                ratios,
                "> 1",
                float(np.mean(ratios)) > 1.0,
                "strata = speedup on Table I.",
            )
        )
    return rows


#: The A8 instance (spec §4): 2k vertices, 5 regions, the 200 most-read patterns.
TINY = GeoWorkloadConfig(num_vertices=2_000, history_ops=2_000, test_ops=100)


def optimal_gap(
    seed: int, num_patterns: int = 200, time_limit: float = 200.0
) -> dict[str, Any]:
    """A8 on one seed: GeoLayer's placement vs the exact optimum of one programme."""
    topo = table1()
    w = synthetic_workload(topo, TINY, seed)
    inst = tiny_instance(w, topo, num_patterns)
    t0 = time.perf_counter()
    opt = solve_optimal(inst, time_limit)
    solve_s = time.perf_counter() - t0
    tree = LayerTree.build(topo)
    placed = geolayer_place(w.history, w.space, w.graph, tree, topo)
    geo = evaluate_holders(inst, placed.holders[inst.items])
    return {
        "seed": seed,
        "items": int(inst.items.size),
        "pairs": int(inst.pair_reader.size),
        "geolayer_usd": geo.cost_usd,
        "optimum_usd": opt.cost_usd,
        "lower_bound_usd": opt.lower_bound_usd,
        "solver_status": opt.status,
        "solver_message": opt.message,
        "solve_s": solve_s,
    }


def optimal_gap_row(seeds: Sequence[int], quick: bool = False) -> dict[str, Any]:
    """The A8 row: GeoLayer cost / optimum cost (the gap is ratio - 1)."""
    runs = [
        optimal_gap(s, 20 if quick else 200, 30.0 if quick else 200.0) for s in seeds
    ]
    geo = [r["geolayer_usd"] for r in runs]
    # Against HiGHS's proven lower bound: equal to the optimum when solved to
    # optimality, otherwise the gap shown can only overstate the true one.
    low = [r["lower_bound_usd"] for r in runs]
    ratios = [g / lo for g, lo in zip(geo, low, strict=True)]
    per_seed = "; ".join(
        f"seed {r['seed']}: {r['items']} items, {r['pairs']} read pairs, HiGHS status "
        f"{r['solver_status']} in {r['solve_s']:.0f} s, best {r['optimum_usd']:.6g}"
        for r in runs
    )
    note = (
        "peer_value is HiGHS's proven lower bound on the optimum (status 0: solved, "
        "1: stopped at the time limit), so ratio - 1 bounds the gap from above; the "
        "incumbent HiGHS found ('best') can be worse than GeoLayer. "
        "Tiny instance: 2k vertices, 5 regions (Table I), the 200 most-read patterns, "
        "history-window costs without C(A)'s latency-spread term, SLO relaxed "
        "(storage/geo/optimal.py); GeoLayer's placement costed with optimal routing. "
        + per_seed
        + "."
    )
    return _row(
        "A8 optimality gap, tiny instance (cost / optimum)",
        "USD per history window",
        "lower",
        geo,
        "exact optimum (scipy.optimize.milp, HiGHS)",
        low,
        ratios,
        "<= 1.15 (gap <= 15%)",
        float(np.mean(ratios)) <= 1.15,
        note,
    )


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--quick", action="store_true", help="small workload, print only")
    ap.add_argument("--no-optimal", action="store_true", help="skip A8")
    ap.add_argument(
        "--only-optimal", action="store_true", help="recompute the A8 row in place"
    )
    args = ap.parse_args(argv)
    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
    if args.only_optimal:
        path = RESULTS / "geo_twin.json"
        old = json.loads(path.read_text())["rows"] if path.exists() else []
        keep = [r for r in old if not str(r["work"]).startswith("A8 ")]
        _write(
            path, {"topic": "geo_twin", "rows": [*keep, optimal_gap_row(args.seeds)]}
        )
        return
    cfg = GeoWorkloadConfig.small() if args.quick else GeoWorkloadConfig()
    topo, flat = table1(), uniform(5, 70.0, 90.0)
    per_seed, uni, details = [], [], []
    t0 = time.perf_counter()
    for seed in args.seeds:
        both = run_twin_configurations(
            topo, cfg, seed, traversal_names=(GEOLAYER, RANDOM3, TOP3)
        )
        res = [r for r in both if r.semantics == "pattern"]
        per_seed.append(res)
        details += [r.summary(topo.regions) for r in both]
        ures = run_twin_configurations(flat, cfg, seed, names=(GEOLAYER, RANDOM3))
        uni.append(ures)
        details += [
            dict(r.summary(flat.regions), topology="uniform 70/90") for r in ures
        ]
        print(f"seed {seed} done at {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    rows = acceptance_rows(per_seed, uni)
    if not args.no_optimal:
        rows.append(optimal_gap_row(args.seeds, quick=args.quick))
    for r in rows:
        print(
            f"{'MET ' if r['met'] else 'MISS'} {r['work']} vs {r['peer']}: "
            f"{r['strata']:.4g} / "
            f"{r['peer_value']:.4g}; target {r['target']}"
        )
    if args.quick:
        return
    RESULTS.mkdir(exist_ok=True)
    _write(RESULTS / "geo_twin.json", {"topic": "geo_twin", "rows": rows})
    _write(
        RESULTS / "geo_twin_configs.json",
        {
            "command": COMMAND,
            "seeds": list(args.seeds),
            "workload": repr(cfg),
            "seconds": time.perf_counter() - t0,
            "configs": details,
        },
    )


def _write(path: Path, obj: object) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(obj, indent=1))
    tmp.replace(path)


if __name__ == "__main__":
    main()
