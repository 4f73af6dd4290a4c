"""tdorch.md O3, modelled: load and bytes of one PageRank superstep on SimMesh.

For G1 (RMAT-18 symmetrised), G2 alpha=1.2 and G2 alpha=1.5, at P in {2, 4, 16,
64}, PageRank runs one superstep on the counting SimMesh (P ranks as threads of
one process) with hash placement + combiner and with HubSplit + push-pull. Per
rank the model counts tasks (edge tasks run + combined updates applied + pulled
hub values served: one unit each) and the bytes it sends to other ranks (as the
zmq mesh would put them on the wire). Everything here is *model*: counts, no time.

Accept (tdorch.md §7 O3, model): on G2 alpha=1.2 HubSplit's max load <= 1/1.5 of
hash + combiner's at P = 16 and <= 1/3 at P = 64; on G1 within 5%; bytes <= 1.15x
hash + combiner everywhere.

    .venv/bin/python benchmarks/operators/algorithms/o3_model.py

writes the ``kind: model`` rows of benchmarks/results/tdorch_graph.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from o3_common import command, describe, g1, g2, write_rows

from strata.operators.algorithms.distributed import (
    DistributedReport,
    run_distributed,
)
from strata.storage.csr import CSRGraph

WORKERS = (2, 4, 16, 64)
#: tdorch.md's modelled table, for the notes: (hash+combiner max/mean, HubSplit).
SPEC = {
    ("G1", 4): (1.01, None),
    ("G1", 16): (1.05, None),
    ("G1", 64): (1.17, None),
    ("G2 a=1.2", 4): (1.41, 1.08),
    ("G2 a=1.2", 16): (1.89, 1.09),
    ("G2 a=1.2", 64): (4.46, 1.11),
    ("G2 a=1.5", 2): (1.27, 1.02),
    ("G2 a=1.5", 4): (1.69, 1.07),
    ("G2 a=1.5", 16): (2.45, 1.07),
}


def load_target(graph: str, workers: int) -> tuple[str, float | None]:
    """The Accept line on max load for (graph, P), or none."""
    if graph == "G2 a=1.2" and workers == 16:
        return "<= 0.667", 1 / 1.5
    if graph == "G2 a=1.2" and workers == 64:
        return "<= 0.333", 1 / 3
    if graph == "G1":
        return "<= 1.05", 1.05
    return "none (spec table figure)", None


def superstep(graph: CSRGraph, workers: int, placement: str) -> DistributedReport:
    _, report = run_distributed(
        "pagerank", graph, workers, placement, mesh="sim", iterations=1
    )
    return report


def rows_for(name: str, graph: CSRGraph, workers: int) -> list[dict[str, Any]]:
    hashed = superstep(graph, workers, "hash-combiner")
    split = superstep(graph, workers, "hubsplit")
    spec = SPEC.get((name, workers))
    spec_note = ""
    if spec:
        split_spec = spec[1] or "about the same"
        spec_note = (
            f"; spec model max/mean hash+combiner {spec[0]}, HubSplit {split_spec}"
        )
    pulled = sum(r.pulled for r in split.ranks)
    note = (
        f"model (SimMesh counts, 1 PageRank superstep). max/mean tasks: hash+combiner "
        f"{hashed.tasks_max_mean:.3f}, HubSplit {split.tasks_max_mean:.3f}{spec_note}. "
        f"HubSplit pulls {pulled} hub values per superstep. Bytes max/mean: "
        f"{hashed.bytes_max_mean:.3f} vs {split.bytes_max_mean:.3f}."
    )
    work = f"PageRank superstep, {describe(name, graph)}, P={workers}"
    target, bound = load_target(name, workers)
    load_ratio = split.max_tasks / hashed.max_tasks
    bytes_ratio = split.total_bytes / max(hashed.total_bytes, 1)
    common = {"peer": "hash + combiner (model)", "command": command(), "note": note}
    return [
        {
            "work": work,
            "metric": "max per-rank tasks (model)",
            "better": "lower",
            "strata": split.max_tasks,
            "strata_spread": [split.max_tasks, split.max_tasks],
            "peer_value": hashed.max_tasks,
            "peer_spread": [hashed.max_tasks, hashed.max_tasks],
            "ratio": load_ratio,
            "target": target,
            "met": None if bound is None else load_ratio <= bound,
            **common,
        },
        {
            "work": work,
            "metric": "bytes sent per superstep, all ranks (model)",
            "better": "lower",
            "strata": split.total_bytes,
            "strata_spread": [split.total_bytes, split.total_bytes],
            "peer_value": hashed.total_bytes,
            "peer_spread": [hashed.total_bytes, hashed.total_bytes],
            "ratio": bytes_ratio,
            "target": "<= 1.15",
            "met": bytes_ratio <= 1.15,
            **common,
        },
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scale-shift", type=int, default=0, help="log2 shrink (e.g. -2)"
    )
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    graphs = {
        "G1": lambda: g1(args.scale_shift),
        "G2 a=1.2": lambda: g2(1.2, args.scale_shift),
        "G2 a=1.5": lambda: g2(1.5, args.scale_shift),
    }
    rows: list[dict[str, Any]] = []
    for name, make in graphs.items():
        graph = make()
        for workers in WORKERS:
            start = time.perf_counter()
            new = rows_for(name, graph, workers)
            rows += new
            load, sent = new
            print(
                f"{name:9s} P={workers:3d} max-load ratio {load['ratio']:.3f} "
                f"(target {load['target']}, met {load['met']}) bytes ratio "
                f"{sent['ratio']:.3f} [{time.perf_counter() - start:.1f} s] "
                f"{load['note']}",
                flush=True,
            )
    if not args.no_write:
        write_rows(rows, "model")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
