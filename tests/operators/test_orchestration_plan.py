"""The orchestration planner against brute-force references (tdorch.md §3)."""

import doctest
import importlib
import pkgutil

import numpy as np
import pytest

import strata.operators.orchestration
from strata.operators.orchestration import (
    HashPush,
    PullAll,
    PushPull,
    break_even_k,
    combine,
    decide,
    group_by_key,
    hash_owner,
)

MODULES = [
    "strata.operators.orchestration",
    *sorted(
        info.name
        for info in pkgutil.walk_packages(
            strata.operators.orchestration.__path__,
            prefix="strata.operators.orchestration.",
        )
    ),
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(name)
    assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0


def test_group_by_key_matches_python_grouping() -> None:
    rng = np.random.default_rng(0)
    keys = rng.integers(-5, 40, size=500)
    g = group_by_key(keys)
    ref: dict[int, list[int]] = {}
    for i, k in enumerate(keys.tolist()):
        ref.setdefault(k, []).append(i)
    assert g.keys.tolist() == sorted(ref)
    assert g.counts.tolist() == [len(ref[k]) for k in sorted(ref)]
    for j, k in enumerate(g.keys.tolist()):
        s = g.starts[j]
        assert g.order[s : s + g.counts[j]].tolist() == ref[k]  # stable
    assert (g.keys[g.inverse] == keys).all()
    assert g.offsets[-1] == keys.size


def test_group_by_key_empty() -> None:
    g = group_by_key(np.zeros(0, np.int64))
    assert len(g) == 0
    assert g.offsets.tolist() == [0]


@pytest.mark.parametrize("op", ["sum", "min", "max"])
def test_combine_matches_sequential_fold(op: str) -> None:
    rng = np.random.default_rng(1)
    keys = rng.integers(0, 20, size=300)
    vals = rng.normal(size=(300, 3))
    k, v = combine(keys, vals, op)  # type: ignore[arg-type]
    f = {"sum": np.add, "min": np.minimum, "max": np.maximum}[op]
    for j, key in enumerate(k.tolist()):
        rows = vals[keys == key]
        acc = rows[0].copy()
        for r in rows[1:]:
            acc = f(acc, r)
        np.testing.assert_allclose(v[j], acc, rtol=1e-12)
    # Deterministic: the same input gives the same bits.
    _, v2 = combine(keys, vals, op)  # type: ignore[arg-type]
    assert v2.tobytes() == v.tobytes()


def test_break_even_k() -> None:
    assert break_even_k(8 * 64, 8, 8, header_bytes=16) == 33
    assert break_even_k(1, 100, 100) == 1
    assert break_even_k(10**9, 1, 1, k_max=64) == 64


def test_decide_rmw_and_update_never_pull() -> None:
    counts = np.array([1, 100, 100])
    owners = np.array([1, 1, 0])
    rmw = decide(counts, owners, 0, 4, commutative=False)
    upd = decide(counts, owners, 0, 4, combined=True)
    for d in (rmw, upd):
        assert d.pull.tolist() == [False, False, False]
        assert d.push.tolist() == [True, True, False]
    d = decide(counts, owners, 0, 4)
    assert d.pull.tolist() == [False, True, False]


def test_strategies_cover_every_group_once() -> None:
    rng = np.random.default_rng(2)
    keys = rng.zipf(1.5, size=2000) % 500
    owners = hash_owner(keys, 4)
    for s in (PushPull(k=8), HashPush(), HashPush(combiner=True), PullAll()):
        for kind in ("read", "update", "rmw", "read_update"):
            p = s.plan(keys, owners, 1, 4, kind)  # type: ignore[arg-type]
            d = p.decision
            assert (d.local.astype(int) + d.push + d.pull == 1).all()
            assert d.local.tolist() == (p.owners == 1).tolist()
            if kind in ("update", "rmw"):
                assert not d.pull.any()
    pp = PushPull(k=8).plan(keys, owners, 1, 4, "read")
    assert (pp.groups.counts[pp.decision.push] <= 8).all()
    assert (pp.groups.counts[pp.decision.pull] > 8).all()
    assert pp.pulled_tasks() + pp.local_tasks() + pp.pushed_items().sum() == keys.size


def test_push_pull_with_no_skew_is_hash_push() -> None:
    keys = np.arange(1000) % 997  # every group has 1-2 tasks
    owners = hash_owner(keys, 4)
    pp = PushPull(k=4).plan(keys, owners, 0, 4, "read")
    hp = HashPush().plan(keys, owners, 0, 4, "read")
    assert not pp.decision.pull.any()
    assert pp.pushed_items().tolist() == hp.pushed_items().tolist()


def test_hash_owner_spreads_keys() -> None:
    o = hash_owner(np.arange(100_000), 16)
    counts = np.bincount(o, minlength=16)
    assert counts.min() > 0.95 * 100_000 / 16
