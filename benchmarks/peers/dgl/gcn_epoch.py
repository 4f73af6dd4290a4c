"""DGL full-graph training epoch (GCN, SAGE or GAT), the peer of run_gcn_epoch.py.

Runs in the DGL environment (requirements.txt beside this file), never imports
Strata: reads the .npy dataset written by ``gnn_dataset.write_rmat_dataset`` and
prints one JSON line. Same models and step as the Strata runner
(``benchmarks/operators/run_gcn_epoch.py --model ...``): 2 layers, 128 -> 128 -> 16
with the dataset's widths, no dropout, Adam (lr 0.01, weight decay 5e-4),
cross-entropy over all nodes.

* ``--model gcn``: 2 ``GraphConv(norm="both")`` over the graph with one self-loop
  per node, ReLU between.
* ``--model sage``: 2 ``SAGEConv(aggregator_type="mean")`` (no self-loops), ReLU
  between.
* ``--model gat``: ``GATConv(128, 32, num_heads=4)`` (heads concatenated), ELU,
  ``GATConv(128, 16, num_heads=1)`` (heads averaged); negative slope 0.2, no
  feature or attention dropout, over the graph with one self-loop per node.

Usage: ``DGL_PYTHON gcn_epoch.py --data DIR [--model gcn --warmup 2 --rounds 5
--threads 2]``.
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
from dgl.nn import GATConv, GraphConv, SAGEConv  # noqa: E402
from dgl_harness import emit, measure  # noqa: E402

GAT_HEADS = 4  # hidden: 4 heads x 32 = 128 wide, as the Strata runner


def build(model: str, graph, looped, in_w: int, hidden: int, classes: int):
    """The model, its forward closure and a description."""
    if model == "gcn":

        class DglGCN(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.conv1 = GraphConv(in_w, hidden, norm="both")
                self.conv2 = GraphConv(hidden, classes, norm="both")

            def forward(self, x):
                return self.conv2(looped, F.relu(self.conv1(looped, x)))

        return DglGCN(), "GraphConv(norm='both') + add_self_loop"
    if model == "sage":

        class DglSAGE(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.conv1 = SAGEConv(in_w, hidden, "mean")
                self.conv2 = SAGEConv(hidden, classes, "mean")

            def forward(self, x):
                return self.conv2(graph, F.relu(self.conv1(graph, x)))

        return DglSAGE(), "SAGEConv(aggregator_type='mean')"

    class DglGAT(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = GATConv(in_w, hidden // GAT_HEADS, GAT_HEADS)
            self.conv2 = GATConv(hidden, classes, 1)

        def forward(self, x):
            h = F.elu(self.conv1(looped, x).flatten(1))
            return self.conv2(looped, h).mean(1)

    return (
        DglGAT(),
        f"GATConv({GAT_HEADS} heads x {hidden // GAT_HEADS}, 1) + add_self_loop",
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--model", choices=["gcn", "sage", "gat"], default="gcn")
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
    looped = dgl.add_self_loop(graph)  # the graph has none: one per node, as GCN/GAT
    model, layers = build(args.model, graph, looped, x.shape[1], 128, num_classes)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    losses = []

    def step() -> None:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))

    result = measure(step, warmup=args.warmup, rounds=args.rounds)
    result.update(
        {
            "impl": "dgl",
            "model": args.model,
            "layers": f"dgl {dgl.__version__} {layers}",
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "losses": losses,
        }
    )
    emit(result)


if __name__ == "__main__":
    main()
