"""Armada: samplers apart from trainers; blocks equal the colocated sampler's."""

from __future__ import annotations

import glob
import os
import time
from collections.abc import Iterator

import armada_workers as aw
import numpy as np
import psutil
import pytest
import scipy.sparse as sp
import torch

from strata.engine.gang import (
    FailureKind,
    GangError,
    GangSpec,
    SharedTensors,
    run_gang_report,
)
from strata.engine.gang.shared import PREFIX
from strata.operators.samplers import NeighborSampler, SamplerConfig
from strata.operators.samplers.schedule import (
    balanced_train_ids,
    global_batches,
    rank_batches,
)
from strata.operators.trainers.sampled.armada import ArmadaLayout, ArmadaPlan
from strata.operators.trainers.sampled.structure import sampler_structure
from strata.storage import CSRGraph

N_NODES = 300


def _graph(seed: int = 0) -> CSRGraph:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, N_NODES, 2400)
    dst = rng.integers(0, N_NODES - 5, 2400)  # a few vertices without in-edges
    return CSRGraph.from_edges(src, dst, N_NODES)


def _closure(graph: CSRGraph, seeds: np.ndarray, hops: int) -> np.ndarray:
    """Brute force: vertices within ``hops`` in-hops of ``seeds`` (scipy)."""
    adj = sp.csr_matrix(
        (np.ones(graph.num_edges), graph.indices, graph.indptr),
        shape=(N_NODES, N_NODES),
    )
    reach = np.zeros(N_NODES, bool)
    reach[seeds] = True
    for _ in range(hops):
        reach = reach | (adj @ reach.astype(float) > 0)
    return np.flatnonzero(reach)


# ------------------------------------------------------------------ no processes


def test_layout_sends_every_unit_to_one_sampler_and_channels_in_order() -> None:
    for m, n in [(1, 1), (1, 3), (2, 1), (2, 2), (3, 2), (4, 6)]:
        layout = ArmadaLayout(m, n)
        steps = 7
        for c in range(n):
            feeds = layout.samplers_of(c, steps)
            assert set(feeds) == {layout.sampler_of(b, c) for b in range(steps)}
            for s in feeds:
                assert c in layout.trainers_of(s, steps)
        if m == n:  # sampler s serves trainer s alone
            assert [layout.trainers_of(s, steps) for s in range(m)] == [
                [s] for s in range(m)
            ]


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_structure_holds_the_in_closure_and_samples_like_the_full_graph(
    layers: int,
) -> None:
    graph = _graph()
    seeds = np.random.default_rng(1).choice(N_NODES, 40, replace=False)
    part = sampler_structure(graph, seeds, layers)
    np.testing.assert_array_equal(part.vertices, _closure(graph, seeds, layers - 1))
    csc = graph.csc()
    for v in range(N_NODES):  # kept rows equal the full in-rows, others empty
        row = part.in_adjacency.indices[
            part.in_adjacency.indptr[v] : part.in_adjacency.indptr[v + 1]
        ]
        full = csc.indices[csc.indptr[v] : csc.indptr[v + 1]]
        np.testing.assert_array_equal(row, full if v in part.vertices else [])
    config = SamplerConfig(fanouts=(3,) * (layers - 1) + (4,))
    full_sampler = NeighborSampler(graph, config, seed=5)
    mine = part.sampler(config, seed=5)
    for b in range(4):
        batch = seeds[b * 10 : (b + 1) * 10]
        for got, want in zip(
            mine.sample(batch, 2, b), full_sampler.sample(batch, 2, b), strict=True
        ):
            np.testing.assert_array_equal(got.indptr, want.indptr)
            np.testing.assert_array_equal(got.indices, want.indices)
            np.testing.assert_array_equal(got.src_global_ids, want.src_global_ids)
    assert part.full_structure_bytes == csc.indptr.nbytes + csc.indices.nbytes
    if layers == 1:
        assert part.num_edges == int(graph.in_degree()[seeds].sum())
        assert part.structure_bytes < part.full_structure_bytes


def _unit_arrays(seeds: np.ndarray) -> list[np.ndarray]:
    blocks = NeighborSampler(_graph(), SamplerConfig(fanouts=(2,)), seed=0).sample(
        seeds
    )
    b = blocks[0]
    return [seeds, np.array([0.01]), b.indptr, b.indices, b.src_global_ids]


