"""tdorch.md O2: real processes (ZmqMesh over loopback), P in {2, 4}.

READ batches (Zipf alpha = 1.5, D/T = 8) and UPDATE batches (sum), B tasks over N
keys per batch, originating evenly on the ranks; the strategies run interleaved
batch by batch in the same gang (A B C A B C ...), each on its own copy of the
store. Per worker: CPU busy time of each batch (``time.process_time`` around
``run_batch``, planning included), wall time and bytes sent. Every batch's
results and the final stores are checked against one process running the same
batches (sha256 of the bytes).

Run it from its own folder (gang workers import ``o2_work`` from there)::

    cd benchmarks/operators/orchestration && ../../../.venv/bin/python o2_zmq.py

Writes the O2 rows of benchmarks/results/tdorch.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import o2_work

from strata.engine.mesh import run_mesh
from strata.engine.mesh.base import Mesh
from strata.operators.orchestration import HashPush, hash_owner
from strata.operators.orchestration.plan import TaskKind
from strata.operators.orchestration.runtime import Batch, KeyValueStore, run_batch

RESULTS = Path(__file__).resolve().parents[2] / "results"
COMMAND = "cd benchmarks/operators/orchestration && ../../../.venv/bin/python o2_zmq.py"
NAMES: dict[str, list[str]] = {
    "read": ["hash-push", "pull-all", "push-pull"],
    "update": ["hash-push", "hash-push+combiner", "push-pull"],
}


def reference_rank(
    mesh: Mesh, kind: TaskKind, size: int, a: argparse.Namespace
) -> dict[str, Any]:
    """One process runs every batch whole; digests split as the P ranks hold them."""
    store = KeyValueStore(a.keys, a.width, 1, 0, 1)
    owner = hash_owner(store.keys, size)
    digests: list[list[str]] = [[] for _ in range(size)]
    for b in range(a.batches):
        parts = [
            o2_work.batch_tasks(b, r, size, a.tasks, a.keys, a.alpha)
            for r in range(size)
        ]
        keys = np.concatenate([p[0] for p in parts])
        pay = np.concatenate([p[1] for p in parts])
        out = run_batch(mesh, store, Batch(kind, keys, pay), HashPush(), superstep=b)
        at = 0
        for r, p in enumerate(parts):
            res = None if out.results is None else out.results[at : at + p[0].size]
            digests[r].append(o2_work.digest(res))
            at += p[0].size
    stores = [o2_work.digest(store.rows[owner == r]) for r in range(size)]
    return {"digests": digests, "stores": stores}


def identical(per_rank: list[dict[str, Any]], ref: dict[str, Any], name: str) -> bool:
    """Every batch's results and the final store equal the one-process run's."""
    return all(
        r["digests"][name] == ref["digests"][i] and r["store"][name] == ref["stores"][i]
        for i, r in enumerate(per_rank)
    )


def summarise(per_rank: list[dict[str, Any]], name: str) -> dict[str, Any]:
    busy = np.array([r["busy"][name] for r in per_rank])  # ranks x batches
    wall = np.array([r["wall"][name] for r in per_rank])
    sent = np.array([r["sent"][name] for r in per_rank])
    tasks = np.array([r["tasks"][name] for r in per_rank])
    per_batch_max = busy.max(axis=0)
    return {
        "max_busy": per_batch_max.tolist(),
        "busy_max_mean": float(np.median(busy.max(axis=0) / busy.mean(axis=0))),
        "busy_total_per_rank": busy.sum(axis=1).tolist(),
        "wall": wall.max(axis=0).tolist(),
        "bytes_max": int(sent.max(axis=0).max()),
        "bytes_total": int(sent.sum(axis=0).mean()),
        "tasks_max_mean": float(np.median(tasks.max(axis=0) / tasks.mean(axis=0))),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=2_000_000)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--alpha", type=float, default=1.5)
    ap.add_argument("--width", type=int, default=8, help="D/T (T = one float64)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    rows: list[dict[str, Any]] = []
    grid: dict[str, Any] = {}
    for size in a.sizes:
        for kind in ("read", "update"):
            names = NAMES[kind]
            t0 = time.perf_counter()
            args = (kind, names, a.tasks, a.keys, a.width, a.alpha, a.batches)
            per_rank = run_mesh(o2_work.o2_rank, size, *args, kind="zmq", timeout_s=600)
            took = time.perf_counter() - t0
            ref = run_mesh(reference_rank, 1, kind, size, a, kind="sim")[0]
            same = {n: identical(per_rank, ref, n) for n in names}
            stats = {n: summarise(per_rank, n) for n in names}
            grid[f"P={size} {kind}"] = {"seconds": took, "identical": same, **stats}
            print(f"P={size} {kind}: {took:.1f} s, identical {same}", file=sys.stderr)
            for n in names:
                s = stats[n]
                print(
                    f"  {n:20s} max busy median {statistics.median(s['max_busy']):.4f}"
                    f" [{min(s['max_busy']):.4f}, {max(s['max_busy']):.4f}]"
                    f" busy max/mean {s['busy_max_mean']:.3f}"
                    f" tasks max/mean {s['tasks_max_mean']:.3f}"
                    f" bytes max {s['bytes_max']} total {s['bytes_total']}",
                    file=sys.stderr,
                )
            peer = "hash-push" if kind == "read" else "hash-push+combiner"
            target = 0.8 if kind == "read" else 1.1
            if kind == "read" and size != 4:
                target = 1.0  # P = 2: reported, the spec's 0.8 is for P = 4
            ours, theirs = stats["push-pull"], stats[peer]
            med = statistics.median(ours["max_busy"])
            pmed = statistics.median(theirs["max_busy"])
            rows.append(
                {
                    "work": f"O2 {kind.upper()} batches, P={size} ZmqMesh processes "
                    f"(B={a.tasks}, N={a.keys}, alpha={a.alpha}, D/T={a.width}, "
                    f"{a.batches} interleaved batches)",
                    "metric": "max worker CPU busy seconds per batch",
                    "better": "lower",
                    "strata": med,
                    "strata_spread": [min(ours["max_busy"]), max(ours["max_busy"])],
                    "peer": peer,
                    "peer_value": pmed,
                    "peer_spread": [min(theirs["max_busy"]), max(theirs["max_busy"])],
                    "ratio": med / pmed,
                    "target": f"<= {target}",
                    "met": bool(med / pmed <= target and all(same.values())),
                    "command": COMMAND,
                    "note": (
                        f"results identical to one process: {same}; busy max/mean "
                        f"push-pull {ours['busy_max_mean']:.3f} vs "
                        f"{theirs['busy_max_mean']:.3f}; "
                        f"tasks max/mean {ours['tasks_max_mean']:.3f} vs "
                        f"{theirs['tasks_max_mean']:.3f}; max bytes/rank/batch "
                        f"{ours['bytes_max']} vs {theirs['bytes_max']}; 2-core box, "
                        f"P=4 oversubscribed (CPU time, not wall)"
                    ),
                }
            )
    if a.no_write:
        return
    (RESULTS / "tdorch_o2_grid.json").write_text(
        json.dumps({"command": COMMAND, "args": vars(a), "grid": grid}, indent=1)
    )
    path = RESULTS / "tdorch.json"
    old = json.loads(path.read_text())["rows"] if path.exists() else []
    keep = [r for r in old if not str(r["work"]).startswith("O2 ")]
    path.write_text(json.dumps({"topic": "tdorch", "rows": keep + rows}, indent=1))


if __name__ == "__main__":
    main()
