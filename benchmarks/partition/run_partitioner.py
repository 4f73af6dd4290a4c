"""One benchmark process: load a suite graph, warm up, partition it for each seed.

Usage (the parent ``test_partition_suite.py`` calls it)::

    python benchmarks/partition/run_partitioner.py --graph-dir DIR --method M \
        --k K --seeds 1,2,3

Methods: ``metis`` (Strata's multilevel), ``pymetis`` (METIS 5 k-way),
``pymetis-rb`` (recursive bisection), ``grem`` and ``grem-norefine`` (edge file
stream), ``streaming`` (LDG, Fennel, their 5-pass restreams, hash, random, HDRF,
GREM without refinement and pymetis recursive bisection in one process; cut and
time only). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operators"))
from gnn_harness import RssPoller  # the RSS sampler the GNN benchmarks share
from partition_harness import FileEdgeChunks, load_csr


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _reset_peak() -> int:
    """Reset the kernel's RSS high-water mark (Linux clear_refs); return RSS now."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    return int(psutil.Process().memory_info().rss)


def _peak(poller: RssPoller, base: int) -> int:
    """Extra peak RSS of the runs over ``base``: the kernel's high-water mark since
    :func:`_reset_peak` (C code holding the GIL, like pymetis, stops the sampler),
    or the sampled peak when that is higher or the mark is unavailable."""
    hwm = _status_kb("VmHWM") * 1024
    return int(max(poller.peak, hwm) - base)


def _tiny() -> Any:
    from strata.storage.generators import sbm

    return sbm(400, 4, avg_degree=8, seed=0)[0]


def _imbalance(assignment: np.ndarray, k: int) -> float:
    sizes = np.bincount(assignment, minlength=k)
    return float(sizes.max() * k / assignment.size)


def _edge_balance(indptr: np.ndarray, a: np.ndarray, k: int) -> float:
    """``max_p sum of degrees / (2m / k)`` (``strata.partition.metrics``)."""
    degree = np.diff(indptr).astype(np.float64)
    sums = np.bincount(a, weights=degree, minlength=k)
    return float(sums.max() * k / degree.sum())


