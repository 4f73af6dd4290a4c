"""A gang across 2 nodes (loopback) against the same gang on one node (issue 17).

Both gangs have 2 CPU ranks (gloo, one torch thread each) on this machine. The
one-node gang starts both ranks here; the 2-node gang starts rank 0 here (node
0, this process) and rank 1 in a second launch of this script (node 1), joined
through the job store as ``strata run --nnodes 2`` joins them. What differs is
the cross-node machinery: the gang's port through the job store, every rank's
result through the gang's store, the node beats and the final read barrier.
Interleaved rounds (one node, two nodes, ...) after a warm-up of each; times
are node 0's whole ``run_gang_report`` call:

* ``noop``: start, a trivial run (returns the rank), gather, stop;
* ``mlp``: ``gang_work.train_mlp``, a data-parallel MLP on 32k rows, 10
  full-batch epochs with a gradient all-reduce each (the same arithmetic on
  either gang).

    cd benchmarks/engine && ../../.venv/bin/python bench_multinode.py --rounds 2
    cd benchmarks/engine && ../../.venv/bin/python bench_multinode.py --rounds 5 \\
        --out ../results/multinode_gang.json

Run it from its own folder (the fork server imports ``gang_work`` by name).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gang_work

from strata.engine.gang import GangSpec, NodeGroup, run_gang_report
from strata.engine.gang.cluster import NNODES_ENV, launched_as

EPOCHS = 10
KINDS = ("noop", "mlp")


def gang(kind: str, nodes: int, data: Any) -> float:
    """One gang of ``kind`` on ``nodes`` nodes; its whole wall time."""
    spec = GangSpec(
        workers=2, device="cpu", threads_per_worker=1, name=f"{kind}-{nodes}"
    )
    start = time.perf_counter()
    if kind == "noop":
        report = run_gang_report(gang_work.noop, spec)
        assert report.results == [0, 1]
    else:
        report = run_gang_report(gang_work.train_mlp, spec, *data, epochs=EPOCHS)
        assert len(report.results) == 2
    return time.perf_counter() - start


def one_node(fn: Callable[[], float]) -> float:
    """Run ``fn`` as a one-node job although this process is node 0 of two."""
    saved = os.environ[NNODES_ENV]
    os.environ[NNODES_ENV] = "1"
    try:
        return fn()
    finally:
        os.environ[NNODES_ENV] = saved


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spread(values: list[float]) -> list[float]:
    return [min(values), max(values)]


def node_one(rounds: int) -> None:
    """Node 1: the 2-node gangs only, in node 0's order (warm-up included)."""
    data = gang_work.data()
    for _ in range(rounds + 1):
        for kind in KINDS:
            gang(kind, 2, data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--node-one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    import numba
    import torch

    torch.set_num_threads(2)
    numba.set_num_threads(2)
    if args.node_one:
        node_one(args.rounds)
        return
    data = gang_work.data()
    gang("noop", 1, data)  # the fork server starts before any node variable is set
    group = NodeGroup(2, 0, "127.0.0.1", free_port())
    env = {**os.environ, **group.to_env(), "STRATA_NODE_RANK": "1"}
    helper = subprocess.Popen(
        [sys.executable, __file__, "--node-one", f"--rounds={args.rounds}"], env=env
    )
    times: dict[tuple[str, int], list[float]] = {}
    try:
        with launched_as(group):
            for round_ in range(args.rounds + 1):  # round 0 warms both up
                for kind in KINDS:
                    single = one_node(lambda kind=kind: gang(kind, 1, data))
                    double = gang(kind, 2, data)
                    if round_:
                        times.setdefault((kind, 1), []).append(single)
                        times.setdefault((kind, 2), []).append(double)
        assert helper.wait(120) == 0
    finally:
        if helper.poll() is None:
            helper.kill()
            helper.wait()
    command = (
        "cd benchmarks/engine && ../../.venv/bin/python bench_multinode.py "
        f"--rounds {args.rounds}" + (f" --out {args.out}" if args.out else "")
    )
    works = {
        "noop": "2-rank CPU gang, trivial run: whole call (start, run, gather, stop)",
        "mlp": f"2-rank CPU gang, data-parallel MLP (32k rows, {EPOCHS} epochs, "
        "gradient all-reduce each): whole call",
    }
    rows = []
    for kind in KINDS:
        two, one = times[(kind, 2)], times[(kind, 1)]
        strata, peer = statistics.median(two), statistics.median(one)
        rows.append(
            {
                "work": works[kind],
                "metric": "seconds",
                "better": "lower",
                "strata": strata,
                "strata_spread": spread(two),
                "peer": "the same gang on one node (warm fork server), same run",
                "peer_value": peer,
                "peer_spread": spread(one),
                "ratio": strata / peer,
                "target": "none (reported)",
                "met": True,
                "command": command,
                "note": (
                    "strata = 1 rank on each of 2 nodes (two launches on loopback, "
                    "strata run --nnodes 2 machinery); node 0's times, "
                    f"{args.rounds} interleaved rounds after a warm-up. Each node "
                    "forks only its own rank (node 1 forks the other at the same "
                    "time), which offsets the store round trips of the cross-node "
                    "path (port, results, read barrier)"
                ),
            }
        )
        print(
            f"{kind}: 2 nodes {strata:.3f} s {spread(two)}, 1 node {peer:.3f} s "
            f"{spread(one)}, ratio {strata / peer:.2f}x"
        )
    if args.out is not None:
        doc = {
            "topic": "multinode_gang",
            "machine": f"{platform.machine()}, {platform.python_implementation()} "
            f"{platform.python_version()}",
            "rows": rows,
        }
        args.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
