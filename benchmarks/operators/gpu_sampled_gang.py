"""Sampled SAGE on a one-GPU NCCL gang against the same gang on the CPU (device check).

Run on a machine with a GPU (never part of the test suite)::

    python benchmarks/operators/gpu_sampled_gang.py --nodes 262144 --epochs 3 \
        --out gpu_sampled_gang.json

It builds the planted-community graph of ``jobs/sampled_sage.py`` (``--nodes``
vertices, 128 features, degree 10, half of the vertices training), trains a 2-layer
GraphSAGE (hidden 128, fan-outs [10, 5], batch 1024) with
:class:`~strata.operators.trainers.sampled.SampledGangTrainer` as (1) a one-rank
gang on ``cuda`` (NCCL backend) and (2) a one-rank gang on the CPU (gloo, in this
process), and writes seeds/s of every epoch after the first (warm-up: CUDA
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


def _run(data: Any, device: str, epochs: int, threads: int) -> dict[str, Any]:
    config = TrainConfig(
        ModelConfig("sage", hidden=128, num_layers=2, dropout=0.0),
        lr=0.01,
        epochs=epochs,
        patience=0,
        device="cpu",
        threads=threads,
    )
    gang = SampledGangConfig(workers=1, device=device, threads_per_worker=threads)  # type: ignore[arg-type]
    sampling = SamplingConfig(fanouts=(10, 5), batch_size=1024)
    start = time.perf_counter()
    run = SampledGangTrainer(config, sampling, gang).fit(data)
    wall = time.perf_counter() - start
    seeds = [r.seeds / r.seconds for r in run.history]
    warm = seeds[1:] or seeds
    return {
        "device": device,
        "backend": run.report["backend"],
        "seeds_per_s_per_epoch": seeds,
        "seeds_per_s": float(np.median(warm)),
        "epoch_losses": [r.loss for r in run.history],
        "test_accuracy": run.result.test_accuracy,
        "wall_s": wall,
        "startup_s": run.report["startup_s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=262_144)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=min(16, os.cpu_count() or 1))
    parser.add_argument("--out", default="gpu_sampled_gang.json")
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
