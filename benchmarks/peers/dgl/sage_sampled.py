"""DGL sampled GraphSAGE training, the peer of operators/run_sage_sampled.py.

Runs in the DGL environment, never imports Strata, prints one JSON line. Same work
as the Strata runner: ``dgl.dataloading.NeighborSampler([10, 5])`` (layer order:
5 neighbours per seed, 10 per node of the next hop) feeding
``dgl.dataloading.DataLoader(batch_size=1024, shuffle=True, num_workers=0)`` over
``train_ids.npy``; per batch gather ``x.index_select(0, input_nodes)`` (the
fastest torch gather; DGL's own feature fetch is the same op), 2 x
``SAGEConv("mean")`` (128 -> 128 -> 16, ReLU, no dropout), cross-entropy,
backward, Adam step.
``sampler_seeds_per_s`` iterates the DataLoader alone for one epoch.

Usage: ``DGL_PYTHON sage_sampled.py --data DIR [--batch-size 1024 --fanouts 10 5]``.

``--serve`` keeps the process warm for an interleaved benchmark, as Strata's
runner: after one warm-up epoch (``cold_s``) it answers each stdin line ``train``
or ``sample`` with one JSON line timing one training epoch or one DataLoader-only
epoch, and ``quit`` with the losses and memory.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("DGLBACKEND", "pytorch")
warnings.filterwarnings("ignore")

import dgl  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from dgl.nn import SAGEConv  # noqa: E402
from dgl_harness import emit, measure  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--fanouts", type=int, nargs="+", default=[10, 5])
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--serve", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    indptr = torch.from_numpy(np.load(args.data / "indptr.npy"))
    indices = torch.from_numpy(np.load(args.data / "indices.npy").astype(np.int64))
    x = torch.from_numpy(np.load(args.data / "x.npy"))
    y = torch.from_numpy(np.load(args.data / "y.npy"))
    train_ids = torch.from_numpy(np.load(args.data / "train_ids.npy"))
    num_classes = int(y.max()) + 1
    graph = dgl.graph(("csr", (indptr, indices, torch.tensor([], dtype=torch.int64))))
    sampler = dgl.dataloading.NeighborSampler(args.fanouts)
    loader = dgl.dataloading.DataLoader(
        graph,
        train_ids,
        sampler,
        batch_size=args.batch_size,
        shuffle=True,
        drop_last=False,
        num_workers=0,
    )

    class DglSAGE(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList(
                [SAGEConv(x.shape[1], 128, "mean"), SAGEConv(128, num_classes, "mean")]
            )

        def forward(self, blocks, h):
            for i, (layer, block) in enumerate(zip(self.layers, blocks, strict=True)):
                h = layer(block, h)
                if i < len(self.layers) - 1:
                    h = F.relu(h)
            return h

    model = DglSAGE()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    losses = []

    def train_epoch() -> None:
        for input_nodes, output_nodes, blocks in loader:
            optimizer.zero_grad()
            inputs = x.index_select(0, input_nodes)
            loss = F.cross_entropy(model(blocks, inputs), y[output_nodes])
            loss.backward()
            optimizer.step()
        losses.append(float(loss.detach()))

    if args.serve:
        serve(train_epoch, loader, losses)
        return
    result = measure(train_epoch, warmup=args.warmup, rounds=args.rounds)
    start = time.perf_counter()
    for _ in loader:
        pass
    sampler_s = time.perf_counter() - start
    result.update(
        {
            "impl": "dgl",
            "layers": f"dgl {dgl.__version__} NeighborSampler + DataLoader, SAGEConv",
            "seeds_per_s": len(train_ids) / result["median_s"],
            "sampler_seeds_per_s": len(train_ids) / sampler_s,
            "num_seeds": len(train_ids),
            "batch_size": args.batch_size,
            "fanouts": args.fanouts,
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "losses": losses,
        }
    )
    emit(result)


def timed(work) -> dict:
    start, cpu = time.perf_counter(), time.process_time()
    work()
    return {"seconds": time.perf_counter() - start, "cpu_s": time.process_time() - cpu}


def sample_epoch(loader) -> None:
    for _ in loader:
        pass


def serve(train_epoch, loader, losses) -> None:
    """Warm up, then time one epoch per stdin command (see the module docs)."""
    cold = timed(train_epoch)["seconds"]
    sample_epoch(loader)
    emit(
        {
            "impl": "dgl",
            "layers": f"dgl {dgl.__version__} NeighborSampler + DataLoader, SAGEConv",
            "cold_s": cold,
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "ready": True,
        }
    )
    for line in sys.stdin:
        command = line.strip()
        if command == "train":
            emit(timed(train_epoch))
        elif command == "sample":
            emit(timed(lambda: sample_epoch(loader)))
        elif command == "quit":
            maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            emit({"losses": losses, "maxrss_mb": maxrss})
            return


if __name__ == "__main__":
    main()
