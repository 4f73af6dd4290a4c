"""Mesh exchange throughput: ZmqMesh against TorchMesh (gloo), and SimMesh's cost.

One process per rank (``run_mesh(kind=...)``: a CPU gang, one torch thread per
worker); inside each rank, warm-up rounds, a barrier, then timed rounds of
``exchange`` with one float64 array per peer. The figure is seconds per round on
the slowest rank, without gang start-up. Two loads:

* ``1 MiB``: 1 MiB to every peer per round (20 rounds): bandwidth-bound;
* ``tiny``: 8 bytes to every peer per round (1000 rounds): latency-bound, what a
  graph kernel's many small supersteps pay.

zmq and torch runs alternate (zmq, torch, zmq, ...) for ``--repeats`` rounds so
machine noise hits both; the report gives the median and (min, max) of each and
the ratio zmq / torch, and writes ``benchmarks/results/mesh.json``. SimMesh rows
(threads of one process, what the cost model pays per round) come from the same
run for reference; they have no peer.

Run it from its own folder (gang workers import ``mesh_work`` from there)::

    cd benchmarks/engine && ../../.venv/bin/python bench_mesh.py
    cd benchmarks/engine && ../../.venv/bin/python bench_mesh.py --repeats 2  # smoke
    .venv/bin/python -m pytest benchmarks/engine/bench_mesh.py --benchmark-only
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from typing import Any

import mesh_work
import pytest

from strata.engine.mesh import MeshKind, run_mesh

LOADS = {"1 MiB": (1 << 20, 20, 3), "tiny": (8, 1000, 50)}
RESULTS = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "results", "mesh.json"
)


def per_round(kind: MeshKind, workers: int, load: str) -> float:
    """Seconds per round on the slowest rank."""
    nbytes, rounds, warmup = LOADS[load]
    times = run_mesh(
        mesh_work.rounds_s, workers, nbytes, rounds, warmup, kind=kind, timeout_s=120
    )
    return max(times)


@pytest.mark.multiprocess
@pytest.mark.parametrize("kind", ["zmq", "torch"])
@pytest.mark.parametrize("load", list(LOADS))
def test_mesh_round(benchmark: Any, kind: MeshKind, load: str) -> None:
    per_round(kind, 2, load)  # warm: fork server, imports
    seconds: list[float] = []
    benchmark.pedantic(lambda: seconds.append(per_round(kind, 2, load)), rounds=3)
    benchmark.extra_info.update(
        kind=kind, load=load, workers=2, round_s=statistics.median(seconds)
    )


def socket_round_trip(pattern: str, nbytes: int, rounds: int) -> float:
    """Seconds per raw zmq round trip between two processes (the slower side)."""
    import multiprocessing
    import socket

    ports = []
    for _ in range(2):  # free ports, released just before the nodes bind them
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            ports.append(probe.getsockname()[1])
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    nodes = [
        context.Process(
            target=mesh_work.socket_node,
            args=(pattern, rank, ports, nbytes, rounds, queue),
        )
        for rank in range(2)
    ]
    for node in nodes:
        node.start()
    times = [queue.get(timeout=120) for _ in nodes]
    for node in nodes:
        node.join()
    return max(times)


def socket_rows(repeats: int, command: str) -> list[dict[str, Any]]:
    """DEALER -> ROUTER (what ZmqMesh uses) against PUSH -> PULL, raw ping-pong."""
    rows = []
    for load, nbytes, rounds in (("8 B", 8, 3000), ("1 MiB", 1 << 20, 200)):
        got: dict[str, list[float]] = {"router": [], "pushpull": []}
        for _ in range(repeats):
            for pattern in got:
                got[pattern].append(socket_round_trip(pattern, nbytes, rounds))
        router, pushpull = (statistics.median(got[p]) for p in ("router", "pushpull"))
        rows.append(
            {
                "work": f"raw zmq round trip between 2 processes, {load} payload "
                "(mesh message shape: header, meta, payload)",
                "metric": "seconds per round trip",
                "better": "lower",
                "strata": router,
                "strata_spread": list(_span(got["router"])),
                "peer": "PUSH -> PULL sockets",
                "peer_value": pushpull,
                "peer_spread": list(_span(got["pushpull"])),
                "ratio": router / pushpull,
                "target": "none (measurement: ZmqMesh's socket pattern)",
                "met": None,
                "command": command + " --sockets",
                "note": "strata = DEALER -> ROUTER (ZmqMesh's pattern: the ROUTER "
                f"names the sender); {repeats} interleaved repeats, load "
                f"{os.getloadavg()[0]:.1f}",
            }
        )
        print(
            f"raw {load:6s} router {_us(got['router'])}  pushpull "
            f"{_us(got['pushpull'])}  router/pushpull {router / pushpull:.2f}",
            flush=True,
        )
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--sockets", action="store_true", help="also time raw zmq socket patterns"
    )
    args = parser.parse_args(argv)
    command = "cd benchmarks/engine && ../../.venv/bin/python bench_mesh.py" + (
        f" --repeats {args.repeats}" if args.repeats != 5 else ""
    )
    for kind in ("zmq", "torch"):  # warm the fork server and imports, untimed
        per_round(kind, 2, "tiny")
    rows = []
    for workers in args.workers:
        for load in LOADS:
            got: dict[str, list[float]] = {"zmq": [], "torch": [], "sim": []}
            for _ in range(args.repeats):
                for kind in ("zmq", "torch", "sim"):
                    got[kind].append(per_round(kind, workers, load))  # type: ignore[arg-type]
            zmq, torch = statistics.median(got["zmq"]), statistics.median(got["torch"])
            rounds = LOADS[load][1]
            sim = statistics.median(got["sim"])
            rows.append(
                {
                    "work": f"mesh exchange round, {load} to each peer, P={workers} "
                    f"processes ({rounds} rounds)",
                    "metric": "seconds per round (slowest rank)",
                    "better": "lower",
                    "strata": zmq,
                    "strata_spread": [min(got["zmq"]), max(got["zmq"])],
                    "peer": "TorchMesh (torch.distributed gloo all_to_all_single)",
                    "peer_value": torch,
                    "peer_spread": [min(got["torch"]), max(got["torch"])],
                    "ratio": zmq / torch,
                    "target": "none (measurement: which mesh to default to)",
                    "met": None,
                    "command": command,
                    "note": f"strata = ZmqMesh; SimMesh (threads, modelled) "
                    f"{sim * 1e6:.1f} us per round; "
                    f"{args.repeats} interleaved repeats, load "
                    f"{os.getloadavg()[0]:.1f}",
                }
            )
            print(
                f"P={workers} {load:6s} zmq {_us(got['zmq'])}  torch "
                f"{_us(got['torch'])}  zmq/torch {zmq / torch:.2f}  "
                f"sim {sim * 1e6:.1f} us",
                flush=True,
            )
    if args.sockets:
        rows.extend(socket_rows(args.repeats, command))
    result = {"topic": "mesh", "rows": rows}
    if not args.no_write:
        with open(RESULTS, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    return result


def _us(values: list[float]) -> str:
    """Median [min, max] in microseconds."""
    median, low, high = (v * 1e6 for v in (statistics.median(values), *_span(values)))
    return f"{median:9.1f} us [{low:.1f}, {high:.1f}]"


def _span(values: list[float]) -> tuple[float, float]:
    return min(values), max(values)


if __name__ == "__main__":
    main(sys.argv[1:])
