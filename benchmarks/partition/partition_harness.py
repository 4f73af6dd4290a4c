"""Shared pieces of the partitioning benchmarks: graph suite, edge files, measuring.

The parent (``test_partition_suite.py``) writes every suite graph once to a folder
as the CSR of its undirected simple graph (``indptr.npy``, ``indices.npy``) plus a
shuffled undirected edge file (``edges.bin``: int32 pairs, random order, seed 0),
then starts one fresh ``run_partitioner.py`` process per (method, graph, k). The
child loads its input in native form (CSR for multilevel/pymetis/streaming, the
edge file for GREM), warms numba up on a tiny graph (``warmup_s``: compile or cache
load), then runs the seeds; ``peak_rss_bytes`` is the kernel's RSS high-water mark
during the runs (``VmHWM``, reset through ``/proc/self/clear_refs`` once the input
is loaded and numba warmed up) minus the RSS at that moment. pymetis holds the
GIL, so a sampling thread alone would miss its peak.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

#: name -> (storage graph spec, drop isolated vertices). Sizes follow issue 4.
SUITE: dict[str, tuple[str, bool]] = {
    "rmat": ("rmat:scale=16,edge_factor=16,seed=0,undirected=true", False),
    "rmat-core": ("rmat:scale=16,edge_factor=16,seed=0,undirected=true", True),
    "sbm": ("sbm:n=100000,blocks=64,degree=20,intra=0.7,seed=0,features=0", False),
    "rgg": ("rgg:n=100000,radius=0.00618,seed=0", False),
    "cora": ("planetoid:cora", False),
}
KS = (2, 4, 8, 16)
SEEDS = (1, 2, 3)  # METIS seeds 0 and 1 give identical partitions; start at 1


def write_graph(name: str, folder: Path) -> dict[str, Any]:
    """Write suite graph ``name`` to ``folder``; return its stats."""
    from strata.partition.metrics import as_undirected_simple, undirected_edges
    from strata.storage import CSRGraph
    from strata.storage.spec import load_graph

    spec, drop_isolated = SUITE[name]
    graph = as_undirected_simple(load_graph(spec).graph)
    isolated = int((np.diff(graph.indptr) == 0).sum())
    if drop_isolated and isolated:
        keep = np.flatnonzero(np.diff(graph.indptr) > 0)
        new_id = np.full(graph.num_nodes, -1, dtype=np.int64)
        new_id[keep] = np.arange(keep.size)
        src, dst = graph.to_coo()
        graph = CSRGraph.from_edges(new_id[src], new_id[dst], keep.size)
        isolated = 0
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "indptr.npy", np.asarray(graph.indptr))
    np.save(folder / "indices.npy", np.asarray(graph.indices))
    src, dst = undirected_edges(graph)
    perm = np.random.default_rng(0).permutation(src.size)
    pairs = np.empty((src.size, 2), dtype=np.int32)
    pairs[:, 0] = src[perm]
    pairs[:, 1] = dst[perm]
    pairs.tofile(folder / "edges.bin")
    stats = {
        "name": name,
        "spec": spec,
        "num_nodes": graph.num_nodes,
        "num_edges": int(src.size),
        "isolated": isolated,
    }
    (folder / "stats.json").write_text(json.dumps(stats))
    return stats


def load_csr(folder: Path) -> Any:
    """The suite graph as a CSRGraph (the 'native form' of CSR methods)."""
    from strata.storage import CSRGraph

    indptr = np.load(folder / "indptr.npy")
    indices = np.load(folder / "indices.npy")
    return CSRGraph(indptr=indptr, indices=indices, num_nodes=indptr.size - 1)


@dataclass
class FileEdgeChunks:
    """GREM's edge stream from ``edges.bin``: explicit reads into one reused buffer.

    No memory map: touched pages of a map would count as resident memory.
    """

    path: Path
    num_nodes: int

    @property
    def num_edges(self) -> int:
        """Undirected edges in the file."""
        return os.path.getsize(self.path) // 8

    def chunks(self, chunk_edges: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Yield ``(src, dst)`` views of a buffer refilled for every chunk."""
        buffer = np.empty((chunk_edges, 2), dtype=np.int32)
        with open(self.path, "rb", buffering=0) as f:
            while True:
                got = f.readinto(memoryview(buffer).cast("B")) // 8
                if got == 0:
                    return
                yield buffer[:got, 0], buffer[:got, 1]


def run_child(args: list[str], timeout: float = 1200) -> dict[str, Any]:
    """Run ``run_partitioner.py`` with ``args`` in a fresh process; its JSON line."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("NUMBA_NUM_THREADS", "1")
    cmd = [sys.executable, str(HERE / "run_partitioner.py"), *args]
    start = time.perf_counter()
    out = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    result["process_s"] = time.perf_counter() - start
    return result


def median(values: list[float]) -> float:
    """Median of a non-empty list."""
    return float(np.median(values))
