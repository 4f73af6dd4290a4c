"""Emma's measurements (``emma.md`` §5) as plain functions and a command line.

``accuracy``: M5. Exact full-graph training (the single-device oracle with the
distributed trainers' counter-based dropout, which exact partition-parallel
training equals) against Emma on a gang, at the same iteration count, per seed;
final test accuracy (weights of the last iteration) and the best-validation one,
the exact-evaluation validation curve, and the run's bytes ratio.

``bytes``: M1-M4. Emma on a gang for two cycles per S: per-iteration forward and
backward halo bytes over the same run's exact-exchange bytes with the tolerance
``max(10%, 5 sigma)``, ``sigma = sqrt((S - 1) / H)`` (H the exact halo rows), rows
per cycle against one exact exchange, send balance (max / mean over workers),
edges per iteration, and buffer memory against ``|halo| * d``.

Run from the repository root (gang workers re-import this script)::

    .venv/bin/python benchmarks/operators/bench_emma_run.py accuracy \
        --graph planetoid:cora --workers 2 --splits 10 --refresh S2 S 0 --seeds 0 1 2
    .venv/bin/python benchmarks/operators/bench_emma_run.py bytes \
        --graph sbm:n=200000,blocks=64,degree=15,intra=0.8 --workers 4 --splits 2 5 10

Each prints one JSON document (``--out`` also writes it).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from typing import Any

import numpy as np

from strata.operators.trainers import FullGraphTrainer, ModelConfig, TrainConfig
from strata.operators.trainers.distributed.config import DistributedConfig
from strata.operators.trainers.distributed.emma import EmmaConfig, EmmaTrainer
from strata.storage import load_graph


def sage_config(seed: int, iterations: int, hidden: int = 16) -> TrainConfig:
    """Cora's SAGE preset (jobs/cora_gcn.py), all iterations, last weights."""
    return TrainConfig(
        ModelConfig("sage", hidden=hidden, dropout=0.5),
        lr=0.01,
        weight_decay=5e-4,
        epochs=iterations,
        patience=0,
        restore_best=False,
        seed=seed,
        device="cpu",
        threads=1,
    )


def _best_val_test(history: list[Any]) -> int:
    """The iteration with the lowest validation loss."""
    return int(np.argmin([r.val_loss for r in history]))


def exact_run(data: Any, config: TrainConfig) -> dict[str, Any]:
    """Exact full-graph training on one device (the oracle)."""
    records: list[Any] = []
    start = time.perf_counter()
    result = FullGraphTrainer(config).fit(data, on_epoch=records.append)
    return {
        "test_accuracy": result.test_accuracy,
        "val_accuracy": result.val_accuracy,
        "val_curve": [r.val_accuracy for r in records],
        "loss_curve": [r.loss for r in records],
        "wall_s": time.perf_counter() - start,
    }


def emma_run(
    data: Any, config: TrainConfig, workers: int, emma: EmmaConfig
) -> dict[str, Any]:
    """Emma on a gang (one process for ``workers=1``)."""
    dist = DistributedConfig(workers=workers, threads_per_worker=1, timeout_s=3000)
    trainer = EmmaTrainer(config, dist, emma)
    start = time.perf_counter()
    run = trainer.fit_local(data) if workers == 1 else trainer.fit(data)
    summary = run.report["emma"]
    train_s = [r.seconds - r.eval_s for r in run.history]
    return {
        "test_accuracy": run.result.test_accuracy,
        "val_accuracy": run.result.val_accuracy,
        "val_curve": [r.val_accuracy for r in run.history],
        "loss_curve": [r.loss for r in run.history],
        "fwd_bytes_ratio": summary["fwd_bytes_ratio"],
        "bwd_bytes_ratio": summary["bwd_bytes_ratio"],
        "fwd_bytes_ratio_with_refresh": _with_refresh(summary),
        "edges_ratio": summary["edges_ratio"],
        "cycle_rows_equal_exact": summary["cycle_rows_equal_exact"],
        "refreshes": summary["refreshes"],
        "median_train_s_per_iteration": statistics.median(train_s) if train_s else 0,
        "wall_s": time.perf_counter() - start,
        "counters": run_counters(run.report),
        "report": run.report,
    }


def _with_refresh(summary: dict[str, Any]) -> float:
    """Forward halo bytes of training plus refreshes over exact exchanges, per
    iteration (evaluation, the same for both trainers, left out)."""
    exact = summary["exact_exchange_bytes"] * summary["iterations"]
    sent = sum(summary["fwd_bytes_per_iteration"]) + summary["refresh_bytes"]
    return float(sent / exact) if exact else 0.0


