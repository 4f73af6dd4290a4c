"""Single-process graph algorithms: Strata's numba kernels vs networkit, igraph, scipy.

PageRank (20 iterations, damping 0.85, dangling mass spread), BFS from one source
(the vertex of largest out-degree) and weak connected components, on

* G1: RMAT scale 18, edge factor 16, symmetrised, loops and duplicates dropped;
* G2: 2**20 vertices, 8M sampled edges, Zipf(1.2) sources, uniform destinations,
  deduplicated (:func:`strata.storage.generators.zipf.zipf_source_graph`).

Every contender runs once per round, interleaved (A B C D A B C D ...), for
``--rounds`` rounds, with 2 threads everywhere (numba, networkit/OpenMP; igraph and
scipy are single-threaded). Graph construction and JIT compilation stay outside
the timer (a warm-up call first; the cold first-call seconds are reported apart).
Results are checked against each other before the figures are written.

Peers, as their users call them:

* networkit: ``PageRank`` (``maxIterations=20``, tiny tol, ``DISTRIBUTE_SINKS``),
  ``distance.BFS(storePaths=False)``, ``ConnectedComponents`` /
  ``ParallelConnectedComponents`` (G1, undirected) or
  ``WeaklyConnectedComponents`` (G2, directed) — the faster one is kept;
* igraph: ``pagerank`` (PRPACK, solved to convergence: igraph has no fixed-iteration
  mode), ``bfs``, ``connected_components(mode="weak")``;
* scipy: 20 power iterations of ``csr @ x`` on the transposed matrix,
  ``csgraph.breadth_first_order``, ``csgraph.connected_components(connection="weak")``.

    .venv/bin/python benchmarks/operators/algorithms/bench_algorithms.py \\
        --rounds 5 --out benchmarks/results/algorithms.json

OpenMP's wait policy (numba's and networkit's threads) is left at its default
(spinning); a run with ``OMP_WAIT_POLICY=PASSIVE`` records it in the command. On the
shared, oversubscribed 2-core box passive waiting made each parallel region wait
for the sleeping worker to be scheduled, which cost Strata's PageRank (20 regions)
up to 1.8x on G2.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numba
import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from strata.operators.algorithms import bfs, connected_components, pagerank
from strata.storage import CSRGraph, DuplicatePolicy, SelfLoopPolicy
from strata.storage.generators import rmat
from strata.storage.generators.zipf import zipf_source_graph

THREADS = 2
ENV = "OMP_WAIT_POLICY=" + os.environ.get("OMP_WAIT_POLICY", "(unset)")
ITERATIONS = 20
DAMPING = 0.85


@dataclass
class Contender:
    name: str
    run: Callable[[], Any]
    check: Callable[[Any], None]


def build_graphs(quick: bool) -> dict[str, tuple[str, CSRGraph, bool]]:
    """name -> (description, graph, symmetric)."""
    scale = 14 if quick else 18
    g1 = rmat(
        scale,
        16,
        seed=0,
        symmetrize=True,
        self_loops=SelfLoopPolicy.REMOVE,
        duplicates=DuplicatePolicy.REMOVE,
    )
    n2, m2 = (1 << 16, 500_000) if quick else (1 << 20, 8_000_000)
    g2 = zipf_source_graph(n2, m2, alpha=1.2, seed=0)
    return {
        "G1": (
            f"RMAT-{scale} symmetrised ({g1.num_nodes:,} nodes, "
            f"{g1.num_edges:,} directed edges)",
            g1,
            True,
        ),
        "G2": (
            f"G2 alpha=1.2 ({g2.num_nodes:,} nodes, {g2.num_edges:,} edges, "
            "Zipf sources, deduplicated)",
            g2,
            False,
        ),
    }


def scipy_pagerank(at: sp.csr_matrix, inv_outdeg: np.ndarray) -> np.ndarray:
    """20 power iterations, dangling mass spread uniformly (the oracle's rule)."""
    n = at.shape[0]
    dangling = inv_outdeg == 0
    x = np.full(n, 1.0 / n)
    for _ in range(ITERATIONS):
        base = (1 - DAMPING) / n + DAMPING * x[dangling].sum() / n
        x = base + DAMPING * (at @ (x * inv_outdeg))
    return x


def contenders(
    graph: CSRGraph, symmetric: bool, algorithm: str, source: int
) -> list[Contender]:
    import igraph as ig
    import networkit as nk

    n = graph.num_nodes
    src, dst = graph.to_coo()
    dst64 = dst.astype(np.int64)
    a = sp.csr_matrix(
        (np.ones(graph.num_edges), graph.indices, graph.indptr), shape=(n, n)
    )
    if symmetric:  # peers get each undirected edge once, as their users build it
        half = src < dst64
        nk_graph = nk.GraphFromCoo((src[half], dst64[half]), n, directed=False)
        ig_graph = ig.Graph(
            n=n, edges=np.column_stack([src[half], dst64[half]]), directed=False
        )
    else:
        nk_graph = nk.GraphFromCoo((src, dst64), n, directed=True)
        ig_graph = ig.Graph(n=n, edges=np.column_stack([src, dst64]), directed=True)
    out: list[Contender] = []
    if algorithm == "pagerank":
        inv = np.zeros(n)
        deg = graph.out_degree()
        inv[deg > 0] = 1.0 / deg[deg > 0]
        at = a.T.tocsr()
        reference = scipy_pagerank(at, inv)

        def close(values: Any, tol: float = 1e-9) -> None:
            got = np.asarray(values, dtype=np.float64)
            got = got / got.sum()
            l1 = float(np.abs(got - reference).sum())
            assert l1 <= tol, l1

        def nk_pr() -> Any:
            pr = nk.centrality.PageRank(
                nk_graph,
                damp=DAMPING,
                tol=1e-300,
                distributeSinks=nk.centrality.SinkHandling.DistributeSinks,
            )
            pr.maxIterations = ITERATIONS
            pr.run()
            return pr

        out = [
            Contender(
                "strata",
                lambda: pagerank(graph, iterations=ITERATIONS).values,
                close,
            ),
            Contender(
                "networkit",
                nk_pr,
                lambda pr: close(pr.scores(), 1e-3),
            ),
            Contender(
                "igraph",
                lambda: ig_graph.pagerank(damping=DAMPING),
                lambda v: close(v, 1e-2),
            ),
            Contender("scipy", lambda: scipy_pagerank(at, inv), close),
        ]
    elif algorithm == "bfs":
        reference = bfs(graph, source).values
        reached = int((reference >= 0).sum())

        def count(k: int) -> None:
            assert k == reached, (k, reached)

        def nk_bfs() -> Any:
            b = nk.distance.BFS(nk_graph, source, storePaths=False)
            b.run()
            return b

        out = [
            Contender(
                "strata",
                lambda: bfs(graph, source).values,
                lambda v: count(int((v >= 0).sum())),
            ),
            Contender(
                "networkit",
                nk_bfs,
                lambda b: count(int((np.asarray(b.getDistances()) < 1e300).sum())),
            ),
            Contender(
                "igraph", lambda: ig_graph.bfs(source)[0], lambda v: count(len(v))
            ),
            Contender(
                "scipy",
                lambda: csgraph.breadth_first_order(
                    a, source, directed=True, return_predecessors=False
                ),
                lambda v: count(len(v)),
            ),
        ]
    else:
        reference = connected_components(graph).values
        components = int(np.count_nonzero(reference == np.arange(n)))

        def same(k: int) -> None:
            assert k == components, (k, components)

        def nk_cc(kind: Any) -> Callable[[], Any]:
            def run() -> Any:
                c = kind(nk_graph)
                c.run()
                return c

            return run

        if symmetric:
            nk_kinds = [
                ("networkit", nk.components.ConnectedComponents),
                ("networkit-parallel", nk.components.ParallelConnectedComponents),
            ]
        else:
            nk_kinds = [("networkit", nk.components.WeaklyConnectedComponents)]
        out = [
            Contender(
                "strata",
                lambda: connected_components(graph).values,
                lambda v: same(int(np.count_nonzero(v == np.arange(n)))),
            ),
            *(
                Contender(name, nk_cc(kind), lambda c: same(c.numberOfComponents()))
                for name, kind in nk_kinds
            ),
            Contender(
                "igraph",
                lambda: ig_graph.connected_components(mode="weak"),
                lambda c: same(len(c)),
            ),
            Contender(
                "scipy",
                lambda: csgraph.connected_components(
                    a, directed=True, connection="weak"
                ),
                lambda r: same(int(r[0])),
            ),
        ]
    return out


def measure(cs: list[Contender], rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {c.name: [] for c in cs}
    for c in cs:  # warm-up (JIT, caches), checked
        c.check(c.run())
    for _ in range(rounds):
        for c in cs:
            start = time.perf_counter()
            c.run()
            times[c.name].append(time.perf_counter() - start)
    return times


def versions() -> dict[str, str]:
    import igraph
    import networkit
    import scipy

    return {
        "networkit": networkit.__version__,
        "igraph": igraph.__version__,
        "scipy": scipy.__version__,
        "numba": numba.__version__,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="small graphs (dev)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--algorithms", default="pagerank,bfs,cc")
    parser.add_argument("--graphs", default="G1,G2")
    args = parser.parse_args(argv)
    numba.set_num_threads(THREADS)
    import networkit as nk

    nk.setNumberOfThreads(THREADS)
    env = [f"{k}={os.environ[k]}" for k in ("OMP_WAIT_POLICY",) if k in os.environ]
    command = shlex.join([*env, ".venv/bin/python", *sys.argv])
    vers = versions()
    load_before = os.getloadavg()[0]
    cold = {}
    tiny = CSRGraph.from_edges(np.array([0, 1]), np.array([1, 0]), 3)
    for name, fn in (
        ("pagerank", lambda: pagerank(tiny, iterations=2)),
        ("bfs", lambda: bfs(tiny, 0)),
        ("cc", lambda: connected_components(tiny)),
    ):
        start = time.perf_counter()
        fn()
        cold[name] = round(time.perf_counter() - start, 3)
    rows: list[dict[str, Any]] = []
    graphs = build_graphs(args.quick)
    for gname in args.graphs.split(","):
        desc, graph, symmetric = graphs[gname]
        source = int(np.argmax(graph.out_degree()))
        for algorithm in args.algorithms.split(","):
            cs = contenders(graph, symmetric, algorithm, source)
            times = measure(cs, args.rounds)
            med = {k: statistics.median(v) for k, v in times.items()}
            peers = [k for k in med if k != "strata"]
            fastest = min(peers, key=lambda k: med[k])
            line = "  ".join(f"{k} {v:.4f}" for k, v in med.items())
            print(f"{gname} {algorithm}: {line}", flush=True)
            work = {
                "pagerank": f"PageRank {ITERATIONS} iterations",
                "bfs": f"BFS from the top hub (vertex {source})",
                "cc": "weak connected components",
            }[algorithm]
            for peer in peers:
                ratio = med["strata"] / med[peer]
                is_fastest = peer == fastest and algorithm in ("pagerank", "cc")
                if peer == "scipy" and is_fastest:
                    target = "< 1.0 (faster than scipy, here also the fastest peer)"
                    met = ratio < 1.0
                elif peer == "scipy":
                    target, met = "< 1.0 (faster than scipy)", ratio < 1.0
                elif is_fastest:
                    target, met = "<= 1.5 (fastest peer)", ratio <= 1.5
                else:
                    target, met = "none (informational)", None
                note = (
                    f"{THREADS} threads; the peer is "
                    f"{'' if peer == fastest else 'not '}the fastest of "
                    f"networkit/igraph/scipy here; load average at start "
                    f"{load_before:.2f}, here {os.getloadavg()[0]:.2f}; {ENV}; "
                    f"cold first call (cached numba kernel load) of the "
                    f"strata kernel {cold[algorithm]} s (not counted)"
                )
                if peer == "igraph" and algorithm == "pagerank":
                    note += "; igraph's PRPACK solves to convergence (no fixed count)"
                if peer == "scipy" and algorithm == "pagerank":
                    note += "; scipy: 20 power iterations of csr @ x (the oracle)"
                if peer == "scipy" and algorithm == "bfs":
                    note += "; scipy: breadth_first_order (order only, no distances)"
                rows.append(
                    {
                        "work": f"{work}, {desc}",
                        "metric": "seconds",
                        "better": "lower",
                        "strata": round(med["strata"], 5),
                        "strata_spread": [
                            round(min(times["strata"]), 5),
                            round(max(times["strata"]), 5),
                        ],
                        "peer": f"{peer.split('-')[0]} {vers[peer.split('-')[0]]}"
                        + (" (parallel CC)" if peer.endswith("parallel") else ""),
                        "peer_value": round(med[peer], 5),
                        "peer_spread": [
                            round(min(times[peer]), 5),
                            round(max(times[peer]), 5),
                        ],
                        "ratio": round(ratio, 3),
                        "target": target,
                        "met": met,
                        "command": command,
                        "note": note,
                    }
                )
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps({"topic": "algorithms", "rows": rows}, indent=1) + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
