"""SimMesh and run_sim: exchanges against a brute-force oracle, failures, counting."""

from __future__ import annotations

import threading

import mesh_workers as mw
import numpy as np
import pytest

from strata.engine.mesh import (
    END_BYTES,
    MeshError,
    SimMesh,
    Tag,
    round_cost,
    run_mesh,
    run_sim,
)
from strata.engine.net.frames import FrameLimits, Kind, encode


def expected(
    size: int, supersteps: int, seed: int
) -> list[list[list[list[np.ndarray]]]]:
    """Oracle: what every rank receives in every superstep, by sender."""
    sent = [
        [mw.traffic(rank, size, step, seed) for step in range(supersteps)]
        for rank in range(size)
    ]
    return [
        [[sent[peer][step][rank] for peer in range(size)] for step in range(supersteps)]
        for rank in range(size)
    ]


def same_arrays(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(
        x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)
        for x, y in zip(a, b, strict=True)
    )


def modelled_stats(size: int, supersteps: int, seed: int, rank: int) -> tuple[int, int]:
    """Oracle for (frames_sent, bytes_sent) via the real encoder's byte counts."""
    frames = nbytes = 0
    meta = np.zeros(1, np.uint64)
    for step in range(supersteps):
        out = mw.traffic(rank, size, step, seed)
        rounds = [out, [[np.zeros(1)]] * size, [[]] * size]
        for arrays_by_peer in rounds:
            for peer, arrays in enumerate(arrays_by_peer):
                if peer != rank:
                    frames += 1
                    nbytes += sum(
                        memoryview(f).nbytes
                        for f in encode(Kind.END, (0, 0), [meta, *arrays])
                    )
    for value in (np.zeros(2, np.int64), np.zeros(1, np.int64)):
        for peer in range(size):
            if peer != rank:
                frames += 1
                nbytes += sum(
                    memoryview(f).nbytes
                    for f in encode(Kind.END, (0, 0), [meta, value])
                )
    return frames, nbytes


@pytest.mark.parametrize("size", [1, 2, 4, 7])
def test_sim_exchange_matches_oracle(size: int, no_leftovers: None) -> None:
    results = run_sim(mw.spmd, size, 5, 11)
    oracle = expected(size, 5, 11)
    for rank, result in enumerate(results):
        for step in range(5):
            for peer in range(size):
                assert same_arrays(
                    result["received"][step][peer], oracle[rank][step][peer]
                )
        # allreduce: identical bits everywhere, folded in rank order
        assert result["sums"] == results[0]["sums"]
        assert result["low"] == [0, -(size - 1)]
        assert result["high"] == [size - 1]
        frames, nbytes, *_ = result["stats"]
        assert (frames, nbytes) == modelled_stats(size, 5, 11, rank)
    # every byte sent is received by someone
    assert sum(r["stats"][1] for r in results) == sum(r["stats"][3] for r in results)


def test_sim_allreduce_folds_in_rank_order() -> None:
    values = [np.array([1e16]), np.array([1.0]), np.array([-1e16]), np.array([1.0])]
    got = run_sim(_reduce_values, 4, values)
    oracle = ((values[0] + values[1]) + values[2]) + values[3]
    assert all(g.tobytes() == oracle.tobytes() for g in got)


def _reduce_values(mesh: SimMesh, values: list[np.ndarray]) -> np.ndarray:
    return mesh.allreduce(values[mesh.rank], "sum", Tag(0, 0))


def test_round_cost_is_the_encoded_size() -> None:
    meta = np.zeros(1, np.uint64)
    arrays = [np.arange(5), np.zeros((0, 3)), np.array(True), np.ones((2, 2), "f2")]
    encoded = sum(
        memoryview(f).nbytes for f in encode(Kind.END, (1, 2), [meta, *arrays])
    )
    assert round_cost(arrays) == (1, encoded)
    assert round_cost([]) == (1, END_BYTES)
    many = [np.zeros(1, np.int8)] * 2500  # 2 DATA messages of 1024, END with the rest
    limits = FrameLimits(max_arrays=1024)
    data = sum(
        memoryview(f).nbytes for f in encode(Kind.DATA, (0, 0), many[:1024], limits)
    )
    end = sum(
        memoryview(f).nbytes
        for f in encode(Kind.END, (0, 0), [meta, *many[2048:]], limits)
    )
    assert round_cost(many) == (3, 2 * data + end)


