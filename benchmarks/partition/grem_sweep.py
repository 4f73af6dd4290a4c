"""Where GREM's cut comes from: one-knob variants against pymetis k-way (diagnostic).

Profiles a G1 shortfall of ``test_grem_acceptance.py``: for one suite graph, k, eps
and seed it runs GREM's defaults and, one change at a time, no refinement, 1 and 10
passes, no exchange pass, raw-evidence moves (``penalty=False``) and a seed chunk of
50% and 100% of the edges, with the METIS seed and with the multilevel seed, all
reading the same shuffled edge file; cuts are recounted from the CSR. Prints a
table (quality only: every variant runs in this one process, so no memory figure)::

    .venv/bin/python benchmarks/partition/run_grem_memory.py --write sbm \
        --graph-dir /tmp/grem/sbm
    .venv/bin/python benchmarks/partition/grem_sweep.py --graph-dir /tmp/grem/sbm \
        --k 8 --eps 0.03 --seed 1
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from partition_harness import FileEdgeChunks, load_csr

VARIANTS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "refine off": {"refine": False},
    "1 pass": {"passes": 1},
    "10 passes": {"passes": 10},
    "exchange off": {"exchange": False},
    "penalty off": {"penalty": False},
}


def main() -> None:
    """Parse the arguments, run every variant, print the table."""
    from strata.partition import GremPartitioner, MetisReference

    parser = argparse.ArgumentParser()
    parser.add_argument("--graph-dir", type=Path, required=True)
    parser.add_argument("--k", type=int, required=True)
    parser.add_argument("--eps", type=float, default=0.03)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    k, eps, seed = args.k, args.eps, args.seed
    csr = load_csr(args.graph_dir)
    n = csr.num_nodes
    m = int(csr.indptr[-1]) // 2
    stream = FileEdgeChunks(args.graph_dir / "edges.bin", n)
    src = np.repeat(np.arange(n), np.diff(csr.indptr))

    def cut(a: np.ndarray) -> int:
        return int(np.count_nonzero(a[src] != a[csr.indices]) // 2)

    ref = cut(MetisReference(k, eps, seed=seed).partition(csr).assignment)
    variants = {
        **VARIANTS,
        "seed chunk 50% of m": {"seed_chunk_edges": m // 2},
        "seed chunk 100% of m": {"seed_chunk_edges": m},
    }
    print(f"n={n:,} m={m:,} k={k} eps={eps} seed={seed}; pymetis cut {ref / m:.4f}")
    print("| seed | variant | cut fraction | / pymetis | vertex balance | s |")
    print("|---|---|---|---|---|---|")
    for seeding in ("METIS", "multilevel"):
        for name, change in variants.items():
            seeder = MetisReference(k, eps, seed=seed) if seeding == "METIS" else None
            config = GremPartitioner(
                k, imbalance=eps, seed=seed, seed_partitioner=seeder, **change
            )
            start = time.perf_counter()
            p = config.partition_stream(stream, n)
            seconds = time.perf_counter() - start
            c = cut(np.asarray(p.assignment))
            print(
                f"| {seeding} | {name} | {c / m:.4f} | {c / ref:.3f} | "
                f"{p.report.vertex_balance:.4f} | {seconds:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
