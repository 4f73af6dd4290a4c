"""HongTu and partition-parallel measurements (issue 6) as functions and a CLI.

``dedup``: deduplicated loading (``hongtu.md`` H3). One training epoch of the
chunked trainer per dedup mode (``naive``: no dedup; ``both``: the default) on
the planted-community graph, K workers and M chunks per worker; the measured
host->device bytes (per phase, from the workers' counters) and their ratio,
beside the plan's row counts for every mode (no training needed for those).

``memory``: the device budget (H4). The unchunked (M=1) modelled requirement on
RMAT; a run with a budget below it (the trainer picks M), and runs at forced M;
per-worker arena high-water mark (what the trainer holds on its "device",
``chunked/arena.py``) against the budget, modelled peaks, alpha, epoch time.

``scaling``: epoch time of exact partition-parallel training with 1 and 2
workers, beside the single-device ``FullGraphTrainer`` in the same run.

Run from the repository root under the benchmark lock (gang workers re-import
this script)::

    flock /tmp/strata-bench.lock .venv/bin/python \\
        benchmarks/operators/bench_hongtu_run.py dedup \\
        --graph sbm:n=200000,blocks=64,degree=15,intra=0.8,features=128 \\
        --workers 4 --chunks 8
    flock /tmp/strata-bench.lock .venv/bin/python \\
        benchmarks/operators/bench_hongtu_run.py memory \\
        --graph rmat:scale=18,edge_factor=16,features=128 --workers 2 --chunks 1 2 4 8
    flock /tmp/strata-bench.lock .venv/bin/python \\
        benchmarks/operators/bench_hongtu_run.py scaling \\
        --graph rmat:scale=16,edge_factor=16,features=64 --hidden 64 --epochs 6

Each prints one JSON document (``--out`` also writes it).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import time
from typing import Any

from strata.operators.io.datasets import load_dataset
from strata.operators.io.task import with_task
from strata.operators.trainers import FullGraphTrainer, ModelConfig, TrainConfig
from strata.operators.trainers.data import TrainingData, as_training_data
from strata.operators.trainers.distributed import DistributedConfig, DistributedTrainer
from strata.operators.trainers.distributed.chunked.plan import build_chunk_plan
from strata.operators.trainers.distributed.local_graph import PropagationGraph
from strata.operators.trainers.distributed.loop import build_model
from strata.operators.trainers.distributed.programs import program_for
from strata.operators.trainers.distributed.trainer import level1_partition

MODES = ("naive", "intra", "inter", "both")


def task_data(graph: str, seed: int = 0) -> TrainingData:
    """The graph spec's dataset, with labels and masks drawn where missing."""
    payload = with_task(
        load_dataset(graph), classes=16, features=128, train_fraction=0.1, seed=seed
    )
    return as_training_data(payload, "bench_hongtu_run")


def config(hidden: int, epochs: int) -> TrainConfig:
    """GCN, 2 layers, dropout 0.5, all epochs (no early stopping)."""
    return TrainConfig(
        ModelConfig("gcn", hidden=hidden, dropout=0.5),
        epochs=epochs,
        patience=0,
        restore_best=False,
        device="cpu",
        seed=0,
    )


def _load() -> float:
    return os.getloadavg()[0]


def plan_rows(data: TrainingData, args: argparse.Namespace) -> dict[str, Any]:
    """The load plan's row counts per dedup mode (no training)."""
    cfg = config(args.hidden, 1)
    model = build_model(cfg, data.num_features, data.num_classes)
    program = program_for(model)
    prop = PropagationGraph.build(data.graph, program.aggregation)
    part = level1_partition(data.graph, args.workers, DistributedConfig().level1, 0)
    out: dict[str, Any] = {}
    for mode in MODES:
        dist = DistributedConfig(
            workers=args.workers, mode="hongtu", chunks=args.chunks, dedup=mode
        )
        plan = build_chunk_plan(data.graph, part, prop, model, program, dist)
        summary = plan.summary.to_dict()
        out[mode] = {
            k: summary[k]
            for k in ("alpha", "host_rows", "peer_rows", "keep_rows", "naive_host_rows")
        }
        out[mode]["host_share_of_naive"] = (
            summary["host_rows"] / summary["naive_host_rows"]
        )
        out[mode]["host_load_max_over_mean"] = max(summary["host_load"]) / (
            sum(summary["host_load"]) / len(summary["host_load"])
        )
    return out


