"""TD-Orch batches on a mesh give the one-rank answer, for every strategy and P."""

from typing import Any

import numpy as np
import pytest

from strata.engine.mesh.base import Mesh
from strata.engine.mesh.sim import run_sim
from strata.operators.orchestration import HashPush, PullAll, PushPull
from strata.operators.orchestration.cost_model import model_counts, run_counts
from strata.operators.orchestration.plan import Strategy, TaskKind
from strata.operators.orchestration.runtime import (
    Batch,
    KeyValueStore,
    initial_rows,
    run_batch,
)

N_KEYS, WIDTH, TW = 60, 4, 2
STRATEGIES: list[Strategy] = [
    PushPull(k=3),
    PushPull(k=3, fanout=2),  # the tree triggers at P = 4
    PushPull(k="auto"),
    HashPush(),
    HashPush(combiner=True),
    PullAll(),
]


def workload(n_tasks: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    keys = (rng.zipf(1.4, size=n_tasks) - 1) % N_KEYS
    pay = rng.integers(-3, 4, size=(n_tasks, TW)).astype(np.float64)  # exact sums
    return keys.astype(np.int64), pay


def rank_slice(n: int, rank: int, size: int) -> slice:
    return slice(rank * n // size, (rank + 1) * n // size)


def run_rank(
    mesh: Mesh,
    kinds: list[tuple[TaskKind, str]],
    strategy: Strategy,
    n_tasks: int,
) -> dict[str, Any]:
    store = KeyValueStore(N_KEYS, WIDTH, TW, mesh.rank, mesh.size)
    outs = []
    counters = []
    for step, (kind, op) in enumerate(kinds):
        keys, pay = workload(n_tasks, seed=step)
        sl = rank_slice(n_tasks, mesh.rank, mesh.size)
        batch = Batch(kind, keys[sl], pay[sl], op)  # type: ignore[arg-type]
        out = run_batch(mesh, store, batch, strategy, superstep=step)
        outs.append(out.results)
        counters.append(out.counters)
    return {"results": outs, "keys": store.keys, "rows": store.rows, "c": counters}


def gather(
    per_rank: list[dict[str, Any]], n_steps: int
) -> tuple[list[Any], np.ndarray]:
    results = []
    for step in range(n_steps):
        parts = [r["results"][step] for r in per_rank]
        results.append(None if parts[0] is None else np.concatenate(parts))
    rows = np.zeros((N_KEYS, WIDTH))
    for r in per_rank:
        rows[r["keys"]] = r["rows"]
    return results, rows


KIND_SETS = {
    "read": [("read", "sum")],
    "update": [
        ("update", "sum"),
        ("update", "min"),
        ("update", "max"),
        ("read", "sum"),
    ],
    "rmw": [("rmw", "sum"), ("read", "sum")],
    "read_update": [("read_update", "sum"), ("read", "sum")],
}


@pytest.mark.parametrize("kinds", list(KIND_SETS))
@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.name)
def test_same_answer_on_1_2_4_ranks(kinds: str, strategy: Strategy) -> None:
    plan = KIND_SETS[kinds]
    n = 400
    ref_res, ref_rows = gather(run_sim(run_rank, 1, plan, HashPush(), n), len(plan))
    for size in (2, 4):
        res, rows = gather(run_sim(run_rank, size, plan, strategy, n), len(plan))
        np.testing.assert_array_equal(rows, ref_rows)
        for a, b in zip(res, ref_res, strict=True):
            if b is None:
                assert a is None
            else:
                np.testing.assert_array_equal(a, b)


def test_one_rank_matches_a_python_oracle() -> None:
    keys, pay = workload(300, seed=0)
    rows = initial_rows(np.arange(N_KEYS), WIDTH)
    expect = rows[keys, :TW] * pay + rows[keys, WIDTH - TW :]
    (r,) = run_sim(run_rank, 1, [("read", "sum")], PushPull(), 300)
    np.testing.assert_array_equal(r["results"][0], expect)
    # RMW, sequentially in task order
    keys, pay = workload(300, seed=0)
    for k, p in zip(keys.tolist(), pay, strict=True):
        rows[k, :TW] = rows[k, :TW] * 0.5 + p
    (r,) = run_sim(run_rank, 1, [("rmw", "sum")], PushPull(), 300)
    np.testing.assert_array_equal(r["rows"], rows[r["keys"]])


def test_push_pull_pulls_hot_keys_and_tree_caps_copies() -> None:
    plan = [("read_update", "sum")]
    per_rank = run_sim(run_rank, 4, plan, PushPull(k=2, fanout=2), 2000)
    cs = [r["c"][0] for r in per_rank]
    assert sum(c.requests_sent for c in cs) > 0
    assert max(c.max_copies_per_key for c in cs) <= 2
    # Without the tree some owner sends 3 copies of one hot key.
    per_rank = run_sim(run_rank, 4, plan, PushPull(k=2, fanout=16), 2000)
    assert max(r["c"][0].max_copies_per_key for r in per_rank) == 3


def test_rounds_are_deterministic() -> None:
    plan = KIND_SETS["read_update"]
    a = run_sim(run_rank, 4, plan, PushPull(k=2, fanout=2), 500)
    b = run_sim(run_rank, 4, plan, PushPull(k=2, fanout=2), 500)
    for x, y in zip(a, b, strict=True):
        assert x["rows"].tobytes() == y["rows"].tobytes()
        assert x["results"][0].tobytes() == y["results"][0].tobytes()


def one_batch(
    mesh: Mesh, kind: TaskKind, strategy: Strategy, n_tasks: int, seed: int
) -> tuple[Any, Any, Any]:
    store = KeyValueStore(N_KEYS, WIDTH, TW, mesh.rank, mesh.size)
    keys, pay = workload(n_tasks, seed=seed)
    sl = rank_slice(n_tasks, mesh.rank, mesh.size)
    out = run_batch(mesh, store, Batch(kind, keys[sl], pay[sl]), strategy)
    return out.counters, mesh.stats, out.plan


@pytest.mark.parametrize("kind", ["read", "update", "rmw", "read_update"])
@pytest.mark.parametrize(
    "strategy",
    [PushPull(k=2), PushPull(k=2, fanout=2), HashPush(), HashPush(True), PullAll()],
    ids=lambda s: s.name,
)
def test_cost_model_agrees_with_a_run(kind: TaskKind, strategy: Strategy) -> None:
    for size in (2, 4):
        per_rank = run_sim(one_batch, size, kind, strategy, 1500, 3)
        counters = [r[0] for r in per_rank]
        real = run_counts(counters, [r[1] for r in per_rank])
        reads = kind in ("read", "read_update")
        model = model_counts(
            [r[2] for r in per_rank],
            data_bytes=8 * WIDTH,
            task_bytes=8 * TW,
            result_bytes=8 * TW if reads else 0,
        )
        assert model.tasks.tolist() == real.tasks.tolist()
        assert model.bytes.tolist() == real.bytes.tolist()
        assert model.frames.tolist() == real.frames.tolist()
        assert model.copies.tolist() == real.copies.tolist()
        assert model.requests.tolist() == real.requests.tolist()
        assert model.max_copies_per_key.tolist() == real.max_copies_per_key.tolist()
        assert model.rounds == real.rounds


def zmq_rank(mesh: Mesh, n_tasks: int) -> list[Any]:
    return run_rank(mesh, KIND_SETS["read_update"], PushPull(k=2, fanout=1), n_tasks)[
        "results"
    ]


@pytest.mark.slow
def test_zmq_processes_give_the_sim_answer() -> None:
    from strata.engine.mesh import run_mesh

    sim = run_sim(zmq_rank, 4, 300)
    real = run_mesh(zmq_rank, 4, 300, kind="zmq", timeout_s=60)
    for a, b in zip(sim, real, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
