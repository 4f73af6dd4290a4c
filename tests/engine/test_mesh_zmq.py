"""ZmqMesh in one process (ranks on threads): the protocol, early frames, deadlines."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import mesh_workers as mw
import numpy as np
import pytest
import zmq

from strata.engine.mesh import MeshError, Tag, run_sim
from strata.engine.mesh.zmq_mesh import ZmqMesh
from strata.engine.net.frames import Kind, encode


def run_threads(fn: Callable[..., Any], size: int, *args: Any) -> list[Any]:
    """``fn(mesh, *args)`` on ``size`` threads, each with its own ZmqMesh."""
    endpoints: list[str] = [""] * size
    gathered = threading.Barrier(size)
    results: list[Any] = [None] * size
    errors: list[BaseException | None] = [None] * size

    def work(rank: int) -> None:
        def share(endpoint: str) -> list[str]:
            endpoints[rank] = endpoint
            gathered.wait()
            return list(endpoints)

        with ZmqMesh(rank, size, share, timeout_s=30) as mesh:
            try:
                results[rank] = fn(mesh, *args)
            except BaseException as exc:
                errors[rank] = exc

    threads = [threading.Thread(target=work, args=(r,)) for r in range(size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for error in errors:
        if error is not None:
            raise error
    return results


@pytest.mark.parametrize("size", [1, 2, 4])
def test_zmq_matches_sim(size: int, no_leftovers: None) -> None:
    real = run_threads(mw.spmd, size, 6, 3)
    modelled = run_sim(mw.spmd, size, 6, 3)
    for a, b in zip(real, modelled, strict=True):
        assert a["stats"] == b["stats"]  # the same messages and bytes, by peer
        assert a["sums"] == b["sums"]
        assert a["low"] == b["low"]
        for got, want in zip(a["received"], b["received"], strict=True):
            for x, y in zip(got, want, strict=True):
                assert len(x) == len(y)
                for u, v in zip(x, y, strict=True):
                    assert u.dtype == v.dtype
                    assert u.shape == v.shape
                    assert np.array_equal(u, v)


def test_zmq_large_arrays_and_many_rounds(no_leftovers: None) -> None:
    got = run_threads(_big, 3)
    for rank, seen in enumerate(got):
        assert seen == [[(peer, r) for peer in range(3)] for r in range(4)], rank


def _big(mesh: ZmqMesh) -> list[list[tuple[int, int]]]:
    seen = []
    for r in range(4):
        # 2 MiB per peer, more than the socket buffers hold: sends must interleave
        out = [[np.full(1 << 18, mesh.rank * 10 + r, np.int64)] for _ in range(3)]
        got = mesh.exchange(out, Tag(r, 0))
        for arrays in got:
            assert arrays[0].size == 1 << 18
            assert (arrays[0] == arrays[0][0]).all()
        seen.append([divmod(int(a[0][0]), 10) for a in got])
        out[0][0][:] = -1  # the caller may reuse its arrays after the round
    return seen


class FakePeer:
    """Rank 1 of a 2-rank mesh played by raw sockets: sends what a test says."""

    def __init__(self) -> None:
        self.context = zmq.Context()
        self.inbox = self.context.socket(zmq.ROUTER)
        self.inbox.bind("tcp://127.0.0.1:*")
        self.endpoint = self.inbox.getsockopt_string(zmq.LAST_ENDPOINT)
        self.outbox = self.context.socket(zmq.DEALER)
        self.outbox.setsockopt(zmq.IDENTITY, (1).to_bytes(4, "little"))

    def connect(self, endpoint: str) -> None:
        self.outbox.connect(endpoint)

    def send(
        self, kind: Kind, tag: Tag, arrays: list[np.ndarray], count: int = 0
    ) -> None:
        if kind is Kind.END:
            arrays = [np.array([count], np.uint64), *arrays]
        self.outbox.send_multipart(encode(kind, tuple(tag), arrays))

    def close(self) -> None:
        self.inbox.close(0)
        self.outbox.close(0)
        self.context.term()


def mesh_with_fake_peer(timeout_s: float = 10.0) -> tuple[ZmqMesh, FakePeer]:
    peer = FakePeer()
    mesh = ZmqMesh(
        0, 2, lambda endpoint: [endpoint, peer.endpoint], timeout_s=timeout_s
    )
    peer.connect(mesh.endpoint)
    return mesh, peer


def test_zmq_keeps_frames_that_arrive_before_their_round(no_leftovers: None) -> None:
    mesh, peer = mesh_with_fake_peer()
    try:
        # The peer runs ahead: rounds (0, 1) and (1, 0) arrive before (0, 0) ends.
        peer.send(Kind.DATA, Tag(0, 0), [np.array([1])])
        peer.send(Kind.DATA, Tag(0, 1), [np.array([2])])
        peer.send(Kind.END, Tag(0, 1), [np.array([3])], count=1)
        peer.send(Kind.END, Tag(1, 0), [])
        peer.send(Kind.END, Tag(0, 0), [np.array([0.5])], count=1)
        first = mesh.exchange([[], [np.arange(3)]], Tag(0, 0))
        assert [a.tolist() for a in first[1]] == [[1], [0.5]]
        assert mesh.early_kept == 3
        second = mesh.exchange([[], []], Tag(0, 1))
        assert [a.tolist() for a in second[1]] == [[2], [3]]
        mesh.barrier(Tag(1, 0))
    finally:
        mesh.close()
        peer.close()


def test_zmq_dead_peer_is_an_error_within_the_deadline(no_leftovers: None) -> None:
    mesh, peer = mesh_with_fake_peer(timeout_s=0.3)
    try:
        with pytest.raises(
            MeshError, match=r"no end-of-round marker from rank\(s\) \[1\]"
        ):
            mesh.exchange([[], [np.arange(3)]], Tag(0, 0))
    finally:
        mesh.close()
        peer.close()


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([(Kind.END, Tag(0, 0), 2)], "a marker counting 2 messages after 0 arrived"),
        (
            [(Kind.END, Tag(0, 0), 0), (Kind.DATA, Tag(0, 0), 0)],
            "after its end-of-round",
        ),
    ],
)
def test_zmq_protocol_errors_name_the_peer(
    messages: list[tuple[Kind, Tag, int]], problem: str
) -> None:
    mesh, peer = mesh_with_fake_peer()
    try:
        for kind, tag, count in messages:
            peer.send(kind, tag, [], count)
        time.sleep(0.2)  # all of it queued at the inbox before the round reads
        with pytest.raises(
            MeshError, match=f"rank 1 to follow the protocol.*{problem}"
        ):
            mesh.exchange([[], []], Tag(0, 0))
    finally:
        mesh.close()
        peer.close()
