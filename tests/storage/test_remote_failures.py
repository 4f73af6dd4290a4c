"""Feature servers under failure and bad input: clear errors, no hangs, no leftovers."""

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import zmq
from hypothesis import given, settings
from hypothesis import strategies as st

from strata.storage import FeatureError
from strata.storage.features import (
    FeatureServer,
    FeatureServerGroup,
    FeatureServerTimeout,
    NetworkModel,
    RemoteFeatureStore,
)
from strata.storage.features.wire import (
    HEADER,
    ErrorCode,
    FrameError,
    Header,
    Kind,
    Limits,
    decode,
    encode_header,
)

N, PARTS = 120, 3
X = np.arange(N * 4, dtype=np.float32).reshape(N, 4)
OWNER = np.arange(N) % PARTS


def _shm():
    # Only this process's feature-server segments (``sfs_<pid>_...``): other
    # processes' groups (a benchmark beside the tests) come and go.
    mine = f"sfs_{os.getpid()}_"
    return {name for name in os.listdir("/dev/shm") if name.startswith(mine)}


def _gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(") ")[1].startswith("Z")


def _wait_until(predicate, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def _servers(**kwargs):
    servers = []
    for part in range(PARTS):
        owned = np.flatnonzero(np.equal(OWNER, part))
        servers.append(FeatureServer({"x": X[owned]}, owned, part, **kwargs).start())
    return servers


@pytest.fixture
def trio():
    servers = _servers(max_request_ids=1000)
    yield servers
    for s in servers:
        s.close()


@pytest.fixture
def server(trio):
    return trio[1]


@pytest.fixture
def raw(server):
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(server.endpoint)
    yield sock
    sock.close(linger=0)


def _ask(sock, frames, timeout_s=10.0):
    sock.send_multipart(frames)
    assert sock.poll(int(timeout_s * 1000)), "no reply"
    return decode(sock.recv_multipart(), Limits(1 << 40, 1 << 40))


def _get(count, ids=None, *, code=0, dtype=8, row=16, request=7):
    ids = np.arange(count, dtype=np.int64) * 3 + 1 if ids is None else ids
    return [encode_header(Header(Kind.GET, code, request, dtype, count, row)), ids]


def _header_bytes(magic=b"SFS1", version=1, kind=1, count=1):
    return HEADER.pack(magic, version, kind, 0, 7, 8, count, 16)


ids = np.array([1, 4, 7], dtype=np.int64)
MALFORMED = {
    "garbage": ([b"\x00garbage"], ErrorCode.BAD_FRAME, "32 bytes"),
    "bad magic": ([_header_bytes(magic=b"HTTP"), ids], ErrorCode.BAD_FRAME, "magic"),
    "bad version": ([_header_bytes(version=9), ids], ErrorCode.BAD_FRAME, "version"),
    "bad kind": ([_header_bytes(kind=99), ids], ErrorCode.BAD_FRAME, "kind"),
    "three frames": ([_header_bytes(), ids, ids], ErrorCode.BAD_FRAME, "3 frames"),
    "truncated ids": (_get(3, ids.tobytes()[:-3]), ErrorCode.BAD_FRAME, "truncated"),
    "count mismatch": (_get(4, ids), ErrorCode.BAD_FRAME, "count mismatch"),
    "missing body": ([_get(3)[0]], ErrorCode.BAD_FRAME, "count mismatch"),
    "oversized count": (_get(1 << 40, ids), ErrorCode.OVERSIZED, "oversized"),
    "over max ids": (_get(1001), ErrorCode.OVERSIZED, "at most 1000 ids"),
    "unknown attr": (_get(3, ids, code=5), ErrorCode.UNKNOWN_ATTR, "attribute id"),
    "wrong dtype": (_get(3, ids, dtype=9), ErrorCode.BAD_REQUEST, "float32 rows"),
    "wrong row bytes": (_get(3, ids, row=8), ErrorCode.BAD_REQUEST, "16 bytes"),
    "not owned": (_get(2, np.array([1, 3])), ErrorCode.NOT_OWNED, "id 3"),
    "a reply kind": (
        [encode_header(Header(Kind.REPLY, 0, 7))],
        ErrorCode.BAD_REQUEST,
        "request kind",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_frames_get_an_error_reply_and_the_server_serves_on(
    server, raw, case
):
    frames, code, words = MALFORMED[case]
    header, body = _ask(raw, frames)
    assert header.kind is Kind.ERROR
    assert header.code == code
    message = bytes(body).decode()
    assert words in message, message
    assert "partition 1" in message or "frame" in message
    header, _ = _ask(raw, [encode_header(Header(Kind.PING, 0, 8))])
    assert (header.kind, header.request, header.code) == (Kind.REPLY, 8, 1)
    header, body = _ask(raw, _get(2, np.array([4, 1])))
    assert header.kind is Kind.REPLY
    np.testing.assert_array_equal(np.frombuffer(body, np.float32), X[[4, 1]].ravel())
    assert server.refused == 1
    assert server.served.requests == 1


def test_decode_names_each_problem():
    for case, (frames, code, words) in MALFORMED.items():
        if code in (ErrorCode.BAD_FRAME, ErrorCode.OVERSIZED):
            with pytest.raises(FrameError, match=words) as info:
                decode(frames, Limits(1000, 1 << 20))
            assert info.value.oversized == (code == ErrorCode.OVERSIZED), case


@pytest.mark.parametrize("owned", [[3, 9], [3, 1 << 40]], ids=["dense", "sparse"])
def test_both_id_maps_refuse_ids_not_owned(owned):
    owned = np.array(owned, dtype=np.int64)
    table = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    with FeatureServer({"x": table}, owned, 0) as server:
        sock = zmq.Context.instance().socket(zmq.DEALER)
        sock.connect(server.endpoint)
        try:
            for ids, expected in (([owned[1], 3], [[3.0, 4.0], [1.0, 2.0]]),):
                header, body = _ask(sock, _get(2, np.array(ids), row=8))
                assert header.kind is Kind.REPLY
                rows = np.frombuffer(body, np.float32).reshape(2, 2)
                np.testing.assert_array_equal(rows, expected)
            for bad in (4, -1, 10, 1 << 41, 2, 0):
                header, body = _ask(sock, _get(2, np.array([3, bad]), row=8))
                assert header.code == ErrorCode.NOT_OWNED
                assert f"id {bad} (not owned) at position 1" in bytes(body).decode()
        finally:
            sock.close(linger=0)


def _mutated_header(fields):
    magic, version, kind, code, count, row = fields
    return HEADER.pack(magic, version, kind, code, 9, 8, count, row)


FRAMES = st.one_of(
    st.lists(st.binary(max_size=80), min_size=1, max_size=3),
    st.tuples(
        st.tuples(
            st.sampled_from([b"SFS1", b"SFS2"]),
            st.sampled_from([1, 2]),
            st.integers(0, 8),
            st.integers(0, 3),
            st.sampled_from([0, 1, 2, 3, 1000, 1 << 40, (1 << 64) - 1]),
            st.sampled_from([0, 8, 16, 4096]),
        ).map(_mutated_header),
        st.binary(max_size=64),
    ).map(list),
)


@settings(max_examples=200, deadline=None)
@given(frames=FRAMES)
def test_decode_refuses_with_frame_errors_only(frames):
    with contextlib.suppress(FrameError):  # anything else fails the test
        decode(frames, Limits(1000, 1 << 20))


@pytest.fixture(scope="module")
def fuzzed():
    owned = np.flatnonzero(np.equal(OWNER, 1))
    with FeatureServer({"x": X[owned]}, owned, 1, max_request_ids=1000) as server:
        sock = zmq.Context.instance().socket(zmq.DEALER)
        sock.connect(server.endpoint)
        yield server, sock
        sock.close(linger=0)


@settings(max_examples=80, deadline=None)
@given(frames=FRAMES)
def test_random_frames_never_stop_the_server(fuzzed, frames):
    _, sock = fuzzed
    header, _ = _ask(sock, frames)
    assert header.kind in (Kind.ERROR, Kind.REPLY)
    header, body = _ask(sock, _get(2, np.array([4, 1])))
    assert header.kind is Kind.REPLY
    np.testing.assert_array_equal(np.frombuffer(body, np.float32), X[[4, 1]].ravel())


def test_ids_not_owned_name_the_partition_and_the_id(trio, server):
    endpoints = {p: s.endpoint for p, s in enumerate(trio)}
    with RemoteFeatureStore(endpoints, OWNER, names={1: "fs-one"}) as store:
        with pytest.raises(FeatureError) as info:
            store.fetch("x", {1: np.array([4, 7, 5, 1])})
        message = str(info.value)
        assert "partition 1" in message
        assert "id 5 (not owned) at position 2" in message
        assert "fs-one" in message
        assert server.endpoint in message
        rows = store.fetch("x", {1: np.array([7, 1])})  # still serving
        np.testing.assert_array_equal(rows[1], X[[7, 1]])
        assert store.traffic.requests == server.served.requests == 1
        assert server.refused == 1


def test_a_slow_reply_times_out_and_the_store_recovers():
    owned = np.flatnonzero(np.equal(OWNER, 1))
    slow = NetworkModel(latency_s=0.0, bandwidth_Bps=2000.0)  # 24 bytes a row
    servers = _servers(network=slow)
    endpoints = {p: s.endpoint for p, s in enumerate(servers)}
    try:
        with RemoteFeatureStore(endpoints, OWNER, timeout_s=0.5) as store:
            store.schema()
            start = time.monotonic()
            with pytest.raises(FeatureServerTimeout) as info:
                store.fetch("x", {1: np.tile(owned, 2)})  # 1920 bytes: 0.96 s
            assert time.monotonic() - start < 0.5 + 2.0
            assert "timeout_s=0.5" in str(info.value)
            assert "partition 1" in str(info.value)
            assert endpoints[1] in str(info.value)
            rows = store.fetch("x", {1: owned[:1]})  # 12 ms; the late reply is gone
            np.testing.assert_array_equal(rows[1], X[owned[:1]])
            assert store.traffic.requests == 1
    finally:
        for s in servers:
            s.close()


@pytest.mark.multiprocess
def test_a_killed_server_fails_the_next_fetch_within_the_timeout():
    before = _shm()
    with FeatureServerGroup({"x": X}, OWNER, name="victim") as group:
        with RemoteFeatureStore(
            group.endpoints, OWNER, names=group.names, timeout_s=1.0
        ) as store:
            rows = store.fetch("x", {1: np.array([1, 4])})
            np.testing.assert_array_equal(rows[1], X[[1, 4]])
            group.kill(1)
            assert not group.alive(1)
            start = time.monotonic()
            with pytest.raises(FeatureServerTimeout) as info:
                store.fetch("x", {0: np.array([0, 3]), 1: np.array([1, 4])})
            assert time.monotonic() - start < 1.0 + 2.0
            message = str(info.value)
            assert "victim-p1" in message
            assert "partition 1" in message
            assert group.endpoints[1] in message
            rows = store.fetch("x", {2: np.array([2])})  # the others serve on
            np.testing.assert_array_equal(rows[2], X[[2]])
        pids = list(group.pids.values())
        segments = group.segments
        assert set(segments) <= _shm()
    assert all(_gone(pid) for pid in pids)
    assert _shm() == before
    assert not set(segments) & _shm()
    group.close()  # idempotent


@pytest.mark.multiprocess
def test_a_startup_failure_leaves_nothing_behind():
    before = _shm()
    with pytest.raises(FeatureError, match="startup"):
        FeatureServerGroup({"x": X}, OWNER, startup_timeout_s=0.0)
    assert _shm() == before


CHILD = textwrap.dedent(
    """
    import json, os, signal, sys
    import numpy as np
    from strata.storage.features import FeatureServerGroup
    group = FeatureServerGroup({"x": np.ones((30, 2))}, np.arange(30) % 2)
    print(json.dumps({"pids": list(group.pids.values()), "shm": group.segments}))
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


@pytest.mark.multiprocess
def test_servers_exit_when_their_parent_dies():
    result = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, timeout=120, check=False
    )
    assert result.returncode == -9, result.stderr.decode()
    info = json.loads(result.stdout.decode().splitlines()[-1])
    assert _wait_until(lambda: all(_gone(pid) for pid in info["pids"]))
    # multiprocessing's resource tracker unlinks what a killed parent leaked.
    assert info["shm"]
    assert _wait_until(lambda: not set(info["shm"]) & set(os.listdir("/dev/shm")))