def refresh_every(spec: str, splits: int) -> int | None:
    """``--refresh`` values: ``S`` (every cycle), ``S2`` (S*S, the reference),
    ``default`` (None: S*S), or a number of iterations (0: never)."""
    named = {"S": splits, "S2": splits * splits, "default": None}
    if spec in named:
        return named[spec]
    if not spec.isdigit():
        raise SystemExit(
            f"--refresh: expected S, S2, default or an integer, got {spec!r}"
        )
    return int(spec)


def run_counters(report: dict[str, Any]) -> dict[str, Any]:
    """Emma's own counters as the run report carries them: the ``emma`` section's
    scalars and the run totals of the ``emma.``, ``refresh.`` and ``eval.`` counters
    (and the halo traffic per phase, and the buffers' bytes summed over workers)."""
    section = {k: v for k, v in report["emma"].items() if not isinstance(v, list)}
    section["refreshes"] = report["emma"]["refreshes"]
    section["buffer_bytes"] = report["emma"]["buffer_bytes"]
    totals = {
        k: v
        for k, v in report["totals"].items()
        if k.split(".")[0] in ("emma", "refresh", "eval")
        or k.endswith(("halo_send_bytes", "buffer_bytes"))
    }
    return {"emma": section, "totals": totals}


def accuracy(args: argparse.Namespace) -> dict[str, Any]:
    """M5: exact vs Emma test accuracy per seed, with medians and means.

    Per Emma run also the exact trainer at equal forward halo bytes: exact
    training for ``round(iterations * fwd_bytes_ratio_with_refresh)`` iterations
    (``exact_at_equal_bytes``).
    """
    data = load_graph(args.graph)
    out: dict[str, Any] = {"graph": args.graph, "workers": args.workers, "runs": []}
    for seed in args.seeds:
        config = sage_config(seed, args.iterations, args.hidden)
        exact = exact_run(data, config)
        row: dict[str, Any] = {"seed": seed, "exact": _short(exact)}
        shorter: dict[int, float] = {}
        for splits in args.splits:
            for refresh in args.refresh or ["default"]:
                every = refresh_every(str(refresh), splits)
                emma = EmmaConfig(splits, refresh_every=every, seed=seed)
                result = emma_run(data, config, args.workers, emma)
                key = f"S={splits},refresh={emma.refresh_every}"
                row[key] = _short(result)
                equal = max(
                    1, round(args.iterations * result["fwd_bytes_ratio_with_refresh"])
                )
                if equal not in shorter:
                    short = sage_config(seed, equal, args.hidden)
                    shorter[equal] = exact_run(data, short)["test_accuracy"]
                row[key]["exact_at_equal_bytes"] = {
                    "iterations": equal,
                    "test_accuracy": shorter[equal],
                }
                print(
                    json.dumps(
                        {
                            "seed": seed,
                            key: row[key]["test_accuracy"],
                            "exact": exact["test_accuracy"],
                            "fwd_bytes_ratio_with_refresh": row[key][
                                "fwd_bytes_ratio_with_refresh"
                            ],
                        }
                    ),
                    flush=True,
                )
        out["runs"].append(row)
    keys = [k for k in out["runs"][0] if k.startswith("S=")]
    for name, stat in (("median", statistics.median), ("mean", statistics.mean)):
        exact_stat = _stat(out["runs"], "exact", stat)
        out[name] = {"exact": exact_stat}
        for key in keys:
            out[name][key] = _stat(out["runs"], key, stat)
            out[name][f"{key} minus exact (points)"] = 100 * (
                out[name][key] - exact_stat
            )
            at_bytes = float(
                stat(
                    [
                        r[key]["exact_at_equal_bytes"]["test_accuracy"]
                        for r in out["runs"]
                    ]
                )
            )
            out[name][f"{key} exact at equal bytes"] = at_bytes
    return out


def _short(run: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in run.items() if k != "report"}


def _stat(runs: list[dict[str, Any]], key: str, stat: Any) -> float:
    return float(stat([r[key]["test_accuracy"] for r in runs]))


def tolerance(splits: int, rows: float) -> float:
    """``max(10%, 5 sigma)`` relative, ``sigma = sqrt((S - 1) / H)``."""
    return max(0.10, 5 * math.sqrt((splits - 1) / max(rows, 1.0)))


