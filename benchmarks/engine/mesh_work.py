"""SPMD functions timed by ``bench_mesh.py`` (own module: gang workers import it)."""

from __future__ import annotations

import time

import numpy as np

from strata.engine.mesh import Mesh, Tag


def rounds_s(mesh: Mesh, nbytes: int, rounds: int, warmup: int) -> float:
    """Seconds per exchange round, ``nbytes`` per peer (one float64 array each).

    Warm-up rounds first (connections, buffers), then a barrier, then ``rounds``
    timed rounds; every rank reports its own time (the caller takes the slowest).
    """
    payload = np.zeros(max(0, nbytes // 8), np.float64)
    out = [[payload] if peer != mesh.rank else [] for peer in range(mesh.size)]
    for r in range(warmup):
        mesh.exchange(out, Tag(0, r))
    mesh.barrier(Tag(1, 0))
    start = time.perf_counter()
    for r in range(rounds):
        got = mesh.exchange(out, Tag(2, r))
    elapsed = time.perf_counter() - start
    assert all(len(arrays) == (peer != mesh.rank) for peer, arrays in enumerate(got))
    return elapsed / rounds
