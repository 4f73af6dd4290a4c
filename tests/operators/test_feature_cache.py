"""Remote-row caches (frequency, degree, Belady, none) and the row router."""

from __future__ import annotations

import itertools
import threading
from collections import Counter

import numpy as np
import pytest

from strata.operators.errors import OperatorError
from strata.operators.trainers.sampled.cache import (
    BeladyCache,
    CachePolicy,
    FrequencyCache,
    _toy_schedule,
    find_sorted,
    make_cache,
    resolve_capacity,
)
from strata.operators.trainers.sampled.rows import RowRouter
from strata.storage.features.traffic import InProcessOwners, Traffic, payload_bytes

D = 3
N = 60
OWNER = (np.arange(N) % 4).astype(np.int32)  # rank 0 owns multiples of 4
TABLE = np.arange(N * D, dtype=np.float32).reshape(N, D)


def remote_schedule(seed: int, batches: int = 12, size: int = 14):
    rng = np.random.default_rng(seed)
    remote = np.flatnonzero(OWNER != 0)
    # Skewed use: low remote ids are drawn more often.
    p = 1.0 / np.arange(1, remote.size + 1)
    lists = [
        rng.choice(remote, size, replace=False, p=p / p.sum()).tolist()
        for _ in range(batches)
    ]
    return lists, _toy_schedule(lists)


def cache_of(policy: str, capacity: int | float, **kw):
    return make_cache(
        policy,
        capacity,
        attr="x",
        owner=OWNER,
        rank=0,
        row_shape=(D,),
        dtype=np.float32,
        degree=kw.pop("degree", None),
        **kw,
    )


def run_epoch(cache, schedule, fetcher) -> int:
    """Look up and admit every batch; return the hits and check the rows."""
    hits = 0
    for b in range(schedule.num_batches):
        ids = schedule.remote(b)
        hit, rows = cache.lookup(b, ids)
        assert np.array_equal(rows, TABLE[ids[hit]])
        hits += int(hit.sum())
        miss = ids[~hit]
        cache.admit(b, miss, TABLE[miss])
    return hits


def test_resolve_capacity() -> None:
    assert resolve_capacity(0.25, 1000) == 250
    assert resolve_capacity(1.0, 7) == 7
    assert resolve_capacity(12, 7) == 12
    with pytest.raises(OperatorError, match="fraction in"):
        resolve_capacity(1.5, 10)
    with pytest.raises(OperatorError, match="rows >= 0"):
        resolve_capacity(-1, 10)
    with pytest.raises(OperatorError, match="rows"):
        resolve_capacity(True, 10)


def test_find_sorted_matches_searchsorted() -> None:
    rng = np.random.default_rng(0)
    ids = np.unique(rng.integers(0, 1000, 300))
    query = rng.integers(-5, 1005, 500)
    pos = find_sorted(ids, query)
    expected = {int(v): i for i, v in enumerate(ids)}
    assert pos.tolist() == [expected.get(int(q), -1) for q in query]
    assert find_sorted(np.empty(0, np.int64), query).tolist() == [-1] * 500


@pytest.mark.parametrize("capacity", [0, 3, 10, 40])
def test_frequency_hot_set_and_hits_are_the_brute_force_ones(capacity: int) -> None:
    lists, schedule = remote_schedule(1)
    counts = Counter(v for b in lists for v in b)
    ranked = sorted(
        (v for v, c in counts.items() if c >= 2), key=lambda v: (-counts[v], v)
    )
    hot = sorted(ranked[:capacity])
    fetcher = InProcessOwners({"x": TABLE}, OWNER)
    cache = cache_of("frequency", capacity)
    assert cache.plan(schedule).tolist() == hot
    cache.fill_pending(schedule, fetcher)
    cache.swap()
    assert cache.held_ids().tolist() == hot
    hits = run_epoch(cache, schedule, fetcher)
    assert hits == cache.hits == sum(len(set(b) & set(hot)) for b in lists)
    assert cache.misses == sum(len(b) for b in lists) - hits
    owners = {int(OWNER[v]) for v in hot}
    assert cache.fill == Traffic(len(hot), payload_bytes(len(hot), D * 4), len(owners))
    assert cache.cache_bytes == 2 * capacity * D * 4  # R6: two buffers


