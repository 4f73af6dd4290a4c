"""Emma in one process: config, rejected combinations, chunk coverage, S=1, state."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from strata.operators.errors import OperatorError
from strata.operators.layers import GIN
from strata.operators.trainers import FullGraphTrainer, ModelConfig, TrainConfig
from strata.operators.trainers.base import build_optimizer
from strata.operators.trainers.distributed.config import DistributedConfig
from strata.operators.trainers.distributed.emma import (
    EmmaConfig,
    EmmaTrainer,
    SourceChunker,
    check_emma,
    chunk_ids,
)
from strata.operators.trainers.distributed.halo import HaloPlan
from strata.operators.trainers.distributed.local_graph import PropagationGraph
from strata.partition import RandomPartitioner, build_book
from strata.storage import CSRGraph, load_graph

SBM = "sbm:n=1200,blocks=4,features=8,seed=1"


def train_config(model: str = "sage", epochs: int = 5, **kw):  # type: ignore[no-untyped-def]
    return TrainConfig(
        ModelConfig(model, hidden=8, **kw),
        epochs=epochs,
        device="cpu",
        restore_best=False,
    )


# ------------------------------------------------------------------- config
def test_config_defaults_follow_the_reference() -> None:
    c = EmmaConfig()
    assert (c.splits, c.redraw_every, c.refresh_every, c.warm_start) == (
        10,
        10,
        100,
        False,
    )
    assert EmmaConfig(3, refresh_every=0).refreshes_before(9) is False
    assert [
        t for t in range(10) if EmmaConfig(2, refresh_every=4).refreshes_before(t)
    ] == [
        4,
        8,
    ]


@pytest.mark.parametrize(
    ("kwargs", "subject"),
    [
        ({"splits": 0}, "splits"),
        ({"splits": 3, "redraw_every": 4}, "redraw_every"),
        ({"refresh_every": -1}, "refresh_every"),
        ({"seed": -2}, "seed"),
    ],
)
def test_config_rejects_bad_values(kwargs: dict, subject: str) -> None:
    with pytest.raises(OperatorError, match=f"{subject} in EmmaConfig"):
        EmmaConfig(**kwargs)


# ------------------------------------------------------ rejected combinations
def test_rejects_hongtu_naming_both_settings() -> None:
    dist = DistributedConfig(workers=2, mode="hongtu")
    with pytest.raises(OperatorError, match=r"mode='hongtu' with emma=EmmaConfig"):
        EmmaTrainer(train_config(), dist, EmmaConfig(4))


def test_rejects_max_aggregation_naming_both_settings() -> None:
    trainer = EmmaTrainer(
        train_config(aggr="max"), DistributedConfig(workers=1), EmmaConfig(4)
    )
    with pytest.raises(OperatorError, match=r"aggr='max' with emma=EmmaConfig"):
        trainer.fit_local(load_graph(SBM))


def test_rejects_batchnorm_naming_both_settings() -> None:
    model = GIN(8, 8, 2)
    model.convs[0].nn.insert(1, torch.nn.BatchNorm1d(8))
    with pytest.raises(OperatorError, match=r"BatchNorm1d at .* with emma=EmmaConfig"):
        check_emma(EmmaConfig(2), mode="exact", aggregation="sum", model=model)
    model.convs[0].nn[1] = torch.nn.LayerNorm(8)  # LayerNorm is fine
    check_emma(EmmaConfig(2), mode="exact", aggregation="sum", model=model)


# ------------------------------------------------------------- chunk ids
def test_chunk_ids_depend_on_the_global_id_only() -> None:
    ids = np.arange(5000)
    a = chunk_ids(ids, 7, cycle=3, seed=11)
    perm = np.random.default_rng(0).permutation(ids)
    assert np.array_equal(chunk_ids(perm, 7, cycle=3, seed=11), a[perm])
    counts = np.bincount(a, minlength=7)
    assert counts.min() > 0.85 * 5000 / 7
    assert counts.max() < 1.15 * 5000 / 7
    assert not np.array_equal(chunk_ids(ids, 7, cycle=3, seed=12), a)


@st.composite
def chunking_cases(draw):  # type: ignore[no-untyped-def]
    n = draw(st.integers(2, 40))
    m = draw(st.integers(0, 120))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    src = np.append(rng.integers(0, n, m), 0)  # 0 -> 1: the partitioner needs an edge
    dst = np.append(rng.integers(0, n, m), 1)
    graph = CSRGraph.from_edges(src, dst, n)
    k = draw(st.integers(1, min(3, n)))
    assignment = rng.integers(0, k, n).astype(np.int32)
    assignment[:k] = np.arange(k)  # no empty part
    kind = draw(st.sampled_from(["gcn", "mean"]))
    splits = draw(st.integers(1, 6))
    seed = draw(st.integers(0, 1000))
    cycle = draw(st.integers(0, 5))
    return graph, assignment, kind, splits, seed, cycle


@settings(max_examples=40, deadline=None)
@given(chunking_cases())
def test_every_edge_and_halo_row_once_per_cycle(case) -> None:  # type: ignore[no-untyped-def]
    """Coverage: over a cycle each worker aggregates every local edge exactly once,
    its restricted plans send every halo row exactly once, and n_t sums to deg."""
    graph, assignment, kind, splits, seed, cycle = case
    k = int(assignment.max()) + 1
    part = RandomPartitioner(k=k, seed=seed).partition(graph)
    part = dataclasses.replace(part, assignment=assignment)
    book = build_book(graph, part)
    prop = PropagationGraph.build(graph, kind)
    config = EmmaConfig(splits, seed=seed)
    for rank in range(k):
        owned = book.owned_ids(rank)
        local_ids = np.concatenate([owned, book.halo(rank)])
        local = prop.slice(owned, local_ids)
        plan = HaloPlan.from_book(book, rank)
        chunker = SourceChunker(
            config, local_ids, plan, local, graph.num_nodes, torch.device("cpu")
        )
        seen = np.zeros(local.num_edges, np.int64)
        sent: list[int] = []
        received: list[int] = []
        refreshed = torch.zeros(len(owned), dtype=torch.float64)
        edge_dst = np.repeat(np.arange(len(owned)), np.diff(local.indptr))
        for t in range(cycle * splits, (cycle + 1) * splits):
            step = chunker.step(t)
            active = step.active.numpy()
            keep = active[local.indices]
            seen += keep
            sub = step.part.local
            assert np.array_equal(sub.indices, local.indices[keep])  # order kept
            assert np.array_equal(
                np.diff(sub.indptr), np.bincount(edge_dst[keep], minlength=len(owned))
            )
            assert step.edges == int(keep.sum())
            sent += step.plan.send_ids.tolist()
            received += step.plan.recv_ids.tolist()
            refreshed += step.refreshed.double()
        assert (seen == 1).all()
        assert sorted(sent) == sorted(plan.send_ids.tolist())
        assert sorted(received) == sorted(plan.recv_ids.tolist())
        torch.testing.assert_close(
            refreshed, chunker.degree.double(), rtol=1e-5, atol=1e-5
        )


# ------------------------------------------------------------ S = 1 is exact
@pytest.mark.parametrize("model", ["sage", "gcn"])
def test_one_split_equals_single_device_training(model: str) -> None:
    data = load_graph(SBM)
    config = train_config(model)
    records: list = []
    expected = FullGraphTrainer(config).fit(data, on_epoch=records.append)
    run = EmmaTrainer(config, DistributedConfig(workers=1), EmmaConfig(1)).fit_local(
        data
    )
    got = [r.loss for r in run.history]
    np.testing.assert_allclose(got, [r.loss for r in records], rtol=0, atol=1e-5)
    for name in ("val_loss", "test_loss", "train_accuracy", "test_accuracy"):
        assert getattr(run.result, name) == pytest.approx(
            getattr(expected, name), abs=1e-5
        )


# ------------------------------------------------------- state and evaluation
def run_iterations(engine, model, optimizer, iterations) -> list[float]:  # type: ignore[no-untyped-def]
    losses = []
    for t in iterations:
        model.train()
        optimizer.zero_grad(set_to_none=True)
        losses.append(engine.train_epoch(model, t))
        optimizer.step()
    return losses


def test_refresh_writes_the_exact_aggregate_and_evaluation_writes_nothing() -> None:
    config = train_config(epochs=1)
    trainer = EmmaTrainer(config, DistributedConfig(workers=1), EmmaConfig(3))
    with trainer.open_local(load_graph(SBM)) as (engine, model):
        optimizer = build_optimizer(model, config)
        run_iterations(engine, model, optimizer, range(2))
        before = engine.state.snapshot()
        engine.evaluate(model, ("train", "val", "test"))
        for a, b in zip(before, engine.state.snapshot(), strict=True):
            assert torch.equal(a, b)  # exact evaluation leaves the buffers alone
        model.eval()
        engine.refresh(model, before=2)
        part = engine.part
        exact = (
            torch.sparse_csr_tensor(
                part.graph.indptr,
                part.graph.indices,
                torch.ones(part.graph.num_edges),
                (engine.num_owned, engine.x_input.shape[0]),
            )
            @ engine.x_input
        )
        torch.testing.assert_close(engine.state[0], exact, rtol=1e-5, atol=1e-5)
        assert engine.refreshes == [2]
        assert engine.counters.total().refresh_bytes == 0  # one worker: no halo


def test_snapshot_and_restore_continue_the_same_trajectory() -> None:
    config = train_config(epochs=1)
    trainer = EmmaTrainer(
        config, DistributedConfig(workers=1), EmmaConfig(3, refresh_every=4)
    )
    data = load_graph(SBM)
    with trainer.open_local(data) as (engine, model):
        optimizer = build_optimizer(model, config)
        straight = run_iterations(engine, model, optimizer, range(7))
    with trainer.open_local(data) as (engine, model):
        optimizer = build_optimizer(model, config)
        run_iterations(engine, model, optimizer, range(3))
        saved = (
            engine.state.snapshot(),
            copy.deepcopy(model.state_dict()),
            copy.deepcopy(optimizer.state_dict()),
        )
    with trainer.open_local(data) as (engine, model):
        optimizer = build_optimizer(model, config)
        engine.state.restore(saved[0])
        model.load_state_dict(saved[1])
        optimizer.load_state_dict(saved[2])
        resumed = run_iterations(engine, model, optimizer, range(3, 7))
    assert resumed == straight[3:]


def test_buffer_bytes_are_owned_rows_times_layer_inputs() -> None:
    config = train_config(epochs=1)
    trainer = EmmaTrainer(config, DistributedConfig(workers=1), EmmaConfig(2))
    with trainer.open_local(load_graph(SBM)) as (engine, _):
        assert engine.state.buffer_bytes == 1200 * (8 + 8) * 4


def test_fit_local_needs_one_worker() -> None:
    trainer = EmmaTrainer(train_config(), DistributedConfig(workers=2), EmmaConfig(2))
    with pytest.raises(OperatorError, match="workers=1"):
        trainer.fit_local(load_graph(SBM))
