"""SPMD functions for the mesh tests (a module of their own: gang workers import it).

Kept free of pytest so a forked worker imports only this module and the engine.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from strata.engine.mesh import Mesh, Tag

DTYPES = ("int64", "float64", "bool")


def traffic(rank: int, size: int, superstep: int, seed: int) -> list[list[np.ndarray]]:
    """What ``rank`` sends to every peer in one superstep: random, reproducible.

    Random array counts (0 to 3: empty messages), lengths (0-size arrays
    included) and the three dtypes; every few supersteps many small arrays.
    """
    out: list[list[np.ndarray]] = []
    for peer in range(size):
        rng = np.random.default_rng([seed, superstep, rank, peer])
        count = int(rng.integers(0, 4)) if superstep % 3 else int(rng.integers(0, 40))
        arrays = []
        for i in range(count):
            n = int(rng.integers(0, 50)) if i % 4 else 0
            kind = DTYPES[int(rng.integers(0, 3))]
            if kind == "int64":
                arrays.append(rng.integers(-(1 << 40), 1 << 40, n, dtype=np.int64))
            elif kind == "float64":
                arrays.append(rng.standard_normal((n, 2)))
            else:
                arrays.append(rng.random(n) < 0.5)
        out.append(arrays)
    return out


def spmd(mesh: Mesh, supersteps: int, seed: int) -> dict[str, Any]:
    """Several rounds of random traffic, allreduces and barriers; what came back."""
    received: list[list[list[np.ndarray]]] = []
    sums = []
    for step in range(supersteps):
        got = mesh.exchange(traffic(mesh.rank, mesh.size, step, seed), Tag(step, 0))
        received.append([[a.copy() for a in arrays] for arrays in got])
        local = np.array([sum(float(a.sum()) for arrays in got for a in arrays)])
        sums.append(mesh.allreduce(local / 3.0, "sum", Tag(step, 1)))
        mesh.barrier(Tag(step, 2))
    low = mesh.allreduce(np.array([mesh.rank, -mesh.rank]), "min", Tag(supersteps, 0))
    high = mesh.allreduce(np.array([mesh.rank], np.int64), "max", Tag(supersteps, 1))
    stats = mesh.stats
    return {
        "received": received,
        "sums": [s.tobytes() for s in sums],
        "low": low.tolist(),
        "high": high.tolist(),
        "stats": (
            stats.frames_sent,
            stats.bytes_sent,
            stats.frames_received,
            stats.bytes_received,
            stats.rounds,
            dict(stats.sent_to),
        ),
    }


def raises_on(mesh: Mesh, bad_rank: int) -> None:
    """Rank ``bad_rank`` raises after one round; the others go on exchanging."""
    for step in range(3):
        if mesh.rank == bad_rank and step == 1:
            raise ValueError(f"boom on rank {mesh.rank}")
        mesh.barrier(Tag(step, 0))


def dies_on(mesh: Mesh, bad_rank: int) -> None:
    """Rank ``bad_rank`` exits abruptly (no cleanup) after one round."""
    for step in range(3):
        if mesh.rank == bad_rank and step == 1:
            os._exit(3)
        mesh.barrier(Tag(step, 0))


def staggered(mesh: Mesh, rounds: int) -> list[list[int]]:
    """Ranks start late by rank and exchange one array per peer per round.

    The early ranks post many rounds' worth of work only as fast as the late
    ones let them; each round's arrays name the round they were sent in.
    """
    time.sleep(0.05 * mesh.rank)
    seen = []
    for r in range(rounds):
        out = [[np.array([mesh.rank, r, peer])] for peer in range(mesh.size)]
        got = mesh.exchange(out, Tag(0, r))
        seen.append([int(a[0][1]) for a in got])
    return seen
