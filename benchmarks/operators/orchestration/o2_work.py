"""O2's per-rank work (a module the gang workers import; see o2_zmq.py)."""

from __future__ import annotations

import hashlib
import time
from typing import Any

import numpy as np

from strata.engine.mesh.base import Mesh, Tag
from strata.operators.orchestration import HashPush, PullAll, PushPull
from strata.operators.orchestration.plan import Strategy, TaskKind
from strata.operators.orchestration.runtime import Batch, KeyValueStore, run_batch
from strata.operators.orchestration.workload import payloads, zipf_keys

STRATEGIES: dict[str, Strategy] = {
    "hash-push": HashPush(),
    "hash-push+combiner": HashPush(combiner=True),
    "pull-all": PullAll(),
    "push-pull": PushPull(k="auto"),
}


def batch_tasks(
    b: int, rank: int, size: int, n_tasks: int, n_keys: int, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """Rank ``rank``'s share of batch ``b`` (the one-process run concatenates them)."""
    seed = 7919 * b + 104729 * size + rank
    keys = zipf_keys(n_tasks // size, n_keys=n_keys, alpha=alpha, seed=seed)
    return keys, payloads(keys.size, 1, seed=seed)


def digest(a: np.ndarray | None) -> str:
    return "" if a is None else hashlib.sha256(np.ascontiguousarray(a)).hexdigest()


def o2_rank(
    mesh: Mesh,
    kind: TaskKind,
    names: list[str],
    n_tasks: int,
    n_keys: int,
    width: int,
    alpha: float,
    n_batches: int,
) -> dict[str, Any]:
    """Run ``n_batches`` batches per strategy, interleaved (A B C A B C ...)."""
    stores = {n: KeyValueStore(n_keys, width, 1, mesh.rank, mesh.size) for n in names}
    busy: dict[str, list[float]] = {n: [] for n in names}
    wall: dict[str, list[float]] = {n: [] for n in names}
    sent: dict[str, list[int]] = {n: [] for n in names}
    tasks: dict[str, list[int]] = {n: [] for n in names}
    digests: dict[str, list[str]] = {n: [] for n in names}
    step = 0
    for b in range(n_batches):
        keys, pay = batch_tasks(b, mesh.rank, mesh.size, n_tasks, n_keys, alpha)
        for n in names:
            step += 1
            mesh.barrier(Tag(step, 0))  # start every strategy's batch together
            before = mesh.stats.bytes_sent
            t0, c0 = time.perf_counter(), time.process_time()
            out = run_batch(
                mesh, stores[n], Batch(kind, keys, pay), STRATEGIES[n], superstep=step
            )
            busy[n].append(time.process_time() - c0)
            wall[n].append(time.perf_counter() - t0)
            sent[n].append(mesh.stats.bytes_sent - before)
            tasks[n].append(out.counters.tasks_run)
            digests[n].append(digest(out.results))
    return {
        "busy": busy,
        "wall": wall,
        "sent": sent,
        "tasks": tasks,
        "digests": digests,
        "store": {n: digest(s.rows) for n, s in stores.items()},
    }
