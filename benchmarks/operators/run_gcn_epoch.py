"""One full-graph GCN training contender in its own process; prints JSON.

Usage: ``python run_gcn_epoch.py --impl {strata,pyg_edge_index,pyg_csr} --data DIR``.

Every contender trains the same model on the same data: 2 layers (128 -> 128 ->
16 with the dataset's widths), ReLU between, no dropout (it is the same torch op in
every library and costs about as much as one aggregation on this graph, so it
would only dilute the comparison), Adam (lr 0.01, weight decay 5e-4), cross-entropy
over all nodes. One timed step = forward + backward + optimizer step.

* ``strata``: ``strata.operators.layers.GCN`` over the ``CSRGraph``.
* ``pyg_edge_index``: two ``torch_geometric.nn.GCNConv(cached=True)`` over a
  ``[2, E]`` int64 ``edge_index`` (gather-scatter message passing).
* ``pyg_csr``: the same layers over ``adj_t``, a ``torch.sparse_csr_tensor``
  holding the in-adjacency (``torch_sparse.SparseTensor`` needs the compiled
  ``torch-sparse``, which is not on PyPI). PyG 2.8's ``GCNConv`` normalises it in
  ``gcn_norm`` (once, ``cached=True``) and propagates with
  ``message_and_aggregate`` -> ``torch_geometric.utils.spmm`` -> torch's CSR
  matmul. (``torch_geometric.EdgeIndex`` also works but ran 3x slower here.)
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from gnn_harness import emit, measure


def build_strata(data: Path, x: torch.Tensor, num_classes: int):
    from gnn_dataset import load_graph

    from strata.operators.layers import GCN

    graph = load_graph(data)
    model = GCN(x.shape[1], 128, num_classes, num_layers=2)
    return model, lambda: model(graph, x), {"layers": "strata.operators.layers.GCN"}


def build_pyg(data: Path, x: torch.Tensor, num_classes: int, csr: bool):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torch_geometric
        from torch_geometric.nn import GCNConv

    indptr = torch.from_numpy(np.load(data / "indptr.npy"))
    indices = torch.from_numpy(np.load(data / "indices.npy").astype(np.int64))
    n = indptr.shape[0] - 1
    if csr:
        # The graph is symmetric: its CSR is also the in-adjacency adj_t[dst, src].
        adj = torch.sparse_csr_tensor(
            indptr, indices, torch.ones(indices.shape[0]), (n, n)
        )
        form = "adj_t = torch.sparse_csr_tensor (in-adjacency)"
    else:
        src = torch.repeat_interleave(torch.arange(n), indptr.diff())
        adj = torch.stack([src, indices])
        form = "edge_index [2, E] int64"

    class PygGCN(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = GCNConv(x.shape[1], 128, cached=True)
            self.conv2 = GCNConv(128, num_classes, cached=True)

        def forward(self) -> torch.Tensor:
            return self.conv2(self.conv1(x, adj).relu(), adj)

    model = PygGCN()
    info = {
        "layers": f"torch_geometric {torch_geometric.__version__} GCNConv(cached=True)",
        "input": form,
    }
    return model, model.forward, info


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--impl", required=True, choices=["strata", "pyg_edge_index", "pyg_csr"]
    )
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    warnings.filterwarnings("ignore", message="Sparse invariant checks")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.impl == "strata":
        import numba

        numba.set_num_threads(args.threads)
    x = torch.from_numpy(np.load(args.data / "x.npy"))
    y = torch.from_numpy(np.load(args.data / "y.npy"))
    num_classes = int(y.max()) + 1
    if args.impl == "strata":
        model, forward, info = build_strata(args.data, x, num_classes)
    else:
        model, forward, info = build_pyg(
            args.data, x, num_classes, args.impl == "pyg_csr"
        )
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    losses = []

    def step() -> None:
        optimizer.zero_grad()
        loss = F.cross_entropy(forward(), y)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))

    result = measure(step, warmup=args.warmup, rounds=args.rounds)
    result.update(info)
    result.update(
        {
            "impl": args.impl,
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "losses": losses,
        }
    )
    emit(result)


if __name__ == "__main__":
    main()