def test_source_checks_order_seeds_and_the_end_of_the_stream() -> None:
    from strata.engine.net import ChannelConfig, Receiver, Sender
    from strata.operators.errors import OperatorError
    from strata.operators.trainers.sampled.armada import ArmadaSource

    config = ChannelConfig(timeout_s=5)
    layout = ArmadaLayout(1, 1)
    seeds = np.array([3, 5, 7])

    senders: list[Sender] = []

    def source_with(*units: tuple[tuple[int, int], np.ndarray]) -> ArmadaSource:
        inbox = Receiver(config=config)
        out = Sender(inbox.endpoint, config=config)
        senders.append(out)  # open until the end: closing early drops messages
        for tag, unit_seeds in units:
            out.send(tag, _unit_arrays(unit_seeds))
        return ArmadaSource(0, layout, {0: inbox})

    try:
        good = source_with(((0, 0), seeds))
        (item,) = good.epoch(0, [seeds])
        assert item.blocks is not None
        assert item.blocks[0].dst_global_ids.tolist() == [3, 5, 7]
        assert good.counters()["batches"] == 1
        good.close(drain=False)

        late = source_with(((0, 1), seeds))
        with pytest.raises(OperatorError, match=r"unit in Armada trainer 0: expected"):
            list(late.epoch(0, [seeds]))
        late.close(drain=False)

        other = source_with(((0, 0), seeds[:2]))
        with pytest.raises(OperatorError, match="seeds of batch 0 of epoch 0"):
            list(other.epoch(0, [seeds]))
        other.close(drain=False)

        extra = source_with(((0, 0), seeds))
        with pytest.raises(OperatorError, match="end of stream in Armada trainer 0"):
            extra.close()
    finally:
        for out in senders:
            out.close(0)


# ------------------------------------------------------------------ gangs


def _setup(trainers: int, seed: int = 0) -> tuple[CSRGraph, np.ndarray, np.ndarray]:
    graph = _graph(seed)
    rng = np.random.default_rng(seed + 1)
    train_ids = np.sort(rng.choice(N_NODES, 150, replace=False)).astype(np.int64)
    owner = rng.integers(0, trainers, N_NODES).astype(np.int32)
    split = balanced_train_ids(owner, train_ids, trainers)
    return graph, train_ids, split.rank_of


@pytest.fixture
def no_leftovers() -> Iterator[None]:
    """No worker process and no shared-memory segment outlives a test."""
    pattern = f"/dev/shm/{PREFIX}{os.getpid()}-*"
    before = set(glob.glob(pattern))
    children = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        left = {
            p.pid
            for p in psutil.Process().children(recursive=True)
            if p.pid not in children
            and p.status() != psutil.STATUS_ZOMBIE
            and "forkserver" not in " ".join(p.cmdline())
            and "resource_tracker" not in " ".join(p.cmdline())
        }
        if not left:
            break
        time.sleep(0.1)
    assert not left, f"processes left behind: {left}"
    assert set(glob.glob(pattern)) == before


def _run(
    samplers: int,
    trainers: int,
    *,
    kill_after: int | None = None,
    kill_rank: int = 0,
    timeout_s: float = 60,
) -> tuple[list, ArmadaPlan, tuple]:
    graph, train_ids, rank_of = _setup(trainers)
    plan = ArmadaPlan(
        layout=ArmadaLayout(samplers, trainers),
        epochs=2,
        batch_size=16,
        seed=7,
        sampler=SamplerConfig(fanouts=(3, 2, 4)),
    )
    spec = GangSpec(
        workers=samplers + trainers,
        device="cpu",
        timeout_s=timeout_s,
        collective_timeout_s=30,
        threads_per_worker=1,
        name="armada-test",
    )
    arrays = {
        "graph.indptr": graph.indptr,
        "graph.indices": graph.indices,
        "train_ids": train_ids,
        "rank_of": rank_of,
    }
    with SharedTensors.from_arrays(
        {k: torch.from_numpy(np.array(v)) for k, v in arrays.items()}
    ) as shared:
        data = aw.SharedData(shared, N_NODES)
        report = run_gang_report(
            aw.collect_worker, spec, plan, data, kill_after, kill_rank
        )
    return report.results, plan, (graph, train_ids, rank_of)


