"""Sampled SAGE on a one-GPU NCCL gang against the same gang on the CPU (device check).

Run on a machine with a GPU (never part of the test suite)::

    python benchmarks/operators/gpu_sampled_gang.py --nodes 262144 --epochs 3 \
        --out gpu_sampled_gang.json

It builds the planted-community graph of ``jobs/sampled_sage.py`` (``--nodes``
vertices, 128 features, degree 10, half of the vertices training), trains a 2-layer
GraphSAGE (hidden 128, fan-outs [10, 5], batch 1024) with
:class:`~strata.operators.trainers.sampled.SampledGangTrainer` as (1) a one-rank
gang on ``cuda`` (NCCL backend) and (2) a one-rank gang on the CPU (gloo, in this
process), and (``--armada M ...``) Armada with M sampler processes feeding the GPU
trainer, and writes seeds/s of every epoch after the first (warm-up: CUDA
context, numba compilation), the losses of both (the same steps, so they must
agree to float rounding), and the test accuracy.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import numpy as np
import torch

from strata.operators.io.datasets import community_dataset
from strata.operators.trainers import ModelConfig, TrainConfig
from strata.operators.trainers.sampled import (
    SampledGangConfig,
    SampledGangTrainer,
    SamplingConfig,
)


def _run(
    data: Any, device: str, epochs: int, threads: int, samplers: int = 0
) -> dict[str, Any]:
    config = TrainConfig(
        ModelConfig("sage", hidden=128, num_layers=2, dropout=0.0),
        lr=0.01,
        epochs=epochs,
        patience=0,
        device="cpu",
        threads=threads,
    )
    gang = SampledGangConfig(
        workers=1,
        samplers=samplers,
        device=device,  # type: ignore[arg-type]
        threads_per_worker=threads,
    )
    sampling = SamplingConfig(fanouts=(10, 5), batch_size=1024)
    start = time.perf_counter()
    run = SampledGangTrainer(config, sampling, gang).fit(data)
    wall = time.perf_counter() - start
    seeds = [r.seeds / r.seconds for r in run.history]
    warm = seeds[1:] or seeds
    return {
        "device": device,
        "samplers": samplers,
        "backend": run.report["backend"],
        "seeds_per_s_per_epoch": seeds,
        "seeds_per_s": float(np.median(warm)),
        "epoch_losses": [r.loss for r in run.history],
        "test_accuracy": run.result.test_accuracy,
        "wall_s": wall,
        "startup_s": run.report["startup_s"],
    }


COMMAND = (
    "python benchmarks/operators/gpu_sampled_gang.py --nodes 262144 --epochs 4 "
    "--armada 1 3 --out gpu_sampled_gang.json  # on the GPU machine"
)


def results_rows(raw: dict[str, Any]) -> dict[str, Any]:
    """The results-table rows (``benchmarks/results`` schema) of one raw dump."""
    gpu = raw.get("gpu") or "GPU"
    cuda, cpu = raw["cuda"], raw["cpu"]
    work = (
        f"sampled SAGE [10, 5], batch 1024, community graph n={raw['nodes']:,}, "
        f"F=128, on {gpu}"
    )

    def row(name: str, run: dict[str, Any], peer: str, base: dict[str, Any]) -> dict:
        values, peers = (
            run["seeds_per_s_per_epoch"][1:],
            base["seeds_per_s_per_epoch"][1:],
        )
        return {
            "work": f"{work}: {name}",
            "metric": "training seeds/s (epochs 2-4)",
            "better": "higher",
            "strata": run["seeds_per_s"],
            "strata_spread": [min(values), max(values)],
            "peer": peer,
            "peer_value": base["seeds_per_s"],
            "peer_spread": [min(peers), max(peers)],
            "ratio": run["seeds_per_s"] / base["seeds_per_s"],
            "target": "report (issue 16: 1-GPU NCCL gang vs the CPU run)",
            "met": True,
            "command": COMMAND,
            "note": f"same losses to {raw['max_rel_loss_diff']:.1e} relative",
        }

    cpu_name = f"the same job on the CPU ({raw['threads']} threads, same machine)"
    rows = [row("1-GPU NCCL gang", cuda, cpu_name, cpu)]
    for key in sorted(k for k in raw if k.startswith("cuda_armada_")):
        samplers = key.rsplit("_", 1)[1]
        rows.append(
            row(
                f"Armada, {samplers} sampler process(es) + 1 GPU trainer",
                raw[key],
                "1-GPU colocated gang (samples in its prefetch thread)",
                cuda,
            )
        )
    return {"topic": "sampled_gang_gpu", "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=262_144)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=min(16, os.cpu_count() or 1))
    parser.add_argument("--out", default="gpu_sampled_gang.json")
    parser.add_argument(
        "--armada",
        type=int,
        nargs="*",
        default=[],
        help="also run Armada with this many sampler processes beside the GPU",
    )
    parser.add_argument(
        "--results", help="also write the results-table rows to this file"
    )
    parser.add_argument(
        "--from-raw", help="read an earlier --out dump instead of running"
    )
    args = parser.parse_args()
    if args.from_raw:
        with open(args.from_raw) as f:
            raw = json.load(f)
        with open(args.results or "sampled_gang_gpu.json", "w") as f:
            json.dump(results_rows(raw), f, indent=2)
        return
    data = community_dataset(
        args.nodes, 8, avg_degree=10.0, num_features=128, train_fraction=0.5, seed=0
    )
    results: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "torch": torch.__version__,
        "nodes": args.nodes,
        "threads": args.threads,
    }
    results["cuda"] = _run(data, "cuda", args.epochs, args.threads)
    for samplers in args.armada:
        results[f"cuda_armada_{samplers}"] = _run(
            data, "cuda", args.epochs, args.threads, samplers
        )
    results["cpu"] = _run(data, "cpu", args.epochs, args.threads)
    results["ratio_gpu_over_cpu"] = (
        results["cuda"]["seeds_per_s"] / results["cpu"]["seeds_per_s"]
    )
    a = np.array(results["cuda"]["epoch_losses"])
    b = np.array(results["cpu"]["epoch_losses"])
    results["max_rel_loss_diff"] = float(np.max(np.abs(a - b) / np.abs(b)))
    print(json.dumps(results, indent=2))
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    if args.results:
        with open(args.results, "w") as f:
            json.dump(results_rows(results), f, indent=2)


if __name__ == "__main__":
    main()
