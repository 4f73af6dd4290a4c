"""Run the streaming experiments and print JSON (the figures of the issue 7 report).

Usage (from the repository root)::

    .venv/bin/python benchmarks/operators/streaming/run_streaming.py throughput \
        --scale 18 --batch-sizes 10,100,1000,10000,100000 [--model sage]
    .venv/bin/python benchmarks/operators/streaming/run_streaming.py windows \
        --scale 16 --updates 20000
    .venv/bin/python benchmarks/operators/streaming/run_streaming.py exactness \
        --scale 16 --updates 100000 --window 1000 --model gcn
    .venv/bin/python benchmarks/operators/streaming/run_streaming.py peers \
        --scale 18 --batch-sizes 100 --batches 40 --write   # vs PyG, DGL (issue 15)
    .venv/bin/python benchmarks/operators/streaming/run_streaming.py ingest --seconds 60
        [--retention-s 2]   # default: no consumer truncates; the log quota fills

``OPENBLAS_NUM_THREADS=1`` is advised on a busy machine: numpy's small GEMMs spin
otherwise. Torch (the baselines) and numba (the incremental kernels) use
``--threads`` threads (default 2).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numba
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer_harness import peer_run, result_rows
from streaming_checks import exactness_run, window_curve
from streaming_harness import crossover, make_setup, throughput_row

from strata.operators.streaming import Adaptive, Count, Immediate, Session

RESULTS = Path(__file__).resolve().parents[2] / "results"


def windows_for_curve() -> dict:
    """Nested count windows, plus session and adaptive policies."""
    windows = {"immediate": Immediate()}
    windows.update({f"count:{w}": Count(w) for w in (10, 100, 1000, 10_000)})
    windows["session:5ms"] = Session(gap_ms=5)
    windows["session:50ms"] = Session(gap_ms=50)
    windows["adaptive:1-500ms"] = Adaptive(min_gap_ms=1, horizon_ms=500)
    return windows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "experiment", choices=["throughput", "windows", "exactness", "ingest", "peers"]
    )
    parser.add_argument("--scale", type=int, default=16)
    parser.add_argument("--model", default="sage")
    parser.add_argument("--batch-sizes", default="10,100,1000,10000,100000")
    parser.add_argument("--updates", type=int, default=100_000)
    parser.add_argument("--window", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batches", type=int, default=30, help="peers: timed batches")
    parser.add_argument(
        "--write",
        action="store_true",
        help="peers: write benchmarks/results/streaming.json",
    )
    parser.add_argument(
        "--retention-s",
        type=float,
        default=None,
        help="ingest: truncate the log this often (default: never; the quota fills)",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    start = time.time()
    if args.experiment == "ingest":
        from ingest_harness import sustained_ingest

        result: dict = sustained_ingest(args.seconds, retention_s=args.retention_s)
    else:
        setup = make_setup(args.scale, args.model)
        result = {
            "graph": setup.name,
            "nodes": setup.graph.num_nodes,
            "edges": setup.graph.num_edges,
        }
        if args.experiment == "peers":
            runs = [
                peer_run(setup, int(b), batches=args.batches)
                for b in args.batch_sizes.split(",")
            ]
            result["runs"] = runs
            if args.write:
                command = "OPENBLAS_NUM_THREADS=1 .venv/bin/python " + " ".join(
                    [str(Path(sys.argv[0])), *sys.argv[1:]]
                )
                rows = [r for run in runs for r in result_rows(run, command)]
                RESULTS.mkdir(parents=True, exist_ok=True)
                (RESULTS / "streaming.json").write_text(
                    json.dumps({"topic": "streaming", "rows": rows}, indent=2) + "\n"
                )
        elif args.experiment == "throughput":
            rows = []
            for b in (int(v) for v in args.batch_sizes.split(",")):
                rows.append(throughput_row(setup, b))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            result.update(
                rows=rows,
                full_wins_at_batch_size=crossover(rows),
                full_wins_at_batch_size_cpu=crossover(rows, "cpu_speedup_vs_full"),
            )
        elif args.experiment == "windows":
            result["rows"] = window_curve(
                setup, windows_for_curve(), num_updates=args.updates
            )
        else:
            result.update(exactness_run(setup, args.window, num_updates=args.updates))
    result["wall_s"] = round(time.time() - start, 1)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
