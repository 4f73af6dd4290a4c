"""The deterministic epoch schedule: train split, global batches, digests (R1)."""

from __future__ import annotations

import doctest
import itertools
import json
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

import strata.operators.samplers.schedule as schedule_module
from strata.operators.errors import OperatorError
from strata.operators.samplers import (
    NeighborSampler,
    SamplerConfig,
    balanced_train_ids,
    build_schedule,
    global_batches,
    input_digest,
    rank_batches,
)
from strata.operators.trainers.prefetch import epoch_order as trainer_order
from strata.storage.generators.sbm import sbm

FANOUTS = (5, 3)


@pytest.fixture(scope="module")
def setting() -> dict:
    graph, blocks = sbm(3000, 4, avg_degree=8, seed=1)
    owner = blocks.astype(np.int32)
    train = np.sort(np.random.default_rng(0).choice(3000, 900, replace=False))
    return {"graph": graph, "owner": owner, "train": train}


def test_doctests() -> None:
    result = doctest.testmod(schedule_module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0


# ------------------------------------------------------------------ train split


def brute_force_rehomed(counts: np.ndarray) -> int:
    """Fewest moves over every choice of the ranks that get ceil(T/W)."""
    workers, total = counts.size, int(counts.sum())
    low, extra = divmod(total, workers)
    best = None
    for high in itertools.combinations(range(workers), extra):
        target = np.full(workers, low)
        target[list(high)] += 1
        moves = int(np.maximum(counts - target, 0).sum())
        best = moves if best is None else min(best, moves)
    assert best is not None
    return best


@pytest.mark.parametrize("seed", range(6))
def test_balanced_train_ids_is_floor_ceil_with_fewest_moves(seed: int) -> None:
    rng = np.random.default_rng(seed)
    workers = int(rng.integers(2, 6))
    n = 500
    # Skewed ownership: some parts hold many more training vertices.
    owner = rng.choice(workers, n, p=rng.dirichlet(np.ones(workers) * 0.7))
    train = np.sort(rng.choice(n, int(rng.integers(1, 300)), replace=False))
    split = balanced_train_ids(owner, train, workers)
    total = train.size
    sizes = sorted(ids.size for ids in split.ids)
    assert set(sizes) <= {total // workers, -(-total // workers)}
    assert sum(sizes) == total
    assert np.array_equal(np.sort(np.concatenate(split.ids)), train)
    counts = np.bincount(owner[train], minlength=workers)
    assert split.rehomed == brute_force_rehomed(counts)
    moved = sum(int((owner[ids] != r).sum()) for r, ids in enumerate(split.ids))
    assert moved == split.rehomed
    for r, ids in enumerate(split.ids):
        assert np.all(np.diff(ids) > 0)
        assert np.all(split.rank_of[ids] == r)
    assert (split.rank_of >= 0).sum() == total
    assert split.balance == pytest.approx(max(sizes) / (total / workers))


def test_surplus_goes_highest_ids_first() -> None:
    owner = np.array([0] * 6 + [1] * 4)
    split = balanced_train_ids(owner, np.array([0, 1, 2, 3, 4, 5, 6]), 2)
    assert split.ids[0].tolist() == [0, 1, 2, 3]
    assert split.ids[1].tolist() == [4, 5, 6]  # 5 and 4 re-homed
    assert split.rehomed == 2


def test_balanced_train_ids_rejects_bad_input() -> None:
    with pytest.raises(OperatorError, match=r"owner in balanced_train_ids"):
        balanced_train_ids(np.array([0, 1, 2]), np.array([0]), 2)
    with pytest.raises(OperatorError, match="distinct ids"):
        balanced_train_ids(np.array([0, 1]), np.array([0, 0]), 2)
    with pytest.raises(OperatorError, match="ids in"):
        balanced_train_ids(np.array([0, 1]), np.array([5]), 2)


def test_every_rank_runs_the_same_number_of_steps(setting: dict) -> None:
    owner, train = setting["owner"], setting["train"]
    split = balanced_train_ids(owner, train, 4)
    batches = global_batches(train, seed=3, epoch=2, batch_size=100)
    assert len(batches) == split.steps(100) == 9
    per_rank = [rank_batches(batches, split.rank_of, r) for r in range(4)]
    assert {len(p) for p in per_rank} == {9}
    for b, batch in enumerate(batches):
        parts = [p[b] for p in per_rank]
        # Each rank's part keeps the batch's order; together they are the batch.
        merged = np.concatenate(parts)
        assert np.array_equal(np.sort(merged), np.sort(batch))
        order = {int(v): i for i, v in enumerate(batch)}
        for part in parts:
            assert [order[int(v)] for v in part] == sorted(order[int(v)] for v in part)


def test_global_batches_depend_on_the_id_set_only(setting: dict) -> None:
    train = setting["train"]
    shuffled = np.random.default_rng(5).permutation(train)
    a = global_batches(train, 0, 1, 128)
    b = global_batches(shuffled, 0, 1, 128)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert np.array_equal(np.concatenate(a), trainer_order(train, 0, 1))


def test_trainer_epoch_order_delegates_unchanged() -> None:
    ids = np.arange(50, 90)
    for epoch in range(3):
        got = trainer_order(ids, seed=7, epoch=epoch, rank=1)
        assert np.array_equal(got, schedule_module.epoch_order(ids, 7, epoch, 1))


# --------------------------------------------------------------------- schedule


def oracle(sampler, seeds_per_batch, owner, rank, epoch):
    """Remote ids, digests and counts straight from the sampled blocks."""
    remote, digests, locals_ = [], [], []
    for b, seeds in enumerate(seeds_per_batch):
        inputs = (
            sampler.sample(seeds, epoch, batch_index=b)[0].src_global_ids
            if len(seeds)
            else np.empty(0, np.int64)
        )
        remote.append(sorted(int(v) for v in inputs if owner[v] != rank))
        locals_.append(sum(1 for v in inputs if owner[v] == rank))
        digests.append(input_digest(inputs))
    return remote, digests, locals_


def test_schedule_matches_the_sampled_blocks(setting: dict) -> None:
    graph, owner, train = setting["graph"], setting["owner"], setting["train"]
    split = balanced_train_ids(owner, train, 4)
    sampler = NeighborSampler(graph, SamplerConfig(FANOUTS), seed=11)
    seeds = rank_batches(global_batches(train, 11, 3, 128), split.rank_of, 2)
    sched = build_schedule(sampler, seeds, owner, rank=2, epoch=3)
    remote, digests, locals_ = oracle(sampler, seeds, owner, 2, 3)
    assert sched.num_batches == len(seeds)
    for b in range(sched.num_batches):
        assert sched.remote(b).tolist() == remote[b]
        assert int(sched.digests[b]) == digests[b]
        assert int(sched.num_local[b]) == locals_[b]
        assert int(sched.num_inputs[b]) == locals_[b] + len(remote[b])
    counts = Counter(v for r in remote for v in r)
    assert sched.count_ids.tolist() == sorted(counts)
    assert sched.counts.tolist() == [counts[v] for v in sorted(counts)]
    assert sched.distinct_remote == len(counts)
    assert sched.remote_accesses == sum(len(r) for r in remote)
    once = sum(1 for c in counts.values() if c == 1) / len(counts)
    assert sched.once_fraction == pytest.approx(once)
    assert sched.nbytes >= sched.remote_ids.nbytes + sched.digests.nbytes
    assert sched.schedule_s > 0


def test_union_of_rank_inputs_is_the_one_worker_batch(setting: dict) -> None:
    """A seed's tree is the same whatever the worker count (same losses)."""
    graph, owner, train = setting["graph"], setting["owner"], setting["train"]
    sampler = NeighborSampler(graph, SamplerConfig(FANOUTS), seed=4)
    batches = global_batches(train, 4, 0, 200)
    one = np.zeros(3000, dtype=np.int32)
    whole = build_schedule(sampler, batches, one, 0, 0, keep_inputs=True)
    split = balanced_train_ids(owner, train, 4)
    parts = [
        build_schedule(
            sampler, rank_batches(batches, split.rank_of, r), owner, r, 0,
            keep_inputs=True,
        )
        for r in range(4)
    ]  # fmt: skip
    for b in range(len(batches)):
        # Every seed's tree is the one it has in the one-worker batch, so the
        # ranks' inputs together are exactly the one-worker batch's inputs.
        union = np.unique(np.concatenate([p.inputs(b) for p in parts]))
        assert np.array_equal(union, whole.inputs(b))
        for p in parts:
            blocks = sampler.sample(p.seeds[b], 0, b) if p.seeds[b].size else None
            if blocks is not None:
                full = sampler.sample(batches[b], 0, b)
                # Same 1-hop neighbours of each of this rank's seeds.
                assert _neighbours(blocks[-1], p.seeds[b]) == _neighbours(
                    full[-1], p.seeds[b]
                )


def _neighbours(block, seeds) -> dict[int, list[int]]:
    dst = block.src_global_ids[: block.num_dst]
    row = {int(v): i for i, v in enumerate(dst)}
    out = {}
    for s in seeds:
        i = row[int(s)]
        nbrs = block.src_global_ids[
            block.indices[block.indptr[i] : block.indptr[i + 1]]
        ]
        out[int(s)] = sorted(int(v) for v in nbrs)
    return out


def test_digests_change_every_epoch_and_check_fires(setting: dict) -> None:
    graph, owner, train = setting["graph"], setting["owner"], setting["train"]
    split = balanced_train_ids(owner, train, 4)
    sampler = NeighborSampler(graph, SamplerConfig(FANOUTS), seed=0)
    scheds = [
        build_schedule(
            sampler,
            rank_batches(global_batches(train, 0, e, 30), split.rank_of, 1),
            owner,
            1,
            e,
        )
        for e in (5, 6)
    ]
    same = np.count_nonzero(scheds[0].digests == scheds[1].digests)
    assert same <= 0.01 * scheds[0].num_batches
    # The prefetcher re-samples batch 3 and checks it.
    blocks = sampler.sample(scheds[0].seeds[3], 5, batch_index=3)
    scheds[0].check(3, blocks[0].src_global_ids)
    scheds[0].check(3, blocks[0].src_global_ids[::-1])  # order does not matter
    tampered = blocks[0].src_global_ids[1:]
    with pytest.raises(OperatorError, match=r"epoch 5, rank 1, batch 3.*digest 0x"):
        scheds[0].check(3, tampered)
    wrong_epoch = sampler.sample(scheds[0].seeds[3], 6, batch_index=3)
    with pytest.raises(OperatorError, match="batch 3"):
        scheds[0].check(3, wrong_epoch[0].src_global_ids)


def test_empty_batches_have_a_fixed_digest(setting: dict) -> None:
    sampler = NeighborSampler(setting["graph"], SamplerConfig(FANOUTS), seed=0)
    empty = np.empty(0, np.int64)
    sched = build_schedule(sampler, [empty, empty], setting["owner"], 0, 0)
    assert sched.digests[0] == sched.digests[1] == np.uint64(input_digest(empty))
    assert sched.remote(0).size == 0
    assert sched.num_inputs.tolist() == [0, 0]


def test_schedule_needs_a_rank_free_sampler(setting: dict) -> None:
    sampler = NeighborSampler(setting["graph"], SamplerConfig(FANOUTS), rank=1)
    with pytest.raises(OperatorError, match=r"sampler.rank in build_schedule"):
        build_schedule(sampler, [np.array([0])], setting["owner"], 1, 0)


_CHILD = """
import json, sys
import numpy as np
from strata.operators.samplers import (NeighborSampler, SamplerConfig,
    balanced_train_ids, build_schedule, global_batches, rank_batches)
from strata.storage.generators.sbm import sbm
graph, blocks = sbm(3000, 4, avg_degree=8, seed=1)
owner = blocks.astype(np.int32)
train = np.sort(np.random.default_rng(0).choice(3000, 900, replace=False))
split = balanced_train_ids(owner, train, 4)
sampler = NeighborSampler(graph, SamplerConfig((5, 3)), seed=9)
seeds = rank_batches(global_batches(train, 9, 2, 60), split.rank_of, 3)
sched = build_schedule(sampler, seeds, owner, 3, 2)
print(json.dumps([int(d) for d in sched.digests]))
"""


@pytest.mark.multiprocess
def test_two_processes_build_equal_digests(setting: dict) -> None:
    """R1: two processes regenerate epoch 2's schedule identically."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            outputs.append(json.loads(out))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    assert outputs[0] == outputs[1]
    assert len(outputs[0]) == 15
    graph, owner, train = setting["graph"], setting["owner"], setting["train"]
    split = balanced_train_ids(owner, train, 4)
    sampler = NeighborSampler(graph, SamplerConfig(FANOUTS), seed=9)
    seeds = rank_batches(global_batches(train, 9, 2, 60), split.rank_of, 3)
    here = build_schedule(sampler, seeds, owner, 3, 2)
    assert [int(d) for d in here.digests] == outputs[0]
