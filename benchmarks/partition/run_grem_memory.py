"""One fresh process of the GREM acceptance suite: one method, one graph, one k.

Usage (``test_grem_acceptance.py`` calls it; it also runs by hand)::

    .venv/bin/python benchmarks/partition/run_grem_memory.py --write sbm \
        --graph-dir /tmp/grem/sbm
    .venv/bin/python benchmarks/partition/run_grem_memory.py --graph-dir /tmp/grem/sbm \
        --method grem-metis --k 8 --seeds 1 --eps 0.03

``--write NAME`` writes suite graph NAME (:data:`SUITE`, the graphs of
``partitioners.md`` §9.1) as ``partition_harness.write_graph`` does: CSR
(``indptr.npy``, ``indices.npy``) and the shuffled edge file ``edges.bin``.

Methods (``grem.md`` §4.1):

* ``pymetis``: METIS 5 k-way through pymetis (``recursive=False``,
  ``ufactor = 1000 eps``, ``seed``) on the CSR, loaded as int32 before the
  baseline so that no conversion copy is charged to METIS.
* ``grem-metis``: :class:`GremPartitioner` whose seed chunk is partitioned by
  ``MetisReference`` (pymetis k-way, same eps and seed): the calibrated rule.
* ``grem-multilevel``: GREM with its default seed, Strata's multilevel
  partitioner.

GREM reads the shuffled edge file ``edges.bin`` with explicit reads into one
reused buffer (``partition_harness.FileEdgeChunks``); its "graph load" is only the
vertex count, so everything GREM holds (seed subgraph, evidence matrix, chunk
buffers, the report pass) counts as its extra memory.

Memory: imports, numba warm-up (a tiny graph; compile or cache load) and the graph
load come first. Then, before every seed, the kernel's RSS high-water mark is reset
(``/proc/self/clear_refs``) and the RSS read as the baseline; after the seed,
``getrusage(RUSAGE_SELF).ru_maxrss`` minus that baseline is the seed's extra peak
(``peak_bytes``). Without the reset the warm-up's own peak would hide the run's.
``VmHWM`` (the same per-process mark, read from ``/proc``) is recorded beside it;
the two differ only when ``ru_maxrss`` carries a larger mark inherited through
``exec`` from the parent (the parent must stay small; see
``ru_floor_bytes``). Only the first seed runs in a fresh process; ``grem.md`` G2
uses one process per seed (``--seeds`` with one value).

The cut of every run is recounted from the CSR after the measurements (an
independent oracle for GREM's stream report). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import partition_harness
from partition_harness import FileEdgeChunks, load_csr

METHODS = ("pymetis", "grem-metis", "grem-multilevel")

_RGG_RADIUS = math.sqrt(12 / (math.pi * 200000))

#: ``partitioners.md`` §9.1: name -> (storage graph spec, drop isolated vertices).
SUITE: dict[str, tuple[str, bool]] = {
    # 64 equal blocks, n * 10 edges drawn, 30% of them to uniform random vertices
    "sbm": ("sbm:n=200000,blocks=64,degree=20,intra=0.7,seed=0,features=0", False),
    # radius sqrt(12 / (pi n)): average degree ~12
    "rgg": (f"rgg:n=200000,radius={_RGG_RADIUS:.6f},seed=0", False),
    # scale 17, (a, b, c) = (.57, .19, .19), 2^17 * 10 edges drawn, ids permuted
    "rmat": ("rmat:scale=17,edge_factor=10,seed=0,undirected=true", True),
    "cora": ("planetoid:cora", False),
}


def write_suite_graph(name: str, folder: Path) -> dict[str, Any]:
    """Write suite graph ``name`` to ``folder`` (CSR and shuffled edge file)."""
    partition_harness.SUITE[name] = SUITE[name]
    return partition_harness.write_graph(name, folder)


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _reset_peak() -> int:
    """Reset the RSS high-water mark to the RSS now; return that RSS in bytes."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status_kb("VmRSS") * 1024


