"""DGL full recompute per update batch: a peer of the streaming benchmark (serve mode).

Runs in the DGL environment (``/work/dgl-env/bin/python``; no Strata import).
:mod:`peer_harness` writes the starting graph, the features, the model weights and
every update batch to ``--data``, starts this process and drives it over stdin:

* ``run I J``: apply batches ``I..J-1``, each followed by a full forward of DGL's
  ``SAGEConv("mean")`` layers over the current graph; answers one JSON line with the
  wall and CPU seconds of every batch (applying the batch to the graph included);
* ``dump PATH``: save the current embeddings (``.npy``) for the exactness check;
* ``quit``.

The graph is kept as a destination-sorted COO (deletes located by binary search,
additions inserted at their sorted position) and handed to DGL as CSC, so DGL
needs no sort per batch. Weights: ``fc_neigh = W_l``, ``fc_self = W_r`` with the
bias of ``W_l`` (DGL puts the bias on ``fc_self``; the sum is the same).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import dgl
import numpy as np
import torch
from dgl.nn import SAGEConv


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Runner:
    def __init__(self, data: Path) -> None:
        g = np.load(data / "graph.npz")
        order = np.argsort(g["dst"], kind="stable")
        self.col = np.ascontiguousarray(g["src"].astype(np.int64)[order])
        self.row = np.ascontiguousarray(g["dst"].astype(np.int64)[order])
        self.n = int(g["num_nodes"])
        self.x = torch.from_numpy(np.load(data / "x.npy"))
        weights = np.load(data / "weights.npz")
        self.convs = torch.nn.ModuleList()
        for i in range(int(weights["layers"])):
            w_l = torch.from_numpy(weights[f"{i}.lin_l.weight"])
            conv = SAGEConv(w_l.shape[1], w_l.shape[0], "mean")
            with torch.no_grad():
                conv.fc_neigh.weight.copy_(w_l)
                conv.fc_self.weight.copy_(
                    torch.from_numpy(weights[f"{i}.lin_r.weight"])
                )
                conv.fc_self.bias.copy_(torch.from_numpy(weights[f"{i}.lin_l.bias"]))
            self.convs.append(conv)
        self.convs.eval()
        self.batches = np.load(data / "batches.npz")
        # strata.storage.UpdateKind values, as the writer stored them
        self.kinds = {k: int(self.batches[k]) for k in ("add", "remove", "set")}
        self.table = self.forward()

    def apply(self, b: int) -> None:
        kind = self.batches[f"{b}.kind"]
        src, dst = self.batches[f"{b}.src"], self.batches[f"{b}.dst"]
        dels = kind == self.kinds["remove"]
        if dels.any():
            doomed: list[int] = []
            for s, d in zip(src[dels], dst[dels], strict=True):
                lo, hi = np.searchsorted(self.row, [d, d + 1])
                hits = lo + np.flatnonzero(self.col[lo:hi] == s)
                free = [h for h in hits.tolist() if h not in doomed]
                if free:
                    doomed.append(free[0])
            self.col = np.delete(self.col, doomed)
            self.row = np.delete(self.row, doomed)
        adds = kind == self.kinds["add"]
        if adds.any():
            order = np.argsort(dst[adds], kind="stable")
            s, d = src[adds][order], dst[adds][order]
            at = np.searchsorted(self.row, d, side="right")
            self.col = np.insert(self.col, at, s)
            self.row = np.insert(self.row, at, d)
        sets = np.flatnonzero(kind == self.kinds["set"])
        nodes, feats = self.batches[f"{b}.node"], self.batches[f"{b}.feature"]
        for i in sets:  # in row order: the last write of a node wins
            self.x[int(nodes[i])] = torch.from_numpy(feats[i])

    def forward(self) -> np.ndarray:
        indptr = np.zeros(self.n + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.row, minlength=self.n), out=indptr[1:])
        graph = dgl.graph(
            (
                "csc",
                (
                    torch.from_numpy(indptr),
                    torch.from_numpy(self.col),
                    torch.tensor([], dtype=torch.int64),
                ),
            ),
            num_nodes=self.n,
        )
        h = self.x
        with torch.no_grad():
            for i, conv in enumerate(self.convs):
                h = conv(graph, h)
                if i < len(self.convs) - 1:
                    h = torch.relu(h)
        return h.numpy()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    runner = Runner(args.data)
    emit(
        {
            "ready": True,
            "peer": f"DGL {dgl.__version__} (torch {torch.__version__.split('+')[0]})",
            "threads": torch.get_num_threads(),
            "load_s": time.perf_counter() - start,
        }
    )
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "run":
            wall, cpu = [], []
            for b in range(int(words[1]), int(words[2])):
                t, c = time.perf_counter(), time.process_time()
                runner.apply(b)
                runner.table = runner.forward()
                wall.append(time.perf_counter() - t)
                cpu.append(time.process_time() - c)
            emit({"wall": wall, "cpu": cpu})
        elif words[0] == "dump":
            np.save(words[1], runner.table)
            emit({"dumped": words[1]})
        elif words[0] == "quit":
            emit({"bye": True})
            return


if __name__ == "__main__":
    main()
