"""Halo exchange: rows equal the single-process gather, gradients its scatter-add."""

from __future__ import annotations

import dataclasses

import distributed_workers as dw
import numpy as np
import pytest
import torch

from strata.engine.gang import GangSpec, run_gang
from strata.operators.trainers.distributed.halo import HaloPlan
from strata.partition import MultilevelPartitioner, RandomPartitioner, build_book
from strata.storage import CSRGraph

pytestmark = pytest.mark.multiprocess


def graph_and_book(k: int, seed: int = 0):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    n = 60
    graph = CSRGraph.from_edges(rng.integers(0, n, 300), rng.integers(0, n, 300), n)
    part = MultilevelPartitioner(k=k, seed=seed).partition(graph)
    return graph, build_book(graph, part)


def expected_grad(book, coeff: torch.Tensor, n: int, d: int) -> torch.Tensor:  # type: ignore[no-untyped-def]
    """Every worker's coefficient for each row it reads, summed per row."""
    grad = torch.zeros(n, d)
    for rank in range(book.k):
        ids = torch.from_numpy(np.concatenate([book.owned_ids(rank), book.halo(rank)]))
        grad.index_add_(0, ids, coeff[rank][ids])
    return grad


@pytest.mark.parametrize("world", [1, 2, 4])
def test_rows_and_gradients_match_one_process(world: int) -> None:
    graph, book = graph_and_book(world)
    n, d = graph.num_nodes, 3
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(1))
    coeff = torch.randn(world, n, d, generator=torch.Generator().manual_seed(2))
    results = run_gang(dw.exchange_halo, GangSpec(workers=world), book, x, coeff, None)
    grad = expected_grad(book, coeff, n, d)
    for rank, r in enumerate(results):
        torch.testing.assert_close(r["local"], x[r["ids"]], rtol=0, atol=0)
        torch.testing.assert_close(r["grad"], grad[r["owned"]])
        halo = book.halo(rank).size
        assert r["counters"].get("fwd.halo_recv_rows", 0) == halo
        assert r["counters"].get("bwd.halo_send_rows", 0) == halo  # the mirror
        assert r["counters"].get("fwd.halo_recv_bytes", 0) == halo * d * 4
    sent = sum(r["counters"].get("fwd.halo_send_rows", 0) for r in results)
    assert sent == book.halo_ids.size  # every halo row crosses once
    assert sum(r["per_peer"][0] for r in results) == book.halo(0).size


def test_restricted_plan_moves_only_active_rows() -> None:
    graph, book = graph_and_book(2, seed=3)
    n, d = graph.num_nodes, 2
    active = torch.arange(n) % 3 == 0
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(1))
    coeff = torch.ones(2, n, d)
    results = run_gang(dw.exchange_halo, GangSpec(workers=2), book, x, coeff, active)
    for rank, r in enumerate(results):
        ids = r["ids"]
        owned = r["owned"].numel()
        expect = x[ids] * (active[ids] | (torch.arange(ids.numel()) < owned))[:, None]
        torch.testing.assert_close(r["local"], expect, rtol=0, atol=0)
        halo = torch.from_numpy(book.halo(rank))
        assert r["counters"]["fwd.halo_recv_rows"] == int(active[halo].sum())


def test_plan_from_book_pairs_senders_and_receivers() -> None:
    graph = CSRGraph.from_edges(np.arange(6), (np.arange(6) + 1) % 6)  # i -> i+1
    part = RandomPartitioner(k=3).partition(graph)
    part = dataclasses.replace(part, assignment=np.array([0, 0, 1, 1, 2, 2], np.int32))
    book = build_book(graph, part)
    plans = [HaloPlan.from_book(book, r) for r in range(3)]
    # part 1 (2, 3) reads 1 from part 0; part 0 reads 5 from part 2
    assert plans[0].send_splits == (0, 1, 0)
    assert plans[0].send_ids.tolist() == [1]
    assert plans[1].recv_splits == (1, 0, 0)
    assert plans[1].recv_ids.tolist() == [1]
    assert plans[0].recv_splits == (0, 0, 1)
    assert plans[0].recv_ids.tolist() == [5]
    for a in range(3):
        for b in range(3):
            assert plans[a].send_splits[b] == plans[b].recv_splits[a]
