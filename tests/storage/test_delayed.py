"""The delayed-reply serve loop shared by the feature and region servers."""

from __future__ import annotations

import doctest
import os
import threading
import time
from typing import Any

import zmq

from strata.storage import _delayed
from strata.storage._delayed import DelayedReplies, poll_ms, serve_router


def test_docstring_examples() -> None:
    result = doctest.testmod(_delayed)
    assert result.failed == 0
    assert result.attempted > 0


def test_replies_leave_by_due_time_then_in_the_order_held() -> None:
    replies: DelayedReplies[int] = DelayedReplies()
    for reply, due in enumerate([3.0, 1.0, 2.0, 1.0, 3.0]):
        replies.hold(due, reply)
    assert list(replies.pop_due(now=0.5)) == []
    assert list(replies.pop_due(now=2.0)) == [1, 3, 2]
    assert replies.wait_s(now=2.5, tick_s=1.0) == 0.5
    assert replies.wait_s(now=4.0, tick_s=1.0) == 0.0
    assert list(replies.pop_due(now=3.0)) == [0, 4]
    assert len(replies) == 0
    assert replies.wait_s(now=9.0, tick_s=0.25) == 0.25


def test_poll_ms_rounds_down_and_sleeps_a_wait_under_a_millisecond() -> None:
    assert [poll_ms(w) for w in (0.0, -2.0, 0.001, 0.0019, 1.5)] == [0, 0, 1, 1, 1500]
    start = time.perf_counter()
    assert poll_ms(0.0008) == 0
    assert time.perf_counter() - start >= 0.0008


class _Echo:
    """A server that echoes each request after ``delay_s``, through the loop."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.sock: zmq.Socket[Any] = zmq.Context.instance().socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.endpoint = self._bind()
        self.replies: DelayedReplies[list[bytes]] = DelayedReplies()
        self.stop = threading.Event()

    def _bind(self) -> str:
        self.sock.bind("tcp://127.0.0.1:0")
        return str(self.sock.getsockopt_string(zmq.LAST_ENDPOINT))

    def answer(self, frames: list[zmq.Frame]) -> None:
        due = time.perf_counter() + self.delay_s
        self.replies.hold(due, [f.bytes for f in frames])

    def serve(self, stop_fd: int | None = None) -> None:
        serve_router(
            self.sock,
            self.answer,
            self.replies,
            self.sock.send_multipart,
            should_stop=self.stop.is_set,
            stop_fd=stop_fd,
        )


def test_the_loop_holds_each_reply_for_its_delay_and_keeps_receiving() -> None:
    server = _Echo(delay_s=0.03)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    client: zmq.Socket[Any] = zmq.Context.instance().socket(zmq.DEALER)
    client.setsockopt(zmq.LINGER, 0)
    client.connect(server.endpoint)
    try:
        sent = {}
        for i in range(5):  # sent together: held together, not one after another
            sent[i] = time.perf_counter()
            client.send(str(i).encode())
        got = []
        for _ in range(5):
            assert client.poll(5000), "a reply is missing"
            got.append((int(client.recv()), time.perf_counter()))
        assert [i for i, _ in got] == list(range(5))
        # Never before its delivery time (noise only ever adds time).
        assert all(at - sent[i] >= 0.03 for i, at in got)
    finally:
        server.stop.set()
        thread.join(5)
        client.close(0)
        server.sock.close(0)
    assert not thread.is_alive()


def test_the_loop_stops_on_a_byte_on_its_stop_fd() -> None:
    server = _Echo(delay_s=0.0)
    read_end, write_end = os.pipe()
    thread = threading.Thread(target=server.serve, args=(read_end,), daemon=True)
    thread.start()
    try:
        os.write(write_end, b"x")
        thread.join(5)
        assert not thread.is_alive()
    finally:
        server.stop.set()
        thread.join(5)
        os.close(read_end)
        os.close(write_end)
        server.sock.close(0)
