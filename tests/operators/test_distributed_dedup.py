"""HongTu's transfer counters equal a brute-force set computation over the chunks.

A real chunked training run (3 workers, 4 chunks each, every dedup mode)
counts every row it moves at the call site. Independently, the test rebuilds
each chunk's sources ``S_{g,s} = D_c + N_in(D_c)`` from the graph itself and
evaluates the set formulas of ``hongtu.md`` §3.6 with Python sets:

* naive (no dedup): host rows = Σ_{g,s} |S_{g,s}|;
* intra: Σ_{g,s} |S_{g,s} \\ S_{g,s-1}|;
* inter: Σ_s |U_s|, peer rows Σ_{g,s} |S_{g,s}| - Σ_s |U_s|;
* both: Σ_s |U_s \\ U_{s-1}|, peer rows Σ_{g,s} |S_{g,s} \\ S_{g,s-1}| - Σ_s
  |U_s \\ U_{s-1}|, with U_s = union over g of S_{g,s}.

Every layer of the forward and evaluation passes loads by that plan, the
refetching backward by the reversed plan, and the backward's gradient flushes
mirror the forward loads; host->device bytes are rows x the layer's input width
x 4. The run with dedup must move fewer bytes than the run without.
"""

from __future__ import annotations

import distributed_workers as dw
import numpy as np
import pytest

from strata.operators.trainers import ModelConfig, TrainConfig
from strata.operators.trainers.distributed import DistributedConfig, DistributedTrainer
from strata.operators.trainers.distributed.config import Level1
from strata.operators.trainers.distributed.trainer import level1_partition
from strata.partition import ChunkConfig, ChunkMethod, split_chunks
from strata.storage import load_graph

pytestmark = pytest.mark.multiprocess

K, M, EPOCHS, HIDDEN, FEATURES = 3, 4, 2, 8, 12
MODES = ("naive", "intra", "inter", "both")


def chunk_sources(graph, method: ChunkMethod) -> list[list[set[int]]]:  # type: ignore[no-untyped-def]
    """``S[g][s]`` in processing order, rebuilt from the graph's in-edges."""
    part = level1_partition(graph, K, Level1.METIS, seed=0)
    schedule = split_chunks(graph, part.assignment, K, ChunkConfig(M, method=method))
    csc = graph.csc()
    out = []
    for g in range(K):
        per = []
        for s in range(M):
            chunk = int(schedule.order[g, s])
            dst = schedule.dst_of(chunk)
            assert (part.assignment[dst] == g).all()
            sources = {int(v) for v in dst}
            for v in dst:
                sources.update(
                    int(u) for u in csc.indices[csc.indptr[v] : csc.indptr[v + 1]]
                )
            assert sources == set(schedule.src_of(chunk).tolist())
            per.append(sources)
        out.append(per)
    return out


def expected_rows(sources: list[list[set[int]]], mode: str) -> tuple[int, int, int]:
    """(host rows, peer rows, reused rows) of one pass over the steps."""
    empty: set[int] = set()
    host = peer = reuse = 0
    prev_u: set[int] = set()
    for s in range(M):
        steps = [sources[g][s] for g in range(K)]
        prevs = [sources[g][s - 1] if s else empty for g in range(K)]
        union = set().union(*steps)
        total = sum(len(x) for x in steps)
        fresh = sum(len(x - p) for x, p in zip(steps, prevs, strict=True))
        if mode == "naive":
            host += total
        elif mode == "intra":
            host += fresh
            reuse += total - fresh
        elif mode == "inter":
            host += len(union)
            peer += total - len(union)
        else:
            host += len(union - prev_u)
            peer += fresh - len(union - prev_u)
            reuse += total - fresh
        prev_u = union
    return host, peer, reuse


def layer_sum(run, key: str) -> int:  # type: ignore[no-untyped-def]
    """``key`` (``"<phase>.l<layer>.<name>"``) in epoch 0, summed over workers."""
    return sum(w["layers"][0].get(key, 0) for w in run.report["per_worker"])


@pytest.mark.parametrize(
    "method",
    [
        ChunkMethod.RECURSIVE,
        pytest.param(ChunkMethod.CONTIGUOUS, marks=pytest.mark.slow),
    ],
)
def test_counters_equal_the_set_formulas(method: ChunkMethod) -> None:
    data = load_graph(f"sbm:n=900,blocks=9,degree=6,features={FEATURES},seed=2")
    sources = chunk_sources(data.graph, method)
    config = TrainConfig(
        ModelConfig("gcn", hidden=HIDDEN, dropout=0.5),
        epochs=EPOCHS,
        patience=0,
        device="cpu",
        threads=1,
    )
    trainers = [
        DistributedTrainer(
            config,
            DistributedConfig(
                workers=K,
                mode="hongtu",
                chunks=M,
                chunk_method=method,
                dedup=mode,
                cache_policy="refetch",
                timeout_s=600,
            ),
        )
        for mode in MODES
    ]
    runs = dict(zip(MODES, dw.fit_on_one_gang(data, trainers), strict=True))
    widths = {1: FEATURES, 2: HIDDEN}
    reversed_sources = [list(reversed(per)) for per in sources]
    for mode, run in runs.items():
        host, peer, reuse = expected_rows(sources, mode)
        r_host, r_peer, r_reuse = expected_rows(reversed_sources, mode)
        assert run.report["plan"]["host_rows"] == host, mode
        assert (
            run.report["plan"]["naive_host_rows"] == expected_rows(sources, "naive")[0]
        )
        for layer, width in widths.items():
            for phase in ("fwd", "eval"):
                pre = f"{phase}.l{layer}."
                assert layer_sum(run, pre + "h2d_rows") == host, (mode, pre)
                assert layer_sum(run, pre + "h2d_bytes") == host * width * 4
                assert layer_sum(run, pre + "peer_recv_rows") == peer, (mode, pre)
                assert layer_sum(run, pre + "peer_send_rows") == peer, (mode, pre)
                assert layer_sum(run, pre + "reuse_rows") == reuse, (mode, pre)
            pre = f"bwd.l{layer}."  # refetch: the reversed plan, then the flushes
            assert layer_sum(run, pre + "h2d_rows") == r_host, (mode, pre)
            assert layer_sum(run, pre + "h2d_bytes") == r_host * width * 4
            assert layer_sum(run, pre + "reuse_rows") == r_reuse, (mode, pre)
            flushed = host * width * 4 if layer > 1 else 0
            assert layer_sum(run, pre + "d2h_bytes") == flushed, (mode, pre)
            returned = peer if layer > 1 else 0  # a gradient per row received
            assert layer_sum(run, pre + "peer_send_rows") == r_peer + returned
        # every epoch moves the same rows
        for w in run.report["per_worker"]:
            assert w["epochs"][0] == w["epochs"][-1]
    naive = runs["naive"].report["totals"]["fwd.h2d_bytes"]
    both = runs["both"].report["totals"]["fwd.h2d_bytes"]
    assert both < naive
    assert np.isclose(
        both / naive,
        expected_rows(sources, "both")[0] / expected_rows(sources, "naive")[0],
    )