@pytest.mark.multiprocess
@pytest.mark.parametrize(("samplers", "trainers"), [(1, 1), (1, 2), (2, 1), (2, 2)])
def test_trainers_receive_exactly_the_colocated_blocks(
    samplers: int, trainers: int, no_leftovers: None
) -> None:
    results, plan, (graph, train_ids, rank_of) = _run(samplers, trainers)
    sampler_counters, trained = results[:samplers], results[samplers:]
    oracle = NeighborSampler(graph, plan.sampler, seed=plan.seed)
    expected_units = 0
    for c, got in enumerate(trained):
        assert got["trainer"] == c
        expected = [
            (e, b, seeds)
            for e in range(plan.epochs)
            for b, seeds in enumerate(
                rank_batches(global_batches(train_ids, plan.seed, e, 16), rank_of, c)
            )
        ]
        assert len(got["units"]) == len(expected)  # every step, empty ones too
        for (e, b, seeds, blocks), (e2, b2, seeds2) in zip(
            got["units"], expected, strict=True
        ):
            assert (e, b) == (e2, b2)
            np.testing.assert_array_equal(seeds, seeds2)
            if seeds2.size == 0:
                assert blocks == []
                continue
            expected_units += 1
            want = oracle.sample(seeds2, e, b)
            assert len(blocks) == len(want)
            for (indptr, indices, src, num_dst), block in zip(
                blocks, want, strict=True
            ):
                np.testing.assert_array_equal(indptr, block.indptr)
                np.testing.assert_array_equal(indices, block.indices)
                np.testing.assert_array_equal(src, block.src_global_ids)
                assert num_dst == block.num_dst
        assert sum(x["batches"] for x in got["counters"]) == sum(
            1 for u in got["units"] if u[2].size
        )
        assert got["group_sum"] == trainers * (trainers + 1) / 2
        assert got["reduced_grad"] == trainers * (trainers + 1) / 2
    assert sum(s["batches"] for s in sampler_counters) == expected_units
    received = sum(sum(x["recv_bytes"] for x in t["counters"]) for t in trained)
    ends = 24 * sum(
        len(ArmadaLayout(samplers, trainers).trainers_of(s, 10))
        for s in range(samplers)
    )
    assert sum(s["ship_bytes"] for s in sampler_counters) == received + ends
    for s in sampler_counters:
        assert 0 < s["structure_bytes"] <= s["full_structure_bytes"]
        assert s["sample_s"] > 0
        assert s["send_blocked_s"] >= 0


@pytest.mark.multiprocess
@pytest.mark.parametrize(
    ("samplers", "trainers", "victim"), [(2, 1, 0), (1, 2, 1), (1, 2, 2)]
)
def test_killed_sampler_or_trainer_fails_the_run_naming_its_rank(
    samplers: int, trainers: int, victim: int, no_leftovers: None
) -> None:
    # victim < samplers: a sampler dies mid-epoch (its trainers starve);
    # otherwise a trainer (its samplers block, its peers wait in the all-reduce).
    start = time.monotonic()
    with pytest.raises(GangError) as info:
        _run(samplers, trainers, kill_after=3, kill_rank=victim, timeout_s=60)
    elapsed = time.monotonic() - start
    error = info.value
    assert elapsed < 30
    assert (error.rank, error.failures[0].kind) == (victim, FailureKind.DIED)
    assert f"worker rank {victim}" in str(error)
    assert "killed by SIGKILL" in str(error)


# ------------------------------------------------------- through the gang trainer


def _fit_cora(epochs: int, **gang: object) -> object:
    from strata.operators.io.datasets import load_dataset
    from strata.operators.trainers import ModelConfig, TrainConfig
    from strata.operators.trainers.sampled import (
        SampledGangConfig,
        SampledGangTrainer,
        SamplingConfig,
    )

    data = load_dataset("planetoid:cora", normalize_features=True)
    model = ModelConfig("sage", hidden=32, num_layers=2, dropout=0.5)
    config = TrainConfig(
        model, lr=0.01, epochs=epochs, patience=0, seed=3, device="cpu", threads=1
    )
    sampling = SamplingConfig(fanouts=(5, 5), batch_size=32)
    settings = SampledGangConfig(
        device="cpu", timeout_s=120, cache_policy="none", **gang
    )  # type: ignore[arg-type]
    return SampledGangTrainer(config, sampling, settings).fit(data)


@pytest.mark.multiprocess
@pytest.mark.parametrize(
    ("samplers", "workers"),
    [(1, 1), pytest.param(2, 2, marks=pytest.mark.slow)],
)
def test_armada_gives_the_colocated_losses(
    samplers: int, workers: int, no_leftovers: None
) -> None:
    colocated = _fit_cora(2, workers=workers)
    armada = _fit_cora(2, workers=workers, samplers=samplers)
    one = np.array(colocated.step_losses)  # type: ignore[attr-defined]
    two = np.array(armada.step_losses)  # type: ignore[attr-defined]
    assert one.shape == two.shape == (2, 5)  # 140 training nodes, batch 32
    np.testing.assert_allclose(two, one, atol=1e-5, rtol=0)
    report = armada.report  # type: ignore[attr-defined]
    assert report["mode"] == "armada"
    per_sampler = report["per_sampler"]
    assert len(per_sampler) == samplers
    assert sum(s["batches"] for s in per_sampler) == sum(
        e["batches"] for t in report["per_trainer"] for e in t["epochs"]
    )
    for s in per_sampler:
        assert s["structure_bytes"] < s["full_structure_bytes"]
