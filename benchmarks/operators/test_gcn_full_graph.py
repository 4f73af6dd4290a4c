"""Full-graph 2-layer GCN training epoch: Strata vs PyG (edge_index, CSR) vs DGL.

Large run (RMAT scale 18, edge factor 16: 262,144 nodes, 7,612,712 edges; 128
features, hidden 128, 16 classes; 2 CPU threads)::

    pytest benchmarks/operators/test_gcn_full_graph.py -m large -s \
        -p no:cacheprovider --benchmark-json=gcn.json

Every contender runs in its own process through the same harness (see
``run_gcn_epoch.py`` for the exact models and ``gnn_dataset.py`` for the graph):
2 warm-up epochs, then 5 timed; the figures are medians, and the ratios in
``extra_info`` (``strata_over_<peer>``, ``strata_over_fastest_peer``) come from
that one run. The pytest-benchmark statistics themselves time Strata's epoch in
this process (for ``--benchmark-compare`` gating). The smoke test runs Strata
alone on a scale-10 graph.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from gnn_contenders import dgl_runner, print_table, run_json, strata_runner
from gnn_dataset import load_graph

from strata.operators.layers import GCN

PEERS = ("pyg_csr", "pyg_edge_index", "dgl")


def _strata_step(data):
    torch.set_num_threads(2)
    graph = load_graph(data)
    x = torch.from_numpy(np.load(data / "x.npy"))
    y = torch.from_numpy(np.load(data / "y.npy"))
    torch.manual_seed(0)
    model = GCN(x.shape[1], 128, int(y.max()) + 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    losses = []

    def step():
        optimizer.zero_grad()
        loss = F.cross_entropy(model(graph, x), y)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))

    return step, losses


def test_gcn_epoch_smoke(benchmark, rmat_smoke):
    step, losses = _strata_step(rmat_smoke)
    benchmark.pedantic(step, rounds=3, warmup_rounds=1, iterations=1)
    assert np.isfinite(losses).all()


@pytest.mark.large
@pytest.mark.timeout(3600)  # minutes of work; the suite default is 300 s
def test_gcn_epoch_vs_peers(benchmark, rmat_large):
    results = {
        "strata": run_json(
            strata_runner("run_gcn_epoch.py", rmat_large, "--impl", "strata")
        )
    }
    notes = []
    for peer in PEERS:
        if peer == "dgl":
            argv = dgl_runner("gcn_epoch.py", rmat_large)
            if argv is None:
                notes.append("DGL skipped: no DGL environment (set STRATA_DGL_PYTHON)")
                continue
        else:
            argv = strata_runner("run_gcn_epoch.py", rmat_large, "--impl", peer)
        results[peer] = run_json(argv)

    strata = results["strata"]["median_s"]
    info = benchmark.extra_info
    info["dataset"] = "rmat scale 18, edge factor 16 (gnn_dataset.py)"
    info["threads"] = 2
    rows = [
        (
            "contender",
            "epoch s (median)",
            "min s",
            "cpu s",
            "strata / it",
            "peak RSS MB",
            "train MB",
        )
    ]
    for name, r in results.items():
        train_mb = r["peak_rss_mb"] - r["base_rss_mb"]
        info[f"{name}_epoch_s"] = r["median_s"]
        info[f"{name}_cpu_s"] = sorted(r["cpu_s"])[len(r["cpu_s"]) // 2]
        info[f"{name}_peak_rss_mb"] = r["peak_rss_mb"]
        info[f"{name}_train_mem_mb"] = train_mb
        if name != "strata":
            info[f"strata_over_{name}"] = strata / r["median_s"]
        rows.append(
            (
                name,
                f"{r['median_s']:.3f}",
                f"{r['min_s']:.3f}",
                f"{info[f'{name}_cpu_s']:.2f}",
                "1.00" if name == "strata" else f"{strata / r['median_s']:.2f}",
                f"{r['peak_rss_mb']:.0f}",
                f"{train_mb:.0f}",
            )
        )
    peers = {k: v["median_s"] for k, v in results.items() if k != "strata"}
    fastest = min(peers, key=peers.get)
    info["fastest_peer"] = fastest
    info["strata_over_fastest_peer"] = strata / peers[fastest]
    info["notes"] = notes
    # Same seed, same initialisation order: Strata and PyG start from one loss.
    if "pyg_csr" in results:
        info["first_loss_strata_pyg"] = [
            results["strata"]["losses"][0],
            results["pyg_csr"]["losses"][0],
        ]
    print_table(
        f"GCN full-graph epoch, RMAT-18 (fastest peer: {fastest}, "
        f"strata/fastest = {strata / peers[fastest]:.2f})",
        rows,
    )
    for note in notes:
        print(note)

    step, losses = _strata_step(rmat_large)
    benchmark.pedantic(step, rounds=3, warmup_rounds=1, iterations=1)
    assert np.isfinite(losses).all()