def _maxrss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _cut(indptr: np.ndarray, indices: np.ndarray, a: np.ndarray) -> int:
    src = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    return int(np.count_nonzero(a[src] != a[indices]) // 2)


def _tiny() -> Any:
    from strata.storage.generators import sbm

    return sbm(400, 4, avg_degree=8, seed=0)[0]


def _pymetis_runner(
    folder: Path, k: int, eps: float
) -> tuple[Callable[[int], np.ndarray], Callable[[], None]]:
    import pymetis

    indptr = np.load(folder / "indptr.npy").astype(np.int32)
    indices = np.load(folder / "indices.npy").astype(np.int32)

    def solve(xadj: np.ndarray, adjncy: np.ndarray, seed: int) -> np.ndarray:
        options = pymetis.Options(seed=seed, ufactor=round(1000 * eps))
        _, parts = pymetis.part_graph(
            k, pymetis.CSRAdjacency(xadj, adjncy), recursive=False, options=options
        )
        return np.asarray(parts, dtype=np.int32)

    def warm() -> None:
        tiny = _tiny()
        solve(tiny.indptr.astype(np.int32), tiny.indices.astype(np.int32), 0)

    return (lambda seed: solve(indptr, indices, seed)), warm


def _grem_runner(
    folder: Path, k: int, eps: float, metis_seed: bool, seed_fraction: float | None
) -> tuple[Callable[[int], np.ndarray], Callable[[], None]]:
    from strata.partition import ArrayEdgeChunks, GremPartitioner, MetisReference
    from strata.partition.metrics import undirected_edges

    num_nodes = int(np.load(folder / "indptr.npy", mmap_mode="r").shape[0] - 1)
    stream = FileEdgeChunks(folder / "edges.bin", num_nodes)
    b0 = None
    if seed_fraction is not None:
        b0 = max(1, round(seed_fraction * stream.num_edges))

    def config(kk: int, seed: int, tiny: bool = False) -> GremPartitioner:
        seeder = MetisReference(kk, eps, seed=seed) if metis_seed else None
        return GremPartitioner(
            kk,
            imbalance=eps,
            seed=seed,
            seed_partitioner=seeder,
            seed_chunk_edges=None if tiny else b0,
        )

    def warm() -> None:
        src, dst = undirected_edges(_tiny())
        config(4, 0, tiny=True).partition_stream(ArrayEdgeChunks(src, dst), 400)

    def run(seed: int) -> np.ndarray:
        p = config(k, seed).partition_stream(stream, num_nodes)
        run.last_cut = p.report.edge_cut  # type: ignore[attr-defined]
        run.phases = dict(p.report.phase_seconds)  # type: ignore[attr-defined]
        return np.asarray(p.assignment)

    return run, warm


def measure(
    folder: Path,
    method: str,
    k: int,
    seeds: list[int],
    eps: float,
    seed_fraction: float | None = None,
) -> dict[str, Any]:
    """Run ``method`` once per seed; figures per seed (see the module doc).

    ``seed_fraction``: GREM's seed chunk as a fraction of the edges (default: its
    own rule, ``min(m, 2.5 n)`` edges); ignored by pymetis.
    """
    start = time.perf_counter()
    if method == "pymetis":
        run, warm = _pymetis_runner(folder, k, eps)
    else:
        run, warm = _grem_runner(folder, k, eps, method == "grem-metis", seed_fraction)
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    warm()
    warmup_s = time.perf_counter() - start
    out: dict[str, Any] = {
        "method": method,
        "k": k,
        "eps": eps,
        "seed_fraction": seed_fraction,
        "seeds": seeds,
        "load_s": load_s,
        "warmup_s": warmup_s,
        "baseline_bytes": [],
        "peak_bytes": [],
        "hwm_peak_bytes": [],
        "ru_floor_bytes": [],
        "seconds": [],
        "cpu_s": [],
        "stream_cut": [],
        "phases": [],
    }
    assignments = []
    for seed in seeds:
        base = _reset_peak()
        out["baseline_bytes"].append(base)
        # ru_maxrss right after the reset: above the RSS only if a larger mark
        # was inherited through exec (then peak_bytes is a floor, not a figure)
        out["ru_floor_bytes"].append(_maxrss() - base)
        wall, cpu = time.perf_counter(), time.process_time()
        a = run(seed)
        out["seconds"].append(time.perf_counter() - wall)
        out["cpu_s"].append(time.process_time() - cpu)
        out["peak_bytes"].append(_maxrss() - base)
        out["hwm_peak_bytes"].append(_status_kb("VmHWM") * 1024 - base)
        out["stream_cut"].append(getattr(run, "last_cut", None))
        out["phases"].append(getattr(run, "phases", None))
        assignments.append(a)
    graph = load_csr(folder)  # after every measurement: the oracle for the cut
    n = graph.num_nodes
    out["num_nodes"] = n
    out["num_edges"] = int(graph.indptr[-1]) // 2
    out["cut"] = [_cut(graph.indptr, graph.indices, a) for a in assignments]
    out["imbalance"] = [
        float(np.bincount(a, minlength=k).max() * k / n) for a in assignments
    ]
    out["all_assigned"] = all(
        bool(a.min() >= 0 and a.max() < k and a.size == n) for a in assignments
    )
    return out


def main() -> None:
    """Parse the arguments, run, print one JSON line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--graph-dir", type=Path, required=True)
    parser.add_argument("--write", choices=sorted(SUITE))
    parser.add_argument("--method", choices=METHODS)
    parser.add_argument("--k", type=int)
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--eps", type=float, default=0.03)
    parser.add_argument("--seed-fraction", type=float, default=None)
    args = parser.parse_args()
    if args.write:
        stats = write_suite_graph(args.write, args.graph_dir)
        sys.stdout.write(json.dumps(stats) + "\n")
        return
    if args.method is None or args.k is None:
        parser.error("--method and --k are required unless --write is given")
    seeds = [int(s) for s in args.seeds.split(",")]
    result = measure(
        args.graph_dir, args.method, args.k, seeds, args.eps, args.seed_fraction
    )
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