def test_frequency_fill_copies_rows_it_already_holds() -> None:
    fetcher = InProcessOwners({"x": TABLE}, OWNER)
    cache = cache_of("frequency", 8)
    _, first = remote_schedule(2)
    _, second = remote_schedule(3)
    cache.fill_pending(first, fetcher)
    cache.swap()
    old = set(cache.held_ids().tolist())
    before = cache.fill.snapshot()
    cache.fill_pending(second, fetcher)
    # The active buffer still serves the old hot set until the swap.
    hit, rows = cache.lookup(0, np.array(sorted(old)))
    assert hit.all()
    assert np.array_equal(rows, TABLE[sorted(old)])
    cache.swap()
    new = set(cache.held_ids().tolist())
    fetched = sorted(new - old)
    assert (cache.fill - before).rows == len(fetched)
    assert (cache.fill - before).requests == len({int(OWNER[v]) for v in fetched})
    hit, rows = cache.lookup(0, np.array(sorted(new)))
    assert hit.all()
    assert np.array_equal(rows, TABLE[sorted(new)])


def test_keep_held_ranks_by_rows_saved() -> None:
    """keep_held: a held id is worth its count, another its count minus one."""
    fetcher = InProcessOwners({"x": TABLE}, OWNER)
    cache = cache_of("frequency", 9, keep_held=True)
    _, first = remote_schedule(11)
    lists, second = remote_schedule(12)
    cache.fill_pending(first, fetcher)
    cache.swap()
    held = set(cache.held_ids().tolist())
    counts = Counter(v for b in lists for v in b)
    value = {v: c - (v not in held) for v, c in counts.items()}
    ranked = sorted(
        (v for v in counts if v in held or counts[v] >= 2),
        key=lambda v: (-value[v], -counts[v], v),
    )
    before = cache.fill.snapshot()
    cache.fill_pending(second, fetcher)
    cache.swap()
    assert cache.held_ids().tolist() == sorted(ranked[:9])
    assert (cache.fill - before).rows == len(set(ranked[:9]) - held)
    assert run_epoch(cache, second, fetcher) == sum(
        len(set(b) & set(ranked[:9])) for b in lists
    )


def test_frequency_fill_runs_beside_lookups() -> None:
    """fill_pending writes only the pending buffer: lookups stay correct."""
    fetcher = InProcessOwners({"x": TABLE}, OWNER)
    cache = cache_of("frequency", 20)
    schedules = [remote_schedule(s)[1] for s in range(12)]
    cache.fill_pending(schedules[0], fetcher)
    cache.swap()
    errors: list[str] = []
    stop = threading.Event()

    def reader() -> None:
        query = np.flatnonzero(OWNER != 0)
        while not stop.is_set():
            hit, rows = cache.lookup(0, query)
            if not np.array_equal(rows, TABLE[query[hit]]):
                errors.append("wrong rows")

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for schedule in schedules[1:]:
            cache.fill_pending(schedule, fetcher)
            cache.swap()
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive()
    assert errors == []


def test_degree_cache_holds_top_degree_remote_rows_fetched_once() -> None:
    degree = np.random.default_rng(4).integers(0, 5, N)
    fetcher = InProcessOwners({"x": TABLE}, OWNER)
    cache = cache_of("degree", 6, degree=degree)
    remote = [v for v in range(N) if OWNER[v] != 0]
    top = sorted(sorted(remote, key=lambda v: (-degree[v], v))[:6])
    _, schedule = remote_schedule(5)
    for _ in range(3):
        cache.fill_pending(schedule, fetcher)
        cache.swap()
        assert cache.held_ids().tolist() == top
    assert cache.fill.rows == 6
    assert cache.cache_bytes == 6 * D * 4
    run_epoch(cache, schedule, fetcher)


def test_no_cache_misses_everything() -> None:
    cache = cache_of("none", 0.5)
    _, schedule = remote_schedule(6)
    fetcher = InProcessOwners({"x": TABLE}, OWNER)
    cache.fill_pending(schedule, fetcher)
    cache.swap()
    assert run_epoch(cache, schedule, fetcher) == 0
    assert cache.cache_bytes == 0
    assert cache.fill == Traffic()
    assert cache.policy is CachePolicy.NONE


def test_make_cache_errors() -> None:
    with pytest.raises(OperatorError, match="cache_policy"):
        cache_of("lru", 3)
    with pytest.raises(OperatorError, match="degree array"):
        cache_of("degree", 3)


