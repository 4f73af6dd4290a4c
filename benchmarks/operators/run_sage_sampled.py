"""Sampled GraphSAGE training with Strata's sampler, in its own process; prints JSON.

Usage: ``python run_sage_sampled.py --data DIR [--batch-size 1024 --fanouts 10 5]``.

The training seeds are ``train_ids.npy`` (64k non-isolated nodes at scale 18),
shuffled per epoch. Per batch (a plain loop; the pipeline trainer comes later):
``NeighborSampler.sample(seeds, epoch, batch)`` -> gather the input rows of the
feature tensor (``x.index_select(0, blocks[0].src_global_ids)``, the fastest torch
gather; the DGL runner gathers the same way) -> ``GraphSAGE`` (2 x SAGEConv
mean, 128 -> 128 -> 16, ReLU, no dropout) forward over the blocks ->
cross-entropy -> backward -> Adam step. Fan-outs are in layer order, as DGL's:
``(10, 5)`` samples 5 neighbours per seed and 10 per node of the hop after.

Reports ``seeds_per_s`` (training) and ``sampler_seeds_per_s`` (sampling one
epoch alone), plus the harness's memory figures.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numba
import numpy as np
import torch
import torch.nn.functional as F
from gnn_dataset import load_graph
from gnn_harness import emit, measure

from strata.operators.layers import GraphSAGE
from strata.operators.samplers import NeighborSampler, SamplerConfig


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--fanouts", type=int, nargs="+", default=[10, 5])
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    numba.set_num_threads(args.threads)
    torch.manual_seed(0)
    graph = load_graph(args.data)
    x = torch.from_numpy(np.load(args.data / "x.npy"))
    y = torch.from_numpy(np.load(args.data / "y.npy"))
    train_ids = np.load(args.data / "train_ids.npy")
    num_classes = int(y.max()) + 1
    sampler = NeighborSampler(graph, SamplerConfig(tuple(args.fanouts)), seed=0)
    model = GraphSAGE(x.shape[1], 128, num_classes, num_layers=len(args.fanouts))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    bs = args.batch_size
    epoch = [0]
    losses = []

    def batches():
        order = np.random.default_rng([0, epoch[0]]).permutation(train_ids)
        for b, start in enumerate(range(0, order.size, bs)):
            yield b, order[start : start + bs]

    def train_epoch() -> None:
        for b, seeds in batches():
            blocks = sampler.sample(seeds, epoch[0], b)
            inputs = x.index_select(0, torch.from_numpy(blocks[0].src_global_ids))
            optimizer.zero_grad()
            loss = F.cross_entropy(model(blocks, inputs), y[torch.from_numpy(seeds)])
            loss.backward()
            optimizer.step()
        losses.append(float(loss.detach()))
        epoch[0] += 1

    result = measure(train_epoch, warmup=args.warmup, rounds=args.rounds)
    start = time.perf_counter()
    for b, seeds in batches():
        sampler.sample(seeds, epoch[0], b)
    sampler_s = time.perf_counter() - start
    result.update(
        {
            "impl": "strata",
            "seeds_per_s": train_ids.size / result["median_s"],
            "sampler_seeds_per_s": train_ids.size / sampler_s,
            "num_seeds": int(train_ids.size),
            "batch_size": bs,
            "fanouts": args.fanouts,
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "losses": losses,
        }
    )
    emit(result)


if __name__ == "__main__":
    main()
