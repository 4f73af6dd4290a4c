"""Sampled GraphSAGE training throughput (seeds/s): Strata vs DGL.

Large run (RMAT scale 18; 64k seeds, batch 1024, fan-outs (10, 5) in layer order;
2 CPU threads)::

    pytest benchmarks/operators/test_sage_sampled.py -m large -s \
        -p no:cacheprovider --benchmark-json=sage.json

Both contenders run in their own processes through one harness (1 warm-up epoch,
3 timed; ``run_sage_sampled.py`` and ``peers/dgl/sage_sampled.py`` say exactly what
a step does). PyG is not run: its ``NeighborLoader`` needs pyg-lib or
torch-sparse, compiled extensions that are not on PyPI. ``extra_info`` holds
seeds/s for training and for sampling alone, the ratios, and peak memory. The
pytest-benchmark statistics time one Strata epoch in this process.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from gnn_contenders import (
    PYG_SAMPLER_NOTE,
    dgl_runner,
    print_table,
    run_json,
    strata_runner,
)
from gnn_dataset import load_graph

from strata.operators.layers import GraphSAGE
from strata.operators.samplers import NeighborSampler, SamplerConfig


def _strata_epoch(data, batch_size=1024):
    torch.set_num_threads(2)
    graph = load_graph(data)
    x = torch.from_numpy(np.load(data / "x.npy"))
    y = torch.from_numpy(np.load(data / "y.npy"))
    train_ids = np.load(data / "train_ids.npy")
    sampler = NeighborSampler(graph, SamplerConfig((10, 5)), seed=0)
    torch.manual_seed(0)
    model = GraphSAGE(x.shape[1], 128, int(y.max()) + 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    state = {"epoch": 0, "losses": []}

    def epoch():
        order = np.random.default_rng([0, state["epoch"]]).permutation(train_ids)
        for b, start in enumerate(range(0, order.size, batch_size)):
            seeds = order[start : start + batch_size]
            blocks = sampler.sample(seeds, state["epoch"], b)
            inputs = x.index_select(0, torch.from_numpy(blocks[0].src_global_ids))
            optimizer.zero_grad()
            loss = F.cross_entropy(model(blocks, inputs), y[torch.from_numpy(seeds)])
            loss.backward()
            optimizer.step()
        state["losses"].append(float(loss.detach()))
        state["epoch"] += 1

    return epoch, state


def test_sage_sampled_smoke(benchmark, rmat_smoke):
    epoch, state = _strata_epoch(rmat_smoke, batch_size=256)
    benchmark.pedantic(epoch, rounds=2, warmup_rounds=1, iterations=1)
    assert np.isfinite(state["losses"]).all()
    benchmark.extra_info["pyg"] = PYG_SAMPLER_NOTE


@pytest.mark.large
@pytest.mark.timeout(3600)  # minutes of work; the suite default is 300 s
def test_sage_sampled_vs_dgl(benchmark, rmat_large):
    results = {"strata": run_json(strata_runner("run_sage_sampled.py", rmat_large))}
    notes = [PYG_SAMPLER_NOTE]
    argv = dgl_runner("sage_sampled.py", rmat_large)
    if argv is None:
        notes.append("DGL skipped: no DGL environment (set STRATA_DGL_PYTHON)")
    else:
        results["dgl"] = run_json(argv)

    info = benchmark.extra_info
    info["dataset"] = "rmat scale 18, edge factor 16 (gnn_dataset.py)"
    info.update({"threads": 2, "batch_size": 1024, "fanouts": [10, 5], "seeds": 65536})
    rows = [
        (
            "contender",
            "seeds/s",
            "strata / it",
            "epoch cpu s",
            "sampler seeds/s",
            "peak RSS MB",
            "train MB",
        )
    ]
    strata = results["strata"]["seeds_per_s"]
    for name, r in results.items():
        train_mb = r["peak_rss_mb"] - r["base_rss_mb"]
        info[f"{name}_seeds_per_s"] = r["seeds_per_s"]
        info[f"{name}_epoch_cpu_s"] = sorted(r["cpu_s"])[len(r["cpu_s"]) // 2]
        info[f"{name}_sampler_seeds_per_s"] = r["sampler_seeds_per_s"]
        info[f"{name}_peak_rss_mb"] = r["peak_rss_mb"]
        info[f"{name}_train_mem_mb"] = train_mb
        ratio = strata / r["seeds_per_s"]
        if name != "strata":
            info[f"strata_over_{name}"] = ratio
            info[f"strata_over_{name}_sampler"] = (
                results["strata"]["sampler_seeds_per_s"] / r["sampler_seeds_per_s"]
            )
        rows.append(
            (
                name,
                f"{r['seeds_per_s']:.0f}",
                f"{ratio:.2f}",
                f"{info[f'{name}_epoch_cpu_s']:.2f}",
                f"{r['sampler_seeds_per_s']:.0f}",
                f"{r['peak_rss_mb']:.0f}",
                f"{train_mb:.0f}",
            )
        )
    info["notes"] = notes
    print_table("Sampled GraphSAGE training, RMAT-18 (seeds/s; higher is better)", rows)
    for note in notes:
        print(note)

    epoch, state = _strata_epoch(rmat_large)
    benchmark.pedantic(epoch, rounds=2, warmup_rounds=1, iterations=1)
    assert np.isfinite(state["losses"]).all()
