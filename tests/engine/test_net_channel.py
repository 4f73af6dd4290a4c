"""engine.net: frames round-trip every dtype and shape; channels bound and time out."""

from __future__ import annotations

import socket
import struct
import threading
import time

import numpy as np
import pytest

from strata.engine.net import (
    ChannelConfig,
    ChannelTimeout,
    FrameError,
    FrameLimits,
    Kind,
    Receiver,
    Sender,
    decode,
    encode,
)

DTYPES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
    "uint64", "float16", "float32", "float64", "complex64", "complex128",
]  # fmt: skip
SHAPES = [(), (0,), (5,), (3, 4), (2, 0, 3), (2, 3, 4, 5)]


def _array(dtype: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 100, size=shape) % (2 if dtype == "bool" else 100)).astype(
        dtype
    )


def _free_tcp_endpoint() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize("dtype", DTYPES)
def test_frames_round_trip_every_dtype_and_shape(dtype: str) -> None:
    arrays = [_array(dtype, shape, i) for i, shape in enumerate(SHAPES)]
    message = decode(encode(Kind.DATA, (2**64 - 1, 7), arrays))
    assert message.kind is Kind.DATA
    assert message.tag == (2**64 - 1, 7)
    for sent, got in zip(arrays, message.arrays, strict=True):
        assert got.dtype == sent.dtype
        assert got.shape == sent.shape
        np.testing.assert_array_equal(got, sent)


def test_frames_copy_nothing_on_either_side() -> None:
    array = np.arange(1000, dtype=np.int64)
    frames = encode(Kind.DATA, (0, 0), [array, array[::2]])
    assert np.shares_memory(frames[1], array)  # contiguous: handed over as is
    assert not np.shares_memory(frames[2], array)  # strided: made contiguous
    received = [bytearray(memoryview(f).cast("B")) for f in frames]
    message = decode(received)
    assert np.shares_memory(message.arrays[0], np.frombuffer(received[1], np.uint8))


def test_big_endian_arrays_arrive_in_native_order() -> None:
    array = np.arange(6, dtype=">i4").reshape(2, 3)
    (got,) = decode(encode(Kind.DATA, (0, 0), [array])).arrays
    assert got.dtype == np.dtype("<i4")
    np.testing.assert_array_equal(got, array)


def _frames() -> list[bytes]:
    frames = encode(Kind.DATA, (1, 2), [np.arange(6, dtype=np.int32).reshape(2, 3)])
    return [bytes(memoryview(f).cast("B")) for f in frames]


@pytest.mark.parametrize(
    ("corrupt", "subject"),
    [
        (lambda f: [], "message in frames: expected a header frame"),
        (lambda f: [f[0][:10], f[1]], "header in frames: expected at least 24"),
        (lambda f: [b"XXXX" + f[0][4:], f[1]], "magic in frames"),
        (lambda f: [f[0][:4] + b"\x09" + f[0][5:], f[1]], "version in frames"),
        (lambda f: [f[0][:5] + b"\x07" + f[0][6:], f[1]], "kind in frames"),
        (lambda f: [f[0]], "frames in frames: expected 2 (the header and 1 buffers)"),
        (lambda f: [f[0], f[1][:-1]], "arrays[0] buffer in frames: expected 24 bytes"),
        (lambda f: [f[0][:24] + b"\x63" + f[0][25:], f[1]], "arrays[0].dtype"),
        (lambda f: [f[0][:25] + b"\x09" + f[0][26:], f[1]], "arrays[0].ndim"),
        (lambda f: [f[0][:30], f[1]], "header in frames: expected 2 dimensions"),
        (lambda f: [f[0] + b"\x00", f[1]], "header in frames: expected 42 bytes"),
        (
            lambda f: [f[0][:6] + struct.pack("<H", 999) + f[0][8:], f[1]],
            "arrays in frames: expected at most 64",
        ),
    ],
)
def test_malformed_frames_are_refused_naming_the_field(corrupt, subject) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(FrameError, match="Hint:") as info:
        decode(corrupt(_frames()))
    assert subject in str(info.value)


def test_limits_refuse_big_messages_at_both_ends() -> None:
    small = FrameLimits(max_arrays=2, max_ndim=2, max_bytes=100)
    with pytest.raises(
        FrameError, match="message bytes in frames: expected at most 100"
    ):
        encode(Kind.DATA, (0, 0), [np.zeros(13, np.int64)], small)
    with pytest.raises(FrameError, match="arrays in frames: expected at most 2"):
        encode(Kind.DATA, (0, 0), [np.zeros(1)] * 3, small)
    with pytest.raises(FrameError, match=r"arrays\[0\].ndim in frames"):
        encode(Kind.DATA, (0, 0), [np.zeros((1, 1, 1))], small)
    with pytest.raises(FrameError, match="message bytes"):
        decode(encode(Kind.DATA, (0, 0), [np.zeros(13, np.int64)]), small)
    with pytest.raises(FrameError, match="dtype"):
        encode(Kind.DATA, (0, 0), [np.array(["text"])])
    with pytest.raises(FrameError, match="tag"):
        encode(Kind.DATA, (-1, 0))


