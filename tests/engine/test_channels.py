"""The local executor's channel: bounds, wake-ups and cancellation."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from strata.engine.channels import Cancelled, Channel, Delivery, EndOfStream
from strata.engine.config import ChannelBounds


def _item(n: int, size: int = 1) -> Delivery:
    return Delivery(0, 0, n, size)


def _wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def test_a_waiting_producer_resumes_once_the_channel_is_half_empty() -> None:
    channel = Channel(ChannelBounds(max_items=4, max_bytes=1 << 20))
    for n in range(4):
        assert channel.put(_item(n), 1) == 0.0
    producer = threading.Thread(target=channel.put, args=(_item(4), 1))
    producer.start()
    _wait_until(lambda: channel._putters == 1)  # it waits for room
    assert channel.get().item == 0  # type: ignore[union-attr]
    producer.join(0.1)
    # Room for one is not enough to wake it: it refills once half is gone.
    assert producer.is_alive()
    assert channel.get().item == 1  # type: ignore[union-attr]
    producer.join(5)
    assert not producer.is_alive()
    items = [channel.get().item for _ in range(3)]  # type: ignore[union-attr]
    assert items == [2, 3, 4]  # order kept
    assert channel.peak_items == 4


def test_a_byte_bound_producer_resumes_at_half_the_bytes() -> None:
    channel = Channel(ChannelBounds(max_items=100, max_bytes=400))
    for n in range(4):
        channel.put(_item(n, 100), 100)
    producer = threading.Thread(target=channel.put, args=(_item(4, 100), 100))
    producer.start()
    _wait_until(lambda: channel._putters == 1)
    channel.get()
    producer.join(0.1)
    assert producer.is_alive()  # 300 of 400 bytes: above half
    channel.get()
    producer.join(5)
    assert not producer.is_alive()
    assert channel.peak_bytes == 400


def test_an_oversized_item_waits_for_an_empty_channel() -> None:
    channel = Channel(ChannelBounds(max_items=8, max_bytes=100))
    channel.put(_item(0, 10), 10)
    producer = threading.Thread(target=channel.put, args=(_item(1, 500), 500))
    producer.start()
    _wait_until(lambda: channel._putters == 1)
    assert channel.get().item == 0  # type: ignore[union-attr]
    producer.join(5)
    assert not producer.is_alive()
    assert channel.peak_bytes == 500


def test_a_waiting_consumer_wakes_for_the_first_item() -> None:
    channel = Channel(ChannelBounds())
    got: list[object] = []
    consumer = threading.Thread(target=lambda: got.append(channel.get()))
    consumer.start()
    _wait_until(lambda: channel._getters == 1)
    channel.put(_item(7), 1)
    consumer.join(5)
    assert [m.item for m in got] == [7]  # type: ignore[attr-defined]


def test_control_messages_pass_a_full_channel() -> None:
    channel = Channel(ChannelBounds(max_items=1, max_bytes=1 << 20))
    channel.put(_item(0), 1)
    channel.put_control(EndOfStream(0, 0))  # never waits
    assert channel.get().item == 0  # type: ignore[union-attr]
    assert channel.get() == EndOfStream(0, 0)


def test_cancel_wakes_every_waiter() -> None:
    channel = Channel(ChannelBounds(max_items=1, max_bytes=1 << 20))
    empty = Channel(ChannelBounds())
    channel.put(_item(0), 1)
    errors: list[BaseException] = []

    def run(call: Callable[[], object]) -> None:
        try:
            call()
        except Cancelled as exc:
            errors.append(exc)

    waiters = [
        threading.Thread(target=run, args=(lambda: channel.put(_item(1), 1),)),
        threading.Thread(target=run, args=(empty.get,)),
    ]
    for waiter in waiters:
        waiter.start()
    _wait_until(lambda: channel._putters == 1 and empty._getters == 1)
    channel.cancel()
    empty.cancel()
    for waiter in waiters:
        waiter.join(5)
    assert len(errors) == 2
    with pytest.raises(Cancelled):
        channel.get()