def _cut(indptr: np.ndarray, indices: np.ndarray, a: np.ndarray) -> int:
    src = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    return int(np.count_nonzero(a[src] != a[indices]) // 2)


def run_csr_method(
    method: str, folder: Path, k: int, seeds: list[int]
) -> dict[str, Any]:
    """Multilevel or pymetis on the CSR."""
    from strata.partition import MultilevelPartitioner

    start = time.perf_counter()
    graph = load_csr(folder)
    load_s = time.perf_counter() - start
    if method == "metis":

        def run(g: Any, seed: int) -> np.ndarray:
            assignment: np.ndarray = (
                MultilevelPartitioner(k, seed=seed).partition(g).assignment
            )
            return assignment
    else:
        import pymetis

        recursive = method == "pymetis-rb"

        def run(g: Any, seed: int) -> np.ndarray:
            adjacency = pymetis.CSRAdjacency(
                g.indptr.astype(np.int32), g.indices.astype(np.int32)
            )
            options = pymetis.Options(seed=seed, ufactor=30)
            _, parts = pymetis.part_graph(
                k, adjacency, recursive=recursive, options=options
            )
            return np.asarray(parts, dtype=np.int32)

    start = time.perf_counter()
    run(_tiny(), 0)
    warmup_s = time.perf_counter() - start
    base = _reset_peak()
    out: dict[str, list[float]] = {
        "cut": [],
        "imbalance": [],
        "edge_balance": [],
        "seconds": [],
        "cpu": [],
    }
    with RssPoller() as poller:
        for seed in seeds:
            wall = time.perf_counter()
            cpu = time.process_time()
            a = run(graph, seed)
            out["seconds"].append(time.perf_counter() - wall)
            out["cpu"].append(time.process_time() - cpu)
            out["cut"].append(_cut(graph.indptr, graph.indices, a))
            out["imbalance"].append(_imbalance(a, k))
            out["edge_balance"].append(_edge_balance(graph.indptr, a, k))
    return {
        **out,
        "load_s": load_s,
        "warmup_s": warmup_s,
        "peak_rss_bytes": _peak(poller, base),
    }


def run_grem(folder: Path, k: int, seeds: list[int], refine: bool) -> dict[str, Any]:
    """GREM reading the shuffled edge file chunk by chunk."""
    from strata.partition import GremPartitioner

    start = time.perf_counter()
    num_nodes = int(np.load(folder / "indptr.npy", mmap_mode="r").shape[0] - 1)
    stream = FileEdgeChunks(folder / "edges.bin", num_nodes)
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    from strata.partition import ArrayEdgeChunks
    from strata.partition.metrics import undirected_edges

    tiny_src, tiny_dst = undirected_edges(_tiny())
    GremPartitioner(k=4, refine=refine).partition_stream(
        ArrayEdgeChunks(tiny_src, tiny_dst), 400
    )
    warmup_s = time.perf_counter() - start
    base = _reset_peak()
    out: dict[str, list[float]] = {
        "cut": [],
        "imbalance": [],
        "edge_balance": [],
        "seconds": [],
        "cpu": [],
    }
    phases: dict[str, float] = {}
    with RssPoller() as poller:
        for seed in seeds:
            wall = time.perf_counter()
            cpu = time.process_time()
            p = GremPartitioner(k, seed=seed, refine=refine).partition_stream(
                stream, num_nodes
            )
            out["seconds"].append(time.perf_counter() - wall)
            out["cpu"].append(time.process_time() - cpu)
            out["cut"].append(p.report.edge_cut)
            out["imbalance"].append(p.report.vertex_balance)
            out["edge_balance"].append(p.report.edge_balance)
            phases = dict(p.report.phase_seconds)
    return {
        **out,
        "load_s": load_s,
        "warmup_s": warmup_s,
        "peak_rss_bytes": _peak(poller, base),
        "phases": phases,
    }


def run_streaming(folder: Path, k: int, seeds: list[int]) -> dict[str, Any]:
    """The cheap baselines and the ablation in one process (no memory figure)."""
    from strata.partition import (
        FennelPartitioner,
        HashPartitioner,
        HDRFPartitioner,
        LDGPartitioner,
        RandomPartitioner,
    )

    graph = load_csr(folder)
    makers = {
        "ldg": lambda s: LDGPartitioner(k, seed=s),
        "fennel": lambda s: FennelPartitioner(k, seed=s),
        "ldg-x5": lambda s: LDGPartitioner(k, passes=5, seed=s),
        "fennel-x5": lambda s: FennelPartitioner(k, passes=5, seed=s),
        "hash": lambda s: HashPartitioner(k, seed=s),
        "random": lambda s: RandomPartitioner(k, seed=s),
        "hdrf": lambda s: HDRFPartitioner(k, seed=s),
    }
    tiny = _tiny()
    results: dict[str, Any] = {}
    for name in ("grem-norefine", "pymetis-rb"):
        r = (
            run_grem(folder, k, seeds, refine=False)
            if name == "grem-norefine"
            else run_csr_method(name, folder, k, seeds)
        )
        m = int(np.load(folder / "indptr.npy", mmap_mode="r")[-1]) // 2
        results[name] = {
            "cut": r["cut"],
            "fraction": [c / m for c in r["cut"]],
            "imbalance": r["imbalance"],
            "edge_balance": r["edge_balance"],
            "seconds": r["seconds"],
        }
    for name, make in makers.items():
        make(0).partition(tiny)
        cuts, fracs, bal, secs, rf, ebal = [], [], [], [], [], []
        for seed in seeds:
            wall = time.perf_counter()
            r = make(seed).partition(graph).report
            secs.append(time.perf_counter() - wall)
            cuts.append(r.edge_cut)
            fracs.append(r.edge_cut_fraction)
            bal.append(r.vertex_balance)
            rf.append(r.replication_factor)
            ebal.append(r.edge_balance)
        results[name] = {
            "cut": cuts,
            "fraction": fracs,
            "imbalance": bal,
            "seconds": secs,
            "replication_factor": rf,
            "edge_balance": ebal,
        }
    return results


def main() -> None:
    """Parse the arguments, run, print one JSON line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--graph-dir", type=Path, required=True)
    parser.add_argument("--method", required=True)
    parser.add_argument("--k", type=int, required=True)
    parser.add_argument("--seeds", default="1,2,3")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.method in ("metis", "pymetis", "pymetis-rb"):
        result = run_csr_method(args.method, args.graph_dir, args.k, seeds)
    elif args.method in ("grem", "grem-norefine"):
        result = run_grem(args.graph_dir, args.k, seeds, args.method == "grem")
    elif args.method == "streaming":
        result = run_streaming(args.graph_dir, args.k, seeds)
    else:
        raise SystemExit(f"unknown method {args.method}")
    result.update(method=args.method, k=args.k, seeds=seeds)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
