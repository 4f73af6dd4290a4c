"""One full-graph training contender (GCN, SAGE or GAT) in its own process; JSON out.

Usage: ``python run_gcn_epoch.py --impl {strata,strata_noreuse,pyg_edge_index,pyg_csr}
--model {gcn,sage,gat} --data DIR``.

Every contender trains the same model on the same data: 2 layers (128 -> 128 ->
16 with the dataset's widths), no dropout (it is the same torch op in every library
and costs about as much as one aggregation on this graph, so it would only dilute
the comparison), Adam (lr 0.01, weight decay 5e-4), cross-entropy over all nodes.
One timed step = forward + backward + optimizer step. The models (the DGL peer,
``benchmarks/peers/dgl/gcn_epoch.py``, builds the same):

* ``gcn``: 2 GCN convolutions (symmetric normalisation, self-loops), ReLU between;
* ``sage``: 2 GraphSAGE convolutions, mean aggregator, ReLU between;
* ``gat``: GAT 128 -> 4 heads x 32 (concatenated), ELU, -> 1 head x 16; negative
  slope 0.2, no attention dropout, self-loops.

Contenders:

* ``strata``: ``strata.operators.layers.GCN`` / ``GraphSAGE`` / ``GAT`` over the
  ``CSRGraph``, as a user runs them: the first layer's aggregate of the constant
  input features is computed in the first (warm-up) epoch and reused
  (``strata.operators.kernels.reuse``).
* ``strata_noreuse``: the same with that reuse turned off: every epoch runs every
  kernel (the "kernel-only" figure).
* ``pyg_edge_index``: the same layers of ``torch_geometric.nn``
  (``GCNConv(cached=True)``, ``SAGEConv``, ``GATConv``) over a ``[2, E]`` int64
  ``edge_index`` (gather-scatter message passing).
* ``pyg_csr`` (GCN and SAGE): the same layers over ``adj_t``, a
  ``torch.sparse_csr_tensor`` holding the in-adjacency
  (``torch_sparse.SparseTensor`` needs the compiled ``torch-sparse``, which is
  not on PyPI). PyG 2.8's ``GCNConv`` normalises it in ``gcn_norm`` (once,
  ``cached=True``) and propagates with
  ``message_and_aggregate`` -> ``torch_geometric.utils.spmm`` -> torch's CSR
  matmul. (``torch_geometric.EdgeIndex`` also works but ran 3x slower here.)
"""

from __future__ import annotations

import argparse
import contextlib
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from gnn_harness import emit, measure

GAT_HEADS = 4  # hidden: 4 heads x 32 = 128 wide


def build_strata(data: Path, x: torch.Tensor, num_classes: int, model_name: str):
    from gnn_dataset import load_graph

    from strata.operators.layers import GAT, GCN, GraphSAGE

    graph = load_graph(data)
    if model_name == "gcn":
        model = GCN(x.shape[1], 128, num_classes, num_layers=2)
    elif model_name == "sage":
        model = GraphSAGE(x.shape[1], 128, num_classes, num_layers=2, aggr="mean")
    else:
        model = GAT(
            x.shape[1], 128 // GAT_HEADS, num_classes, heads=GAT_HEADS, output_heads=1
        )
    info = {"layers": f"strata.operators.layers.{type(model).__name__}"}
    return model, lambda: model(graph, x), info


def build_pyg(
    data: Path, x: torch.Tensor, num_classes: int, csr: bool, model_name: str
):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torch_geometric
        from torch_geometric.nn import GATConv, GCNConv, SAGEConv

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

    class PygModel(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            if model_name == "gcn":
                self.conv1 = GCNConv(x.shape[1], 128, cached=True)
                self.conv2 = GCNConv(128, num_classes, cached=True)
            elif model_name == "sage":
                self.conv1 = SAGEConv(x.shape[1], 128, aggr="mean")
                self.conv2 = SAGEConv(128, num_classes, aggr="mean")
            else:
                self.conv1 = GATConv(x.shape[1], 128 // GAT_HEADS, heads=GAT_HEADS)
                self.conv2 = GATConv(128, num_classes, heads=1, concat=False)

        def forward(self) -> torch.Tensor:
            h = self.conv1(x, adj)
            h = F.elu(h) if model_name == "gat" else h.relu()
            return self.conv2(h, adj)

    model = PygModel()
    layers = type(model.conv1).__name__
    if model_name == "gcn":
        layers += "(cached=True)"
    info = {
        "layers": f"torch_geometric {torch_geometric.__version__} {layers}",
        "input": form,
    }
    return model, model.forward, info


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--impl",
        required=True,
        choices=["strata", "strata_noreuse", "pyg_edge_index", "pyg_csr"],
    )
    parser.add_argument("--model", choices=["gcn", "sage", "gat"], default="gcn")
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    warnings.filterwarnings("ignore", message="Sparse invariant checks")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    strata = args.impl.startswith("strata")
    if strata:
        import numba

        numba.set_num_threads(args.threads)
    x = torch.from_numpy(np.load(args.data / "x.npy"))
    y = torch.from_numpy(np.load(args.data / "y.npy"))
    num_classes = int(y.max()) + 1
    if strata:
        from strata.operators.kernels.reuse import reuse_constant_aggregates

        model, forward, info = build_strata(args.data, x, num_classes, args.model)
        reuse = reuse_constant_aggregates(args.impl == "strata")
    else:
        model, forward, info = build_pyg(
            args.data, x, num_classes, args.impl == "pyg_csr", args.model
        )
        reuse = contextlib.nullcontext()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    losses = []

    def step() -> None:
        optimizer.zero_grad()
        loss = F.cross_entropy(forward(), y)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))

    with reuse:
        result = measure(step, warmup=args.warmup, rounds=args.rounds)
    result.update(info)
    result.update(
        {
            "impl": args.impl,
            "model": args.model,
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "losses": losses,
        }
    )
    emit(result)


if __name__ == "__main__":
    main()