def optimal_hits(lists: list[list[int]], capacity: int) -> int:
    """Most hits any cache of ``capacity`` admitting only what a batch read gets."""
    best: dict[frozenset[int], int] = {frozenset(): 0}
    for batch in lists:
        step: dict[frozenset[int], int] = {}
        for state, score in best.items():
            gained = score + len(state & set(batch))
            pool = sorted(state | set(batch))
            for size in range(min(capacity, len(pool)) + 1):
                for keep in itertools.combinations(pool, size):
                    key = frozenset(keep)
                    if step.get(key, -1) < gained:
                        step[key] = gained
        best = step
    return max(best.values())


@pytest.mark.parametrize("seed", range(5))
def test_belady_is_optimal_on_small_schedules(seed: int) -> None:
    rng = np.random.default_rng(seed)
    lists = [
        sorted(rng.choice([1, 2, 3, 5, 6, 7], int(rng.integers(1, 4)), replace=False))
        for _ in range(6)
    ]
    lists = [[int(v) for v in b] for b in lists]
    schedule = _toy_schedule(lists)
    fetcher = InProcessOwners({"x": TABLE}, OWNER)
    for capacity in (1, 2, 3):
        cache = BeladyCache(
            capacity, attr="x", owner=OWNER, rank=0, row_shape=(D,), dtype=np.float32
        )
        cache.fill_pending(schedule, fetcher)
        cache.swap()
        assert run_epoch(cache, schedule, fetcher) == optimal_hits(lists, capacity)
        assert cache.fill == Traffic()


def test_belady_beats_frequency_and_carries_rows_over_epochs() -> None:
    fetcher = InProcessOwners({"x": TABLE}, OWNER)
    belady, frequency = cache_of("belady", 10), cache_of("frequency", 10)
    assert isinstance(frequency, FrequencyCache)
    for seed in (7, 8, 9):
        _, schedule = remote_schedule(seed)
        scores = []
        for cache in (belady, frequency):
            cache.fill_pending(schedule, fetcher)
            cache.swap()
            scores.append(run_epoch(cache, schedule, fetcher))
        assert scores[0] >= scores[1]
    with pytest.raises(OperatorError, match="remote ids of the scheduled batch"):
        belady.admit(0, np.array([59]), TABLE[[59]])


def test_router_serves_local_cached_and_fetched_rows() -> None:
    fetcher = InProcessOwners({"x": TABLE}, OWNER)
    cache = cache_of("frequency", 5)
    lists, schedule = remote_schedule(10)
    cache.fill_pending(schedule, fetcher)
    cache.swap()
    router = RowRouter("x", OWNER, 0, TABLE[OWNER == 0], fetcher, cache)
    fill = fetcher.traffic.snapshot()
    rng = np.random.default_rng(0)
    local_total = 0
    for b, remote in enumerate(lists):
        local = rng.choice(np.flatnonzero(OWNER == 0), 4, replace=False)
        ids = rng.permutation(np.concatenate([local, remote]))
        assert np.array_equal(router.gather(b, ids), TABLE[ids])
        local_total += 4
    c = router.snapshot(schedule)
    assert c.local_rows == local_total
    assert c.remote_accesses == sum(len(b) for b in lists)
    assert c.cache_hits + c.cache_misses == c.remote_accesses
    assert c.miss == fetcher.traffic - fill
    assert c.remote == c.miss + c.fill
    assert c.miss.requests <= 3 * len(lists)  # one per other owner per batch
    assert c.hit_rate == pytest.approx(c.cache_hits / c.remote_accesses)
    assert c.coverage == pytest.approx(5 / schedule.distinct_remote)
    assert c.as_dict()["remote_rows"] == c.remote.rows
    router.reset()
    assert router.snapshot().remote_accesses == 0


def test_router_checks_its_inputs() -> None:
    fetcher = InProcessOwners({"x": TABLE}, OWNER)
    with pytest.raises(OperatorError, match="local_rows in RowRouter"):
        RowRouter("x", OWNER, 0, TABLE[:3], fetcher, cache_of("none", 0))
    with pytest.raises(OperatorError, match="cache in RowRouter"):
        RowRouter("x", OWNER, 0, TABLE[OWNER == 0].astype(np.float64), fetcher,
                  cache_of("none", 0))  # fmt: skip


def test_router_gathers_labels() -> None:
    labels = np.arange(N, dtype=np.int64) * 10
    fetcher = InProcessOwners({"y": labels}, OWNER)
    cache = make_cache(
        "belady", 4, attr="y", owner=OWNER, rank=1, row_shape=(), dtype=np.int64
    )
    router = RowRouter("y", OWNER, 1, labels[OWNER == 1], fetcher, cache)
    ids = np.array([1, 2, 5, 0, 3])
    assert router.gather(0, ids).tolist() == (ids * 10).tolist()
