"""Sampled GraphSAGE training with Strata, in its own process; prints JSON lines.

Usage::

    python run_sage_sampled.py --data DIR [--path fused|plain] [--serve]

The training seeds are ``train_ids.npy`` (64k non-isolated nodes at scale 18),
shuffled per epoch, cut into batches of 1024. The model is ``GraphSAGE`` (2 x
SAGEConv mean, 128 -> 128 -> 16, ReLU, no dropout), cross-entropy, Adam (lr 0.003).
Fan-outs are in layer order, as DGL's: ``(10, 5)`` samples 5 neighbours per seed
and 10 per node of the hop after.

Two paths, the same maths:

* ``fused`` (what the sampled trainer runs): a ``Prefetcher`` thread calls
  ``BlockBatches.prepare`` per batch: the sampler's last hop in global ids, the
  first layer's mean and root rows straight from the feature table, and the second
  block's structures; the training thread runs ``BlockBatches.forward`` (the first
  layer's dense part, then the second layer; dense products on oneDNN unless
  ``--dense torch``), backward and the Adam step. Of ``--threads 2``, torch gets 1
  beside the prefetch thread, as in ``SampledTrainer``.
* ``plain`` (the unoptimised reference, ``--threads`` torch threads, no prefetch
  thread): ``NeighborSampler.sample`` ->
  ``x.index_select(0, blocks[0].src_global_ids)`` -> ``model(blocks, x)`` ->
  backward -> Adam, as DGL's runner does.

``--serve`` keeps the process warm for an interleaved benchmark: after loading and
one warm-up epoch (its seconds are reported as ``cold_s``: numba compilation and
first touches), it answers each stdin line ``train`` or ``sample`` with one JSON
line timing one training epoch or one sampler-only epoch (``NeighborSampler.sample``
per batch, the same blocks for either path), and ``quit`` with the losses and
memory. Without ``--serve`` it runs ``--rounds`` epochs and prints one summary.
``--check-losses`` trains one epoch on each path from the same initial weights and
prints the largest per-batch loss difference.
"""

from __future__ import annotations

import argparse
import copy
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numba
import numpy as np
import torch
import torch.nn.functional as F
from gnn_dataset import load_graph
from gnn_harness import emit

from strata.operators.layers import GraphSAGE
from strata.operators.samplers import NeighborSampler, SamplerConfig
from strata.operators.trainers.block_batches import BlockBatches
from strata.operators.trainers.prefetch import Prefetcher


class Runner:
    """The model, data and both training paths of one process."""

    def __init__(self, args: argparse.Namespace) -> None:
        data = args.data
        self.graph = load_graph(data)
        self.x = torch.from_numpy(np.load(data / "x.npy"))
        self.y = torch.from_numpy(np.load(data / "y.npy"))
        self.train_ids = np.load(data / "train_ids.npy")
        self.batch_size = args.batch_size
        self.depth = args.prefetch
        self.sampler = NeighborSampler(
            self.graph, SamplerConfig(tuple(args.fanouts)), seed=0
        )
        torch.manual_seed(0)
        num_classes = int(self.y.max()) + 1
        self.model = GraphSAGE(
            self.x.shape[1], 128, num_classes, num_layers=len(args.fanouts)
        )
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=0.003)
        self.batches = BlockBatches(
            self.sampler, self.x, self.model, onednn=args.dense == "onednn"
        )
        assert self.batches.fused
        self.epoch = 0
        self.losses: list[float] = []

    def _seeds(self, epoch: int) -> list[np.ndarray]:
        order = np.random.default_rng([0, epoch]).permutation(self.train_ids)
        return [
            order[s : s + self.batch_size]
            for s in range(0, order.size, self.batch_size)
        ]

    def _step(self, out: torch.Tensor, seeds: np.ndarray) -> float:
        loss = F.cross_entropy(out, self.y[torch.from_numpy(seeds)])
        loss.backward()
        self.optimizer.step()
        return float(loss.detach())

    def fused_epoch(self) -> list[float]:
        """One epoch: prepare batches in a prefetch thread, step in this one."""
        epoch, seeds = self.epoch, self._seeds(self.epoch)
        batches = self.batches

        def produce(index: int) -> tuple[object, np.ndarray]:
            return batches.prepare(seeds[index], epoch, index), seeds[index]

        losses = []
        with Prefetcher(produce, len(seeds), self.depth) as prefetcher:
            for batch, batch_seeds in prefetcher:
                self.optimizer.zero_grad()
                out = batches.forward(self.model, batch)  # type: ignore[arg-type]
                losses.append(self._step(out, batch_seeds))
        self.epoch += 1
        return losses

    def plain_epoch(self) -> list[float]:
        """One epoch of the unoptimised loop (the DGL runner's shape)."""
        epoch, losses = self.epoch, []
        for index, seeds in enumerate(self._seeds(epoch)):
            blocks = self.sampler.sample(seeds, epoch, index)
            inputs = self.x.index_select(0, torch.from_numpy(blocks[0].src_global_ids))
            self.optimizer.zero_grad()
            losses.append(self._step(self.model(blocks, inputs), seeds))
        self.epoch += 1
        return losses

    def sampler_epoch(self) -> None:
        """Sample every batch of an epoch (blocks only), as the DGL loader alone."""
        for index, seeds in enumerate(self._seeds(self.epoch)):
            self.sampler.sample(seeds, self.epoch, index)


