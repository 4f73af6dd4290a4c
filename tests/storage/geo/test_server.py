"""Region servers: the WAN shim rule, the frame format, the server processes."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
import zmq

from strata.storage.geo.errors import GeoError
from strata.storage.geo.frames import (
    HEADER,
    MAGIC,
    GeoWireError,
    Header,
    Kind,
    batch_items,
    batch_payload_bytes,
    batch_rows,
    decode,
    encode,
    items_batch,
    payload_batch,
    rows_batch,
)
from strata.storage.geo.server import ClusterLayout, RegionCluster
from strata.storage.geo.topology import table1, uniform
from strata.storage.geo.wan import DelayShim, link_schedule

pytestmark = pytest.mark.multiprocess

N = 30
X = np.arange(N * 3, dtype=np.float32).reshape(N, 3)
HOME = np.arange(N) % 3


# ---------------------------------------------------------------- the shim rule
def test_link_schedule_matches_hand_computed_values() -> None:
    # 1 MB on 96 Mbps: 8e6 / 96e6 s = 83.33 ms on the wire, then RTT/2 = 34.5 ms.
    free, at = link_schedule(0.0, 0.0, 1_000_000, 69.0, 96.0, 1.0)
    assert free == pytest.approx(8e6 / 96e6)
    assert at == pytest.approx(8e6 / 96e6 + 0.0345)
    # Scaled by s: every delay times s.
    free_s, at_s = link_schedule(0.0, 0.0, 1_000_000, 69.0, 96.0, 0.2)
    assert (free_s, at_s) == pytest.approx((0.2 * free, 0.2 * at))
    # A send after the link is free starts at `now`.
    assert link_schedule(0.5, 2.0, 0, 100.0, 1.0, 1.0) == pytest.approx((2.0, 2.05))


def test_shim_queues_sends_on_one_link_fifo_and_keeps_links_apart() -> None:
    topo = table1()
    shim = DelayShim(topo, self_region=0, time_scale=1.0)
    size = 96_000_000 // 8  # one second on the 96 Mbps USE-USW link
    first = shim.schedule(1, size, now=0.0)
    second = shim.schedule(1, size, now=0.0)
    assert first == pytest.approx(1.0 + 0.0345)
    assert second == pytest.approx(2.0 + 0.0345)  # queued behind the first
    other = shim.schedule(2, 0, now=0.0)  # USE-LON is its own FIFO
    assert other == pytest.approx(0.040)
    # A small request and its reply cost RTT + 8 * reply / BW (spec §2.1).
    back = DelayShim(topo, self_region=3, time_scale=1.0)
    reply = back.schedule(0, 66_000, now=shim.schedule(3, 0, now=0.0) - 0.0)
    assert reply == pytest.approx(0.225 + 8 * 66_000 / 66e6)


def test_shim_rejects_bad_regions() -> None:
    with pytest.raises(ValueError, match="self_region 5 out of range"):
        DelayShim(uniform(3, 10.0, 100.0), self_region=5)
    with pytest.raises(ValueError, match="destination region 9"):
        DelayShim(uniform(3, 10.0, 100.0), self_region=0).schedule(9, 1, 0.0)


# ---------------------------------------------------------------- frames
def test_frames_round_trip_rows_and_payloads() -> None:
    items = np.array([7, 2, 11], dtype=np.int64)
    rows = np.arange(12, dtype=np.uint8).reshape(3, 4)
    header, batch = decode(
        encode(Header(Kind.ROWS, 1, 5, 3, key=2, sender=4), rows_batch(items, rows))
    )
    assert (header.kind, header.origin, header.request, header.key) == (
        Kind.ROWS,
        1,
        5,
        2,
    )
    assert batch is not None
    np.testing.assert_array_equal(batch_items(batch), items)
    np.testing.assert_array_equal(batch_rows(batch, 4), rows)
    _, payload = decode(
        encode(Header(Kind.ITEMS, count=3), payload_batch(items, np.array([5, 0, 9])))
    )
    assert payload is not None
    np.testing.assert_array_equal(batch_payload_bytes(payload), [5, 0, 9])


def test_frames_reject_bad_headers_and_bodies() -> None:
    good = encode(Header(Kind.GET_ITEMS, count=2), items_batch(np.array([1, 2])))
    with pytest.raises(GeoWireError, match="magic"):
        decode([b"XXXX" + bytes(good[0])[4:], good[1]])
    with pytest.raises(GeoWireError, match="known message kind"):
        decode([HEADER.pack(MAGIC, 1, 99, 0, 0, 0, 0, 0, 0)])
    with pytest.raises(GeoWireError, match="2 rows"):
        decode(encode(Header(Kind.GET_ITEMS, count=3), items_batch(np.array([1, 2]))))
    with pytest.raises(GeoWireError, match="Arrow IPC"):
        decode([good[0], b"not arrow"])


# ---------------------------------------------------------------- processes
def _layout(holders: np.ndarray | None = None) -> ClusterLayout:
    layout = ClusterLayout.home_only(uniform(3, 10.0, 1000.0), HOME, [16] * N)
    if holders is None:
        return layout
    return ClusterLayout(
        layout.regions, layout.rtt_ms, layout.bw_mbps, holders, layout.item_bytes, N
    )


def _gone(pids: list[int]) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                os.kill(pid, 0)
                with open(f"/proc/{pid}/stat") as stat:
                    if stat.read().split()[2] != "Z":
                        alive.append(pid)
            except (ProcessLookupError, FileNotFoundError):
                pass
        if not alive:
            return True
        time.sleep(0.05)
    return False


def test_cluster_lifecycle_kill_restart_replay_and_nothing_left() -> None:
    cluster = RegionCluster(_layout(), {("node", "x"): X}, time_scale=0.05)
    folder = cluster._folder
    assert len(set(cluster.pids.values())) == 3
    assert all(cluster.alive(r) for r in range(3))
    assert [k.attr for k in cluster.info.keys] == ["x"]
    assert len(set(cluster.info.endpoints)) == 3
    endpoint, old = cluster.info.endpoints[1], cluster.pids[1]
    # An acknowledged write (items 1 and 4 live in region 1), then a write torn
    # by the kill: a log record promising more bytes than are there.
    new = np.full((2, 3), 7.5, dtype=np.float32)
    put = Header(Kind.PUT_ROWS, origin=0, request=1, count=2)
    ack, _ = decode(_ask(endpoint, encode(put, rows_batch([1, 4], new.view(np.uint8)))))
    assert ack.kind is Kind.ACK
    with open(folder / "r1.wal", "ab") as wal:
        wal.write(b"\x05\x00\x00\xff\xff\x00\x00\x00\x00\x00\x00partial")
    cluster.kill(1)
    assert not cluster.alive(1)
    assert cluster.alive(0)
    cluster.restart(1)
    assert cluster.alive(1)
    assert cluster.pids[1] != old
    assert cluster.info.endpoints[1] == endpoint  # clients keep their address
    # The restarted server replayed its log (the torn tail ignored).
    get = Header(Kind.GET_ROWS, origin=0, request=2, count=3)
    _, batch = decode(_ask(endpoint, encode(get, items_batch([1, 4, 7]))))
    assert batch is not None
    got = batch_rows(batch, 12).view(np.float32)
    np.testing.assert_array_equal(got, np.concatenate([new, X[[7]]]))
    with pytest.raises(GeoError, match=r"region in RegionCluster\.kill"):
        cluster.kill(3)
    pids = list(cluster.pids.values())
    cluster.close()
    cluster.close()  # idempotent
    assert _gone(pids)
    assert not folder.exists()


def test_cluster_rejects_bad_input() -> None:
    with pytest.raises(GeoError, match="at most 30 rows"):
        RegionCluster(_layout(), {("node", "x"): np.zeros((31, 2), np.float32)})
    with pytest.raises(GeoError, match="bool/int/float"):
        RegionCluster(_layout(), {("node", "x"): np.array(["a"] * N)})
    with pytest.raises(GeoError, match="a holder per item"):
        _layout(np.zeros(N, dtype=np.uint32))
    with pytest.raises(GeoError, match=r"bits of regions 0\.\.2"):
        _layout(np.full(N, 8, dtype=np.uint32))
    with pytest.raises(GeoError, match="time_scale"):
        RegionCluster(_layout(), {("node", "x"): X}, time_scale=-1.0)


def _ask(endpoint: str, frames: list[bytes]) -> list[bytes]:
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 5000)  # a dead server fails the test, no hang
    try:
        sock.connect(endpoint)
        sock.send_multipart(frames)
        return list(sock.recv_multipart())
    finally:
        sock.close(linger=0)


def test_server_answers_bad_frames_with_errors_and_keeps_serving() -> None:
    # Region 2 holds nothing at all: it must still start and answer.
    holders = (np.uint32(1) << (np.arange(N) % 2).astype(np.uint32)).astype(np.uint32)
    with RegionCluster(_layout(holders), {("node", "x"): X}, 0.01) as cluster:
        empty = Header(Kind.GET_ROWS, origin=0, request=3, count=0)
        _, nothing = decode(
            _ask(cluster.info.endpoints[2], encode(empty, items_batch([])))
        )
        assert nothing is not None
        assert nothing.num_rows == 0
        endpoint = cluster.info.endpoints[0]
        with pytest.raises(GeoWireError, match="magic"):
            decode(_ask(endpoint, [b"garbage" * 4]))
        not_held = encode(
            Header(Kind.GET_ROWS, origin=0, request=9, count=1), items_batch([1])
        )
        with pytest.raises(GeoWireError, match=r"item 1 \(held by regions \[1\]\)"):
            decode(_ask(endpoint, not_held))
        bad_origin = Header(Kind.GET_ROWS, origin=7, request=1, count=1)
        with pytest.raises(GeoWireError, match="origin"):
            decode(_ask(endpoint, encode(bad_origin, items_batch([0]))))
        bad_key = Header(Kind.GET_ROWS, origin=0, request=1, count=1, key=4)
        with pytest.raises(GeoWireError, match=r"key index 0\.\.0"):
            decode(_ask(endpoint, encode(bad_key, items_batch([0]))))
        # Still serving: item 0 lives in region 0.
        head, batch = decode(
            _ask(endpoint, encode(Header(Kind.GET_ROWS, count=1), items_batch([0])))
        )
        assert head.kind is Kind.ROWS
        assert batch is not None
        np.testing.assert_array_equal(batch_rows(batch, 12).view(np.float32), X[:1])
        assert cluster.alive(0)