def test_sim_hands_arrays_over_read_only_without_copy() -> None:
    ends = SimMesh.group(2)
    payload = np.arange(10)
    got: list[list[list[np.ndarray]]] = [[], []]

    def rank(i: int) -> None:
        out: list[list[np.ndarray]] = [[], [payload]] if i == 0 else [[], []]
        got[i] = ends[i].exchange(out, Tag(0, 0))

    threads = [threading.Thread(target=rank, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    received = got[1][0][0]
    assert np.shares_memory(received, payload)
    assert not received.flags.writeable
    assert (
        ends[0].stats.bytes_sent
        == ends[1].stats.bytes_received
        == round_cost([payload])[1]
    )
    assert ends[1].stats.bytes_sent == END_BYTES  # an empty message: the bare marker


def test_sim_rank_that_raises_fails_every_round(no_leftovers: None) -> None:
    with pytest.raises(MeshError, match=r"rank 2.*ValueError: boom on rank 2") as info:
        run_sim(mw.raises_on, 4, 2)
    assert isinstance(info.value.__cause__, ValueError)


def test_sim_rank_that_returns_early_fails_the_others(no_leftovers: None) -> None:
    with pytest.raises(MeshError, match=r"rank 1 returned"):
        run_sim(_uneven_rounds, 3)


def _uneven_rounds(mesh: SimMesh) -> None:
    for step in range(1 if mesh.rank == 1 else 3):
        mesh.barrier(Tag(step, 0))


def test_sim_round_timeout_names_the_missing_rank(no_leftovers: None) -> None:
    with pytest.raises(MeshError, match=r"rank\(s\) \[1\] did not arrive"):
        run_sim(_late, 2, timeout_s=0.2)


def _late(mesh: SimMesh) -> None:
    if mesh.rank == 1:
        threading.Event().wait(1.0)
    mesh.barrier(Tag(0, 0))


def test_sim_checks_tags_and_inputs() -> None:
    with pytest.raises(
        MeshError, match=r"used tag \(0, [01]\) while rank [01] used \(0, [01]\)"
    ):
        run_sim(_mismatched_tags, 2)
    (end,) = SimMesh.group(1)
    end.barrier(Tag(0, 5))
    with pytest.raises(ValueError, match="after the last round"):
        end.barrier(Tag(0, 5))
    with pytest.raises(TypeError, match="objects and strings never cross"):
        end.exchange([[np.array(["a"])]], Tag(1, 0))
    with pytest.raises(ValueError, match="one list per rank"):
        end.exchange([[], []], Tag(1, 1))


def _mismatched_tags(mesh: SimMesh) -> None:
    mesh.barrier(Tag(0, mesh.rank))


def test_sim_staggered_rounds_stay_in_order() -> None:
    got = run_mesh(mw.staggered, 4, 20, kind="sim")
    assert got == [[[r] * 4 for r in range(20)]] * 4


@pytest.mark.parametrize("size", [64, 256])
def test_sim_many_ranks(size: int, no_leftovers: None) -> None:
    got = run_sim(_ring, size, 3)
    assert got == [[(rank - 1) % size] * 3 for rank in range(size)]


def _ring(mesh: SimMesh, rounds: int) -> list[int]:
    seen = []
    for r in range(rounds):
        out: list[list[np.ndarray]] = [[] for _ in range(mesh.size)]
        out[(mesh.rank + 1) % mesh.size] = [np.array([mesh.rank])]
        got = mesh.exchange(out, Tag(r, 0))
        seen.append(int(got[(mesh.rank - 1) % mesh.size][0][0]))
    return seen
