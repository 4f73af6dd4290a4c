"""Distributed-trainer pieces that need no gang: masks, slices, plans, models."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from conftest import random_graph
from hypothesis import given, settings
from hypothesis import strategies as st

from strata.operators.errors import OperatorError
from strata.operators.layers import GCN, GIN, GraphSAGE
from strata.operators.trainers import ModelConfig, TrainConfig
from strata.operators.trainers import dropout as D
from strata.operators.trainers.distributed import (
    DistributedConfig,
    DistributedTrainer,
    Emma,
    Exact,
    GangConfig,
    HongTu,
    Level1,
    Level1Config,
    Phase,
    Traffic,
    TransferCounters,
    engine_for,
    parse_mode,
)
from strata.operators.trainers.distributed.chunked.arena import (
    ArenaError,
    Buffer,
    DeviceArena,
)
from strata.operators.trainers.distributed.chunked.steps import (
    pack_steps,
    step_indices,
    unpack_steps,
)
from strata.operators.trainers.distributed.local_graph import PropagationGraph
from strata.operators.trainers.distributed.programs import SliceTensors, program_for
from strata.partition import LoadMode, plan_loads
from strata.storage import load_graph

CPU = torch.device("cpu")


# --------------------------------------------------------------------- dropout
def test_numba_and_torch_masks_agree_bit_for_bit() -> None:
    ids = torch.cat([torch.arange(500), torch.randint(1 << 33, 1 << 40, (100,))])
    mask = D.keep_mask(ids, 37, 0.3, seed=5, epoch=2, layer=1)
    key = D.stream_key(5, 2, 1)
    cols = D._column_keys(37, CPU)
    out = torch.empty_like(mask)
    torch_mask = D._keep_mask_torch(ids, cols, key, round(0.3 * (1 << 24)), out)
    assert torch.equal(mask, torch_mask)


def test_masks_are_fair_and_independent_of_the_row_set() -> None:
    ids = torch.arange(20_000)
    mask = D.keep_mask(ids, 64, 0.5, seed=0, epoch=0, layer=0)
    assert abs(mask.double().mean().item() - 0.5) < 0.005
    sub = torch.tensor([7, 19_999, 3])
    assert torch.equal(D.keep_mask(sub, 64, 0.5, seed=0, epoch=0, layer=0), mask[sub])
    other = D.keep_mask(ids, 64, 0.5, seed=0, epoch=0, layer=1)
    agree = (mask == other).double().mean().item()
    assert abs(agree - 0.5) < 0.01  # another layer draws an unrelated mask


def test_fused_dropout_and_in_place_scaling_give_the_same_values() -> None:
    x = torch.randn(300, 20, requires_grad=True)
    ids = torch.arange(300) * 3
    out = D.counter_dropout(x, ids, p=0.4, seed=1, epoch=3, layer=0)
    scaled = D.scale_rows_(x.detach().clone(), ids, p=0.4, seed=1, epoch=3, layer=0)
    assert torch.equal(out, scaled)
    grad = torch.randn(300, 20)
    out.backward(grad)
    mask = D.keep_mask(ids, 20, 0.4, seed=1, epoch=3, layer=0)
    assert torch.equal(x.grad, grad * mask * (1 / 0.6))  # backward rehashes
    assert torch.equal(out, x.detach() * mask * (1 / 0.6))


def test_fused_dropout_saves_no_mask_for_backward() -> None:
    x = torch.randn(1000, 64, requires_grad=True)
    ids = torch.arange(1000)
    saved: list[torch.Tensor] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = D.counter_dropout(x, ids, p=0.5, seed=0, epoch=0, layer=0)
    assert [t.shape for t in saved] == [ids.shape]  # the ids only, no mask
    grad = torch.randn(64, 1000).t()
    assert not grad.is_contiguous()
    out.backward(grad)  # a non-contiguous gradient is accepted too
    mask = D.keep_mask(ids, 64, 0.5, seed=0, epoch=0, layer=0)
    assert torch.equal(x.grad, grad * mask * 2.0)


# ---------------------------------------------------------- slices and programs
@pytest.mark.parametrize(
    ("model", "kind"),
    [
        (GCN(6, 5, 3, num_layers=1), "gcn"),
        (GraphSAGE(6, 5, 3, num_layers=1, aggr="mean"), "mean"),
        (GraphSAGE(6, 5, 3, num_layers=1, aggr="max"), "max"),
        (GIN(6, 5, 3, num_layers=1), "sum"),
    ],
)
def test_two_slices_equal_the_single_device_layer(model, kind: str) -> None:  # type: ignore[no-untyped-def]
    graph = random_graph(40, 200, seed=3)
    x = torch.randn(40, 6, generator=torch.Generator().manual_seed(0))
    program = program_for(model)
    assert program.kind == kind
    prop = PropagationGraph.build(graph, kind)
    full = model(graph, x)
    csc = graph.csc()
    for dst in (np.arange(0, 17), np.arange(17, 40)):
        edges = csc.indices[csc.indptr[dst[0]] : csc.indptr[dst[-1] + 1]]
        src = np.unique(np.concatenate([dst, edges]))
        part = SliceTensors.of(prop.slice(dst, src), CPU)
        root = x[torch.from_numpy(dst)]
        y = program.layer(model.convs[0], part, x[torch.from_numpy(src)], root)
        torch.testing.assert_close(y, full[torch.from_numpy(dst)], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "model", [GCN(4, 4, 4), GraphSAGE(4, 4, 4, aggr="mean"), GIN(4, 4, 4)]
)
def test_transposed_aggregate_is_the_aggregate_gradient(model) -> None:  # type: ignore[no-untyped-def]
    graph = random_graph(30, 150, seed=1)
    program = program_for(model)
    prop = PropagationGraph.build(graph, program.aggregation)
    dst, src = np.arange(5, 20), np.arange(30)
    part = SliceTensors.of(prop.slice(dst, src), CPU)
    for _ in range(2):
        x = torch.randn(30, 4, requires_grad=True)
        dz = torch.randn(15, 4)
        program.aggregate(part, x).backward(dz)
        torch.testing.assert_close(program.aggregate_t(part, dz), x.grad)


def test_a_slice_missing_a_source_names_it() -> None:
    graph = random_graph(20, 80, seed=0)
    prop = PropagationGraph.build(graph, "sum")
    with pytest.raises(OperatorError, match="missing"):
        prop.slice(np.arange(20), np.arange(3))


def test_gat_is_refused_with_a_hint() -> None:
    with pytest.raises(OperatorError, match="GAT"):
        program_for(ModelConfig("gat").build(4, 2))


# ------------------------------------------------------------------- plans
def replay_steps(sources, owner, k: int, m: int, mode: LoadMode) -> None:  # type: ignore[no-untyped-def]
    """Executing the index arrays on id vectors must reproduce every S_{g,s}."""
    plan = plan_loads(sources, owner, mode)
    steps = [
        unpack_steps(*pack_steps(step_indices(plan, sources, g))) for g in range(k)
    ]
    prev = [np.empty(0, np.int64)] * k
    for s in range(m):
        cur = [np.full(sources[g][s].shape[0], -1) for g in range(k)]
        sends = []
        for g in range(k):
            st_ = steps[g][s]
            cur[g][st_.keep_cur] = prev[g][st_.keep_prev]
            cur[g][st_.host_cur] = st_.host_ids
            send = np.full(int(st_.send_splits.sum()), -1)
            send[st_.send_prev_slot] = prev[g][st_.send_prev_pos]
            send[st_.send_cur_slot] = cur[g][st_.send_cur_pos]
            sends.append(np.split(send, np.cumsum(st_.send_splits)[:-1]))
        for g in range(k):
            received = np.concatenate([sends[h][g] for h in range(k)] or [[]])
            cur[g][steps[g][s].recv_cur] = received
            assert (cur[g] == sources[g][s]).all(), (s, g)
        prev = cur


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 4),
    st.integers(1, 5),
    st.sampled_from(list(LoadMode)),
    st.integers(0, 10_000),
)
def test_step_indices_rebuild_every_step_from_the_plan(
    k: int, m: int, mode: LoadMode, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    n = 30
    owner = rng.integers(0, k, n)
    sources = [
        [np.unique(rng.integers(0, n, rng.integers(0, 12))) for _ in range(m)]
        for _ in range(k)
    ]
    replay_steps(sources, owner, k, m, mode)


@pytest.mark.parametrize("seed", range(5))
def test_rows_sent_to_several_peers_with_sparse_ids(seed: int) -> None:
    """Regression: numpy's sorting set paths (sparse ids, larger sets).

    A row loaded by one worker and sent to two peers appears twice in its send
    list; ``isin(send, prev, assume_unique=True)`` then called it "held from the
    previous step" and sent a stale row: Cora with 4 workers and 3 chunks per
    worker trained wrongly (loss off by 1e-3) in the default ``both`` mode.
    """
    rng = np.random.default_rng(seed)
    k, m, ids = 3, 2, np.arange(0, 3000, 97)
    owner = rng.integers(0, k, 3000)
    sources = [
        [np.unique(rng.choice(ids, rng.integers(12, 25))) for _ in range(m)]
        for _ in range(k)
    ]
    replay_steps(sources, owner, k, m, LoadMode.BOTH)


def test_arena_tracks_peak_and_refuses_past_its_budget() -> None:
    arena = DeviceArena(budget=1000)
    arena.alloc(Buffer.ROWS, (100,))
    arena.reserve(Buffer.WORK, 400)
    arena.free(Buffer.ROWS)
    arena.rename(Buffer.ROWS, Buffer.PREV)  # nothing held under ROWS: no-op
    arena.rename(Buffer.WORK, Buffer.GRADS)
    assert arena.live == {Buffer.GRADS: 400}
    assert (arena.live_bytes, arena.peak_bytes) == (400, 800)
    with pytest.raises(ArenaError, match=r"device_budget=1000.*'send'"):
        arena.alloc(Buffer.SEND, (200,))


# ----------------------------------------------------------------- settings
def test_conflicting_settings_name_both() -> None:
    with pytest.raises(OperatorError, match=r"chunks=None with mode='exact'"):
        DistributedConfig(workers=2, chunks=4)
    with pytest.raises(OperatorError, match=r"device_budget=None with mode='exact'"):
        DistributedConfig(workers=2, device_budget=1 << 20)
    with pytest.raises(OperatorError, match=r"chunks=None with mode='emma'"):
        DistributedConfig(workers=2, mode="emma", chunks=2)
    assert DistributedConfig(mode="emma").mode == Emma()
    assert DistributedConfig(mode="hongtu").mode == HongTu()


def test_the_flat_shim_builds_the_typed_pieces() -> None:
    flat = DistributedConfig(
        workers=3,
        mode="hongtu",
        chunks=4,
        dedup="intra",
        level1="random",
        partition_seed=5,
        threads_per_worker=1,
        compression="bf16",
    )
    typed = DistributedConfig(
        gang=GangConfig(workers=3, threads_per_worker=1),
        mode=HongTu(chunks=4, dedup=LoadMode.INTRA),
        partition=Level1Config(Level1.RANDOM, seed=5),
        compression="bf16",
    )
    assert flat == typed
    assert (flat.workers, flat.level1) == (3, Level1.RANDOM)
    # the jobs pass HongTu's defaults with every mode: ignored, as before
    exact = DistributedConfig(mode="exact", max_chunks=64, dedup="both")
    assert exact.mode == Exact()
    assert dataclasses.replace(typed, workers=2).gang.workers == 2
    assert typed.with_mode(Emma(4)).mode == Emma(4)


@pytest.mark.parametrize(
    ("build", "subject"),
    [
        (lambda: HongTu(chunks=0), "chunks"),
        (lambda: HongTu(chunks=8, max_chunks=4), "chunks"),
        (lambda: HongTu(dedup="most"), "dedup"),
        (lambda: HongTu(cache_policy="never"), "cache_policy"),
        (lambda: Emma(splits=0), "splits"),
        (lambda: GangConfig(workers=0), "workers"),
        (lambda: GangConfig(device="tpu"), "device"),  # type: ignore[arg-type]
        (lambda: Level1Config("spectral"), "level1"),  # type: ignore[arg-type]
        (lambda: DistributedConfig(compression="int8"), "compression"),  # type: ignore[arg-type]
        (lambda: parse_mode("pipeline"), "mode"),
        (lambda: parse_mode("emma", chunks=2), "chunks"),
    ],
)
def test_modes_and_pieces_check_their_settings(build, subject: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(OperatorError, match=f"^{subject} in "):
        build()


def test_each_mode_type_has_its_engine() -> None:
    from strata.operators.trainers.distributed.chunked import ChunkedEngine
    from strata.operators.trainers.distributed.emma import EmmaEngine
    from strata.operators.trainers.distributed.partition_parallel import (
        PartitionParallelEngine,
    )

    assert engine_for(Exact()) is PartitionParallelEngine
    assert engine_for(HongTu(chunks=2)) is ChunkedEngine
    assert engine_for(Emma(3)) is EmmaEngine
    assert parse_mode("hongtu", chunks=2, device_budget=None) == HongTu(chunks=2)


def test_counters_are_typed_fields_summed_per_phase() -> None:
    c = TransferCounters()
    c.add(Phase.FWD, Traffic(halo_send_rows=2, halo_send_bytes=16), layer=1, peer=1)
    c.add(Phase.FWD, Traffic(halo_send_rows=1, halo_send_bytes=8), layer=2, peer=0)
    c.add(Phase.BWD, Traffic(allreduce_bytes=40))
    assert c.total(phase=Phase.FWD) == Traffic(halo_send_rows=3, halo_send_bytes=24)
    assert c.total(peer=1).halo_send_rows == 2
    assert c.end_epoch() == {
        "bwd.allreduce_bytes": 40,
        "fwd.halo_send_bytes": 24,
        "fwd.halo_send_rows": 3,
    }
    assert c.epoch_total(0, Phase.BWD) == Traffic(allreduce_bytes=40)
    assert c.snapshot()["layers"][0]["fwd.l2.halo_send_bytes"] == 8


def test_more_workers_than_nodes_is_refused_before_any_work() -> None:
    data = load_graph("sbm:n=40,blocks=2,features=4")
    config = TrainConfig(ModelConfig("gcn"))
    trainer = DistributedTrainer(config, DistributedConfig(workers=41))
    with pytest.raises(OperatorError, match=r"workers <= num_nodes \(40\).*workers=41"):
        trainer.fit(data)


def test_a_budget_below_the_smallest_chunk_names_budget_and_peak() -> None:
    data = load_graph("sbm:n=400,blocks=4,features=8")
    dist = DistributedConfig(workers=2, mode="hongtu", device_budget=1000, max_chunks=4)
    trainer = DistributedTrainer(TrainConfig(ModelConfig("gcn"), epochs=1), dist)
    with pytest.raises(OperatorError, match=r"device_budget=1000 with max_chunks=4"):
        trainer.fit(data)