def bytes_run(args: argparse.Namespace) -> dict[str, Any]:
    """M1-M4 for every S, from one gang run each (two cycles)."""
    data = load_graph(args.graph)
    out: dict[str, Any] = {"graph": args.graph, "workers": args.workers, "splits": {}}
    for splits in args.splits:
        config = TrainConfig(
            ModelConfig("sage", hidden=args.hidden, dropout=0.5),
            epochs=2 * splits,
            device="cpu",
            threads=1,
            restore_best=False,
        )
        run = emma_run(data, config, args.workers, EmmaConfig(splits, refresh_every=0))
        out["splits"][splits] = m1_to_m4(run["report"], splits)
        print(
            json.dumps(
                {
                    "S": splits,
                    **{
                        k: v
                        for k, v in out["splits"][splits].items()
                        if not isinstance(v, list)
                    },
                }
            ),
            flush=True,
        )
    return out


def m1_to_m4(report: dict[str, Any], splits: int) -> dict[str, Any]:
    """The byte, balance, edge and memory figures of one Emma run."""
    workers = report["per_worker"]
    emma = report["emma"]

    def per_iter(key: str) -> np.ndarray:
        return np.asarray(
            [[e.get(key, 0) for e in w["epochs"]] for w in workers], float
        )

    exact_fwd = per_iter("emma.exact_exchange_bytes").sum(0)
    exact_bwd = per_iter("emma.exact_bwd_bytes").sum(0)
    fwd = per_iter("fwd.halo_send_bytes").sum(0) / exact_fwd
    bwd = per_iter("bwd.halo_send_bytes").sum(0) / exact_bwd
    rows = per_iter("emma.exact_exchange_rows")[:, 0].sum()  # layers 2..L
    tol = tolerance(splits, rows)
    send = per_iter("fwd.halo_send_bytes")
    exact_send = per_iter("emma.exact_exchange_bytes")[:, 0]
    balance = send.max(0) / np.maximum(send.mean(0), 1)
    exact_balance = exact_send.max() / max(exact_send.mean(), 1)
    edges = per_iter("emma.edges_aggregated").sum(0) / per_iter("emma.exact_edges").sum(
        0
    )
    sources = sum(w["owned"] + w["halo"] for w in workers)
    edge_tol = tolerance(splits, sources)
    widths_bytes = [w["emma"]["buffer_bytes"] for w in workers]
    halo_bytes = [w["emma"]["halo_history_bytes"] for w in workers]
    return {
        "exact_rows_per_exchange": int(rows),
        "exact_fwd_bytes_per_iteration": float(exact_fwd[0]),
        "fwd_ratio_per_iteration": fwd.tolist(),
        "bwd_ratio_per_iteration": bwd.tolist(),
        "target": 1 / splits,
        "tolerance_relative": tol,
        "fwd_within_tolerance": bool((np.abs(fwd * splits - 1) <= tol).all()),
        "bwd_within_tolerance": bool((np.abs(bwd * splits - 1) <= tol).all()),
        "fwd_ratio_mean": float(fwd.mean()),
        "bwd_ratio_mean": float(bwd.mean()),
        "fwd_ratio_max_rel_dev": float(np.abs(fwd * splits - 1).max()),
        "cycle_rows_equal_exact": emma["cycle_rows_equal_exact"],
        "balance_max_over_mean": balance.tolist(),
        "exact_balance_max_over_mean": float(exact_balance),
        "edges_ratio_per_iteration": edges.tolist(),
        "edges_tolerance_relative": edge_tol,
        "edges_within_tolerance": bool((np.abs(edges * splits - 1) <= edge_tol).all()),
        "edges_ratio_over_run": emma["edges_ratio"],
        "buffer_bytes": widths_bytes,
        "buffer_bytes_exact_formula": all(
            w["emma"]["buffer_bytes"] == w["owned"] * sum(w["emma"]["widths"]) * 4
            for w in workers
        ),
        "halo_history_bytes": halo_bytes,
        "buffer_over_halo_history": [
            b / h if h else math.inf
            for b, h in zip(widths_bytes, halo_bytes, strict=True)
        ],
    }


def main() -> None:
    """Parse the command line, run, print (and write) the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["accuracy", "bytes"])
    parser.add_argument("--graph", default="planetoid:cora")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--splits", type=int, nargs="+", default=[10])
    parser.add_argument(
        "--refresh",
        nargs="*",
        default=None,
        help="refresh_every per run: S, S2, default (S*S) or iterations (0: never)",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    result = accuracy(args) if args.what == "accuracy" else bytes_run(args)
    text = json.dumps(result, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text[:4000])


if __name__ == "__main__":
    main()