def dedup(args: argparse.Namespace) -> dict[str, Any]:
    """Measured host->device bytes with and without dedup (one epoch each)."""
    data = task_data(args.graph)
    result: dict[str, Any] = {
        "graph": args.graph,
        "workers": args.workers,
        "chunks": args.chunks,
        "hidden": args.hidden,
        "plan": plan_rows(data, args),
        "runs": {},
    }
    for mode in ("naive", "both"):
        dist = DistributedConfig(
            workers=args.workers,
            mode="hongtu",
            chunks=args.chunks,
            dedup=mode,
            cache_policy="refetch",
        )
        load = _load()
        start = time.perf_counter()
        run = DistributedTrainer(config(args.hidden, 1), dist).fit(data)
        totals = run.report["totals"]
        per_worker = [w["epochs"][0] for w in run.report["per_worker"]]
        result["runs"][mode] = {
            "fwd_h2d_bytes": totals.get("fwd.h2d_bytes", 0),
            "bwd_h2d_bytes": totals.get("bwd.h2d_bytes", 0),
            "eval_h2d_bytes": totals.get("eval.h2d_bytes", 0),
            "fwd_peer_send_bytes": totals.get("fwd.peer_send_bytes", 0),
            "all_h2d_bytes": sum(
                v for k, v in totals.items() if k.endswith("h2d_bytes")
            ),
            "fwd_h2d_bytes_per_worker": [w.get("fwd.h2d_bytes", 0) for w in per_worker],
            "arena_peak_bytes": [
                w["arena_peak_bytes"] for w in run.report["per_worker"]
            ],
            "wall_s": time.perf_counter() - start,
            "load_before": load,
        }
    naive, both = result["runs"]["naive"], result["runs"]["both"]
    for key in ("fwd_h2d_bytes", "bwd_h2d_bytes", "all_h2d_bytes"):
        result[f"{key}_ratio_both_over_naive"] = both[key] / naive[key]
    return result


def memory(args: argparse.Namespace) -> dict[str, Any]:
    """Arena peak vs chunk count; a budget below the unchunked requirement."""
    data = task_data(args.graph)
    cfg = config(args.hidden, args.epochs)
    model = build_model(cfg, data.num_features, data.num_classes)
    program = program_for(model)
    prop = PropagationGraph.build(data.graph, program.aggregation)
    part = level1_partition(data.graph, args.workers, DistributedConfig().level1, 0)
    one = DistributedConfig(workers=args.workers, mode="hongtu", chunks=1)
    unchunked = max(
        build_chunk_plan(
            data.graph, part, prop, model, program, one
        ).summary.modelled_peak_bytes
    )
    budget = int(unchunked * args.budget_fraction)
    result: dict[str, Any] = {
        "graph": args.graph,
        "num_nodes": data.num_nodes,
        "num_edges": data.graph.num_edges,
        "workers": args.workers,
        "hidden": args.hidden,
        "unchunked_modelled_peak_bytes": unchunked,
        "budget_bytes": budget,
        "runs": [],
    }
    settings = [{"device_budget": budget}] + [{"chunks": m} for m in args.chunks]
    for extra in settings:
        dist = DistributedConfig(workers=args.workers, mode="hongtu", **extra)
        load = _load()
        start = time.perf_counter()
        run = DistributedTrainer(cfg, dist).fit(data)
        plan = run.report["plan"]
        workers = run.report["per_worker"]
        result["runs"].append(
            {
                "setting": extra,
                "chunks": plan["chunks"],
                "alpha": plan["alpha"],
                "policies": plan["policies"],
                "modelled_peak_bytes": plan["modelled_peak_bytes"],
                "arena_peak_bytes": [w["arena_peak_bytes"] for w in workers],
                "peak_rss_bytes": [w["peak_rss_bytes"] for w in workers],
                "within_budget": all(w["arena_peak_bytes"] <= budget for w in workers),
                "epoch_s": [r.seconds for r in run.history],
                "epochs_run": run.result.epochs_run,
                "wall_s": time.perf_counter() - start,
                "load_before": load,
            }
        )
    return result