def check_losses(runner: Runner) -> list[float]:
    """Per-batch loss differences of one epoch, fused against plain."""
    model = copy.deepcopy(runner.model)
    optimizer = copy.deepcopy(runner.optimizer)
    epoch = runner.epoch
    fused = runner.fused_epoch()
    runner.model, runner.epoch = model, epoch
    runner.optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    runner.optimizer.load_state_dict(optimizer.state_dict())
    plain = runner.plain_epoch()
    return np.abs(np.array(fused) - np.array(plain)).tolist()


def timed(work: Callable[[], object]) -> dict[str, float]:
    start, cpu = time.perf_counter(), time.process_time()
    work()
    return {
        "seconds": time.perf_counter() - start,
        "cpu_s": time.process_time() - cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--fanouts", type=int, nargs="+", default=[10, 5])
    parser.add_argument("--path", choices=["fused", "plain"], default="fused")
    parser.add_argument("--prefetch", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=0,
        help="torch threads of the training thread (default: --threads, less "
        "one core for the prefetch thread on the fused path)",
    )
    parser.add_argument("--dense", choices=["onednn", "torch"], default="onednn")
    parser.add_argument("--serve", action="store_true")
    parser.add_argument("--check-losses", action="store_true")
    args = parser.parse_args()
    torch_threads = args.torch_threads or (
        max(1, args.threads - 1) if args.path == "fused" else args.threads
    )
    torch.set_num_threads(torch_threads)
    numba.set_num_threads(args.threads)
    runner = Runner(args)
    if args.check_losses:
        diffs = check_losses(runner)
        emit(
            {
                "impl": "strata",
                "dense": args.dense,
                "max_loss_diff": max(diffs),
                "max_loss_diff_first_10": max(diffs[:10]),
                "loss_diffs": diffs,
            }
        )
        return
    train = runner.fused_epoch if args.path == "fused" else runner.plain_epoch

    def train_epoch() -> None:
        runner.losses.append(train()[-1])

    cold = timed(train_epoch)["seconds"]
    for _ in range(args.warmup - 1):
        train_epoch()
    runner.sampler_epoch()
    info = {
        "impl": f"strata-{args.path}",
        "cold_s": cold,
        "num_seeds": int(runner.train_ids.size),
        "batch_size": args.batch_size,
        "fanouts": args.fanouts,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }
    if not args.serve:
        times = [timed(train_epoch)["seconds"] for _ in range(args.rounds)]
        sampler_s = timed(runner.sampler_epoch)["seconds"]
        median = sorted(times)[len(times) // 2]
        info.update(
            times_s=times,
            seeds_per_s=runner.train_ids.size / median,
            sampler_seeds_per_s=runner.train_ids.size / sampler_s,
            losses=runner.losses,
        )
        emit(info)
        return
    emit({**info, "ready": True})
    for line in sys.stdin:
        command = line.strip()
        if command == "train":
            emit(timed(train_epoch))
        elif command == "sample":
            emit(timed(runner.sampler_epoch))
        elif command == "quit":
            maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            emit({"losses": runner.losses, "maxrss_mb": maxrss})
            return


if __name__ == "__main__":
    main()
