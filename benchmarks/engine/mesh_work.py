"""SPMD functions timed by ``bench_mesh.py`` (own module: gang workers import it)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from strata.engine.mesh import Mesh, Tag


def rounds_s(mesh: Mesh, nbytes: int, rounds: int, warmup: int) -> float:
    """Seconds per exchange round, ``nbytes`` per peer (one float64 array each).

    Warm-up rounds first (connections, buffers), then a barrier, then ``rounds``
    timed rounds; every rank reports its own time (the caller takes the slowest).
    """
    payload = np.zeros(max(0, nbytes // 8), np.float64)
    out = [[payload] if peer != mesh.rank else [] for peer in range(mesh.size)]
    for r in range(warmup):
        mesh.exchange(out, Tag(0, r))
    mesh.barrier(Tag(1, 0))
    start = time.perf_counter()
    for r in range(rounds):
        got = mesh.exchange(out, Tag(2, r))
    elapsed = time.perf_counter() - start
    assert all(len(arrays) == (peer != mesh.rank) for peer, arrays in enumerate(got))
    return elapsed / rounds


def socket_node(
    pattern: str, rank: int, ports: list[int], nbytes: int, rounds: int, queue: Any
) -> None:
    """One side of a raw zmq ping-pong: ``"router"`` (DEALER -> ROUTER inbox) or
    ``"pushpull"`` (PUSH -> PULL inbox); puts seconds per round trip on ``queue``.

    Each message has a mesh message's shape: a 42-byte header, an 8-byte meta
    frame, then the payload, copied into zmq's message as ZmqMesh does.
    """
    import zmq

    context = zmq.Context()
    if pattern == "router":
        inbox, outbox = context.socket(zmq.ROUTER), context.socket(zmq.DEALER)
        outbox.setsockopt(zmq.IDENTITY, rank.to_bytes(4, "little"))
    else:
        inbox, outbox = context.socket(zmq.PULL), context.socket(zmq.PUSH)
    inbox.bind(f"tcp://127.0.0.1:{ports[rank]}")
    outbox.connect(f"tcp://127.0.0.1:{ports[1 - rank]}")
    message = [b"h" * 42, np.zeros(1, np.uint64), np.zeros(max(1, nbytes // 8))]
    warmup = 20
    start = time.perf_counter()
    for i in range(rounds + warmup):
        if i == warmup:
            start = time.perf_counter()
        outbox.send_multipart(message, copy=True)
        inbox.recv_multipart(copy=False)
    queue.put((time.perf_counter() - start) / rounds)
    inbox.close(0)
    outbox.close()
    context.term()
