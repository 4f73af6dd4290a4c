"""Start-up of a 2-rank Ray-actor gang against the local fork-server gang (issue 17).

Both gangs run ``gang_work.noop`` (returns the rank) on 2 CPU ranks, gloo, in
interleaved rounds (local, Ray, local, Ray, ...) after a warm-up of each (the
fork server has imported torch; Ray is connected and has run one gang). Figures:

* **start-up**: ``GangReport.startup_s``, launch until every rank joined the
  process group (for Ray: two new actor processes, their torch import and the
  rendezvous);
* **gang**: the whole ``run_gang_report`` call (start, run, gather, stop;
  for Ray, actors killed);
* **profile** (Ray only), in the same rounds: ``WORLD`` empty actors created
  until they answered (Ray's floor: a worker process each, no Strata, no
  torch), and ``WORLD`` ``RankActor`` actors until they answered ``where()``
  (the floor plus importing ``strata.engine.gang``, torch not yet); the rest
  of a gang's start-up is each rank's torch import (when it joins) and the
  rendezvous (a CPU gang reserves no placement group).

The cold figure (``connect()`` starting a local Ray cluster) is one sample, in
the note. No target: the issue asks for the number.

    cd benchmarks/engine && ../../.venv/bin/python bench_ray_gang.py --rounds 2
    cd benchmarks/engine && ../../.venv/bin/python bench_ray_gang.py --rounds 5 \\
        --out ../results/ray_gang.json

Run it from its own folder (the fork server and Ray's workers import
``gang_work`` by name).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import gang_work

from strata.engine.gang import GangSpec, run_gang_report
from strata.engine.gang.ray_gang import RankActor

WORLD = 2


class Empty:
    """Ray's floor: an actor that imports nothing (pickled by value from here)."""

    def where(self) -> int:
        return 0


def gang(launcher: str) -> dict[str, float]:
    """One trivial gang: its start-up and its whole wall time."""
    start = time.perf_counter()
    spec = GangSpec(workers=WORLD, device="cpu", launcher=launcher)  # type: ignore[arg-type]
    report = run_gang_report(gang_work.noop, spec)
    assert report.results == list(range(WORLD))
    return {"startup_s": report.startup_s, "total_s": time.perf_counter() - start}


def bare_actors(ray: Any, cls: type) -> float:
    """Seconds until ``WORLD`` actors of ``cls`` answer ``where()``."""
    start = time.perf_counter()
    remote = ray.remote(cls)
    actors = [remote.options(num_cpus=0).remote() for _ in range(WORLD)]
    ray.get([a.where.remote() for a in actors])
    seconds = time.perf_counter() - start
    for actor in actors:
        ray.kill(actor)
    return seconds


def spread(values: list[float]) -> list[float]:
    return [min(values), max(values)]


def _text(values: list[float]) -> str:
    low, high = spread(values)
    return f"median {statistics.median(values):.2f} s [{low:.2f}, {high:.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    import numba
    import torch

    torch.set_num_threads(2)
    numba.set_num_threads(2)
    from strata.engine.ray_cluster import connect

    start = time.perf_counter()
    ray = connect(num_cpus=2)
    cold_connect = time.perf_counter() - start
    cold_ray = gang("ray")
    cold_local = gang("local")
    runs: dict[str, list[dict[str, float]]] = {"local": [], "ray": []}
    bare: dict[str, list[float]] = {"empty": [], "rank": []}
    for _ in range(args.rounds):
        runs["local"].append(gang("local"))
        runs["ray"].append(gang("ray"))
        bare["empty"].append(bare_actors(ray, Empty))
        bare["rank"].append(bare_actors(ray, RankActor))
    rows = []
    command = (
        "cd benchmarks/engine && ../../.venv/bin/python bench_ray_gang.py "
        f"--rounds {args.rounds}" + (f" --out {args.out}" if args.out else "")
    )
    for key, work in (
        ("startup_s", "2-rank CPU gang start-up (launch until every rank joined)"),
        ("total_s", "2-rank CPU gang, whole call (start, trivial run, gather, stop)"),
    ):
        ray_values = [r[key] for r in runs["ray"]]
        local_values = [r[key] for r in runs["local"]]
        strata = statistics.median(ray_values)
        peer = statistics.median(local_values)
        rows.append(
            {
                "work": work,
                "metric": "seconds",
                "better": "lower",
                "strata": strata,
                "strata_spread": spread(ray_values),
                "peer": "local fork-server gang (warm), same run",
                "peer_value": peer,
                "peer_spread": spread(local_values),
                "ratio": strata / peer,
                "target": "none (reported)",
                "met": True,
                "command": command,
                "note": (
                    f"strata = Ray-actor gang (Ray {ray.__version__}, local cluster, "
                    f"{args.rounds} interleaved rounds). Profile, {WORLD} actors "
                    f"up: empty (Ray's floor) {_text(bare['empty'])}, RankActor "
                    f"(+ import strata.engine.gang) {_text(bare['rank'])}; the rest "
                    "is each rank's torch import and the rendezvous (no placement "
                    "group for a CPU gang). "
                    f"Cold: connect() {cold_connect:.2f} s, first "
                    f"Ray gang {cold_ray['total_s']:.2f} s, first local gang "
                    f"{cold_local['total_s']:.2f} s (fork server start)"
                ),
            }
        )
    for row in rows:
        print(
            f"{row['work']}: ray {row['strata']:.3f} s {row['strata_spread']}, "
            f"local {row['peer_value']:.3f} s {row['peer_spread']}, "
            f"ratio {row['ratio']:.1f}x"
        )
    print(rows[0]["note"])
    if args.out is not None:
        doc = {
            "topic": "ray_gang",
            "machine": f"{platform.machine()}, {platform.python_implementation()} "
            f"{platform.python_version()}",
            "rows": rows,
        }
        args.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