def scaling(args: argparse.Namespace) -> dict[str, Any]:
    """Epoch time: FullGraphTrainer, then exact mode on 1 and 2 workers."""
    data = task_data(args.graph)
    cfg = config(args.hidden, args.epochs)
    result: dict[str, Any] = {
        "graph": args.graph,
        "hidden": args.hidden,
        "epochs": args.epochs,
        "cpus": os.cpu_count(),
        "runs": {},
    }

    def summary(seconds: list[float], train: list[float], load: float) -> dict:
        steady_s, steady_t = seconds[1:], train[1:]  # epoch 0 warms up
        return {
            "epoch_s_median": statistics.median(steady_s),
            "train_s_median": statistics.median(steady_t),
            "epoch_s": seconds,
            "load_before": load,
        }

    load = _load()
    records: list[Any] = []
    # The whole machine's cores for one device; a gang splits them per worker.
    whole = dataclasses.replace(cfg, threads=os.cpu_count() or 1)
    FullGraphTrainer(whole).fit(data, on_epoch=records.append)
    result["runs"]["single_device"] = summary(
        [r.seconds for r in records], [r.seconds - r.eval_s for r in records], load
    )
    for workers in args.workers:
        load = _load()
        run = DistributedTrainer(cfg, DistributedConfig(workers=workers)).fit(data)
        result["runs"][f"exact_{workers}"] = {
            **summary(
                [r.seconds for r in run.history],
                [r.seconds - r.eval_s for r in run.history],
                load,
            ),
            "startup_s": run.report["startup_s"],
            "halo_send_bytes_per_epoch": run.report["totals"].get(
                "fwd.halo_send_bytes", 0
            )
            // args.epochs,
        }
    base = result["runs"]["single_device"]["epoch_s_median"]
    for run in result["runs"].values():
        run["ratio_to_single_device"] = run["epoch_s_median"] / base
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    d = sub.add_parser("dedup")
    d.add_argument(
        "--graph", default="sbm:n=200000,blocks=64,degree=15,intra=0.8,features=128"
    )
    d.add_argument("--workers", type=int, default=4)
    d.add_argument("--chunks", type=int, default=8)
    d.add_argument("--hidden", type=int, default=128)
    m = sub.add_parser("memory")
    m.add_argument("--graph", default="rmat:scale=18,edge_factor=16,features=128")
    m.add_argument("--workers", type=int, default=2)
    m.add_argument("--chunks", type=int, nargs="*", default=[1, 2, 4, 8])
    m.add_argument("--hidden", type=int, default=128)
    m.add_argument("--epochs", type=int, default=1)
    m.add_argument("--budget-fraction", type=float, default=0.5)
    s = sub.add_parser("scaling")
    s.add_argument("--graph", default="rmat:scale=16,edge_factor=16,features=64")
    s.add_argument("--workers", type=int, nargs="*", default=[1, 2])
    s.add_argument("--hidden", type=int, default=64)
    s.add_argument("--epochs", type=int, default=6)
    for p in (d, m, s):
        p.add_argument("--out")
    args = parser.parse_args(argv)
    result = {"dedup": dedup, "memory": memory, "scaling": scaling}[args.what](args)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return result


if __name__ == "__main__":
    main()