@pytest.mark.parametrize("transport", ["tcp", "ipc"])
def test_channel_delivers_in_order_until_the_end_marker(
    transport: str, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    endpoint = "tcp://127.0.0.1:*" if transport == "tcp" else f"ipc://{tmp_path}/c"
    config = ChannelConfig(hwm=2, timeout_s=10)
    sent = [
        [_array(dtype, (i % 4, 3), i), np.full(i, i, np.int64)]
        for i, dtype in enumerate(DTYPES * 3)
    ]
    with Receiver(endpoint, config=config) as inbox:

        def produce() -> None:
            with Sender(inbox.endpoint, config=config) as outbox:
                for i, arrays in enumerate(sent):
                    outbox.send((i, 2 * i), arrays)
                outbox.end((len(sent), 0))

        thread = threading.Thread(target=produce)
        thread.start()
        got = list(inbox)
        inbox.close()  # the sender's close() waits for this
        thread.join(10)
    assert [m.tag for m in got] == [(i, 2 * i) for i in range(len(sent))]
    for message, arrays in zip(got, sent, strict=True):
        for a, b in zip(message.arrays, arrays, strict=True):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)
    assert inbox.counters.messages == len(sent) + 1
    assert inbox.counters.bytes == sum(m.nbytes for m in got) + 24


def test_backpressure_blocks_the_sender_at_the_high_water_mark() -> None:
    # A connecting sender queues messages before its peer exists: exactly hwm of
    # them, then it blocks (no reader, no kernel buffers in between).
    endpoint = _free_tcp_endpoint()
    config = ChannelConfig(hwm=3, timeout_s=0.2)
    with Sender(endpoint, config=config, name="to-nobody") as outbox:
        for i in range(3):
            outbox.send((i, 0), [np.zeros(4)])
        with pytest.raises(ChannelTimeout) as info:
            outbox.send((3, 0), [np.zeros(4)])
        assert outbox.counters.messages == 3
        assert outbox.counters.blocked_s >= 0.2
        message = str(info.value)
        assert f"send in channel 'to-nobody' ({endpoint})" in message
        assert "within 0.2 s" in message
        # A reader appears: the queue drains, and sending goes on.
        with Receiver(endpoint, config=config) as inbox:
            assert [inbox.recv().tag for _ in range(3)] == [(0, 0), (1, 0), (2, 0)]
            outbox.send((3, 0), [np.zeros(4)])
            assert inbox.recv().tag == (3, 0)


def test_slow_reader_slows_the_writer() -> None:
    # Kernel socket buffers add to the zmq queues on TCP, so the bound is loose
    # here; the exact bound is the test above.
    config = ChannelConfig(hwm=1, timeout_s=10)
    payload = np.zeros(1 << 20, np.uint8)
    total = 64  # MiB: far more than loopback's socket buffers
    sent: list[int] = []
    with Receiver(config=config) as inbox, Sender(inbox.endpoint, config=config) as out:

        def produce() -> None:
            for i in range(total):
                out.send((i, 0), [payload])
                sent.append(i)

        thread = threading.Thread(target=produce)
        thread.start()
        time.sleep(0.5)
        assert len(sent) < total // 2  # the writer waits for the reader
        tags = [inbox.recv().tag[0] for _ in range(total)]
        thread.join(10)
    assert tags == list(range(total))
    assert out.counters.blocked_s > 0


def test_receive_times_out_naming_the_channel() -> None:
    config = ChannelConfig(timeout_s=0.1)
    with Receiver(config=config, name="from-sampler-3") as inbox:
        start = time.monotonic()
        with pytest.raises(ChannelTimeout) as info:
            inbox.recv()
        assert time.monotonic() - start < 5
    assert "recv in channel 'from-sampler-3' (tcp://127.0.0.1:" in str(info.value)
    assert inbox.counters.wait_s >= 0.1


def test_malformed_message_on_the_wire_is_refused() -> None:
    import zmq

    with Receiver(config=ChannelConfig(timeout_s=5)) as inbox:
        context = zmq.Context()
        push = context.socket(zmq.PUSH)
        try:
            push.connect(inbox.endpoint)
            push.send_multipart([b"garbage that is long enough to be a header"])
            with pytest.raises(FrameError, match="magic"):
                inbox.recv()
        finally:
            push.close(0)
            context.term()


def test_close_waits_until_the_receiver_read_everything() -> None:
    # zmq drops unread messages when a sender disconnects from a full receive
    # queue; close() after end() waits for the receiver to close instead.
    config = ChannelConfig(hwm=2, timeout_s=10)
    got: list[int] = []
    with Receiver(config=config) as inbox:

        def consume() -> None:
            time.sleep(0.3)  # the sender is done and closing by now
            got.extend(m.tag[0] for m in inbox)
            inbox.close()

        thread = threading.Thread(target=consume)
        thread.start()
        out = Sender(inbox.endpoint, config=config)
        for i in range(50):
            out.send((i, 0), [np.full(1000, i)])
        out.end()
        out.close()  # returns once the receiver closed its end
        assert got == list(range(50))
        thread.join(10)


def test_close_without_end_marker_does_not_wait() -> None:
    with Receiver() as inbox:
        out = Sender(inbox.endpoint, config=ChannelConfig(linger_s=30))
        out.send((0, 0))
        start = time.monotonic()
        out.close()
        assert time.monotonic() - start < 5


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="hwm in ChannelConfig"):
        ChannelConfig(hwm=0)
    with pytest.raises(ValueError, match="timeout_s in ChannelConfig"):
        ChannelConfig(timeout_s=0)
