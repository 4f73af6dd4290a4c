"""DGL full-graph GCN training epoch, the peer of operators/run_gcn_epoch.py.

Runs in the DGL environment (requirements.txt beside this file), never imports
Strata: reads the .npy dataset written by ``gnn_dataset.write_rmat_dataset`` and
prints one JSON line. Same model and step as the Strata runner: 2 ``GraphConv``
layers (norm="both", the GCN normalisation) over the graph with one self-loop per
node, ReLU between, no dropout, Adam (lr 0.01, weight decay 5e-4), cross-entropy
over all nodes.

Usage: ``DGL_PYTHON gcn_epoch.py --data DIR [--warmup 2 --rounds 5 --threads 2]``.
"""

from __future__ import annotations

import argparse
import os
import warnings
from pathlib import Path

os.environ.setdefault("DGLBACKEND", "pytorch")
warnings.filterwarnings("ignore")

import dgl  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from dgl.nn import GraphConv  # noqa: E402
from dgl_harness import emit, measure  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    indptr = torch.from_numpy(np.load(args.data / "indptr.npy"))
    indices = torch.from_numpy(np.load(args.data / "indices.npy").astype(np.int64))
    x = torch.from_numpy(np.load(args.data / "x.npy"))
    y = torch.from_numpy(np.load(args.data / "y.npy"))
    num_classes = int(y.max()) + 1
    graph = dgl.graph(("csr", (indptr, indices, torch.tensor([], dtype=torch.int64))))
    graph = dgl.add_self_loop(graph)  # the graph has none: one per node, as GCN

    class DglGCN(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = GraphConv(x.shape[1], 128, norm="both")
            self.conv2 = GraphConv(128, num_classes, norm="both")

        def forward(self) -> torch.Tensor:
            return self.conv2(graph, F.relu(self.conv1(graph, x)))

    model = DglGCN()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    losses = []

    def step() -> None:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(), y)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))

    result = measure(step, warmup=args.warmup, rounds=args.rounds)
    result.update(
        {
            "impl": "dgl",
            "layers": f"dgl {dgl.__version__} GraphConv(norm='both') + add_self_loop",
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "losses": losses,
        }
    )
    emit(result)


if __name__ == "__main__":
    main()
