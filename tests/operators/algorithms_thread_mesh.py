"""A minimal threaded Mesh for the distributed-algorithm tests (counts bytes, frames).

Independent of the engine's meshes on purpose: the algorithms' tests pin the
algorithms against the Mesh contract alone, and the engine's meshes are tested
against the same contract in tests/engine.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from strata.engine.mesh.base import MeshOp, MeshStats, Tag


class _Shared:
    def __init__(self, size: int) -> None:
        self.size = size
        self.barrier = threading.Barrier(size, timeout=60)
        self.boxes: list[list[Sequence[np.ndarray]]] = [
            [[] for _ in range(size)] for _ in range(size)
        ]


class ThreadMesh:
    """One rank of a group of threads sharing mailboxes."""

    def __init__(self, shared: _Shared, rank: int) -> None:
        self._shared = shared
        self._rank = rank
        self._stats = MeshStats()

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def size(self) -> int:
        return self._shared.size

    @property
    def stats(self) -> MeshStats:
        return self._stats

    def exchange(
        self, outgoing: Sequence[Sequence[np.ndarray]], tag: Tag
    ) -> list[list[np.ndarray]]:
        assert len(outgoing) == self.size
        for peer, arrays in enumerate(outgoing):
            self._shared.boxes[peer][self._rank] = list(arrays)
            if peer != self._rank:
                self._stats.frames_sent += 1
                self._stats.bytes_sent += sum(int(a.nbytes) for a in arrays)
        self._stats.rounds += 1
        self._shared.barrier.wait()
        incoming = [list(self._shared.boxes[self._rank][p]) for p in range(self.size)]
        self._shared.barrier.wait()
        return incoming

    def allreduce(self, value: np.ndarray, op: MeshOp, tag: Tag) -> np.ndarray:
        parts = self.exchange([[value]] * self.size, tag)
        fold = {"sum": np.add, "min": np.minimum, "max": np.maximum}[op]
        out = parts[0][0].copy()
        for frames in parts[1:]:
            out = fold(out, frames[0])
        return out

    def barrier(self, tag: Tag) -> None:
        self.exchange([[] for _ in range(self.size)], tag)

    def close(self) -> None:
        pass


def run_threads(fn: Callable[..., Any], size: int, *args: Any) -> list[Any]:
    """Run ``fn(mesh, *args)`` on ``size`` threads; return results by rank."""
    shared = _Shared(size)
    results: list[Any] = [None] * size
    errors: list[BaseException] = []

    def main(rank: int) -> None:
        try:
            results[rank] = fn(ThreadMesh(shared, rank), *args)
        except BaseException as exc:  # re-raised below
            errors.append(exc)
            shared.barrier.abort()

    threads = [threading.Thread(target=main, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results
