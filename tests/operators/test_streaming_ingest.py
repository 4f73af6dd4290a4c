"""Ingestion: validate, log, acknowledge; survive malformed and oversized frames."""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strata.engine import Pipeline, execute
from strata.operators.cli.ingest import IngestCommand
from strata.operators.streaming import (
    EmbeddingSink,
    StaticSetup,
    StreamingModel,
    UpdateStream,
    streaming_gnn,
    summarize_stream,
)
from strata.operators.streaming.client import (
    IngestClient,
    encode_batch,
    query_embeddings,
)
from strata.operators.streaming.ingest import IngestServer, ZmqIngest
from strata.operators.streaming.update_files import write_update_file
from strata.storage import UpdateLimits, UpdateLog, edge_updates, make_updates
from tests.operators.streaming_helpers import (
    IN_DIM,
    Oracle,
    features,
    free_endpoint,
    make_model,
    one_torch_thread,  # noqa: F401 (fixture)
    rmat_graph,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LIMITS = UpdateLimits(max_nodes=1000, max_rows=500)


class Served:
    """An IngestServer polled by a background thread."""

    def __init__(self, log: UpdateLog, **options) -> None:
        self.server = IngestServer(log, "tcp://127.0.0.1:*", **options)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.server.serve_once(10)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.server.close()


@pytest.fixture
def served(tmp_path) -> Iterator[Served]:
    log = UpdateLog(tmp_path / "log")
    s = Served(log, limits=LIMITS, max_frame_bytes=1 << 16)
    yield s
    s.close()
    log.close()


def call(client: IngestClient, frames: list[bytes]) -> dict:
    client.send_frames(frames)
    reply = client.receive(5000)
    assert reply is not None, "the endpoint stopped answering"
    return reply


def good(seq: int) -> list[bytes]:
    header = json.dumps({"producer": "good", "seq": seq}).encode()
    return [header, encode_batch(edge_updates([seq % 50], [1], event_time=0))]


def test_batches_are_logged_once_and_acknowledged_with_offsets(
    served, tmp_path
) -> None:
    batches = [edge_updates([i, i], [i + 1, i + 2], event_time=i) for i in range(10)]
    with IngestClient(served.server.endpoint, "p") as client:
        report = client.send_all(batches, window=4)
        again = client.send_all(batches[:6], window=4)  # a producer restarting
    assert (report.acked_rows, report.first_offset, report.last_offset) == (20, 0, 19)
    assert (again.acked_rows, again.duplicate_batches, again.held_batches) == (0, 6, 6)
    assert again.first_offset == -1  # held batches are skipped, not sent again
    served.close()
    with UpdateLog(tmp_path / "log", readonly=True) as log:
        logged = pa.Table.from_batches([b for _, b in log.read(0)])
    assert logged.equals(pa.Table.from_batches(batches))


MALFORMED = {
    "one frame": [b"{}"],
    "three frames": [b"{}", b"", b""],
    "header not json": [b"\xff\xfe", b""],
    "header a list": [b"[1, 2]", b""],
    "no producer": [json.dumps({"seq": 1}).encode(), b""],
    "seq a string": [json.dumps({"producer": "x", "seq": "1"}).encode(), b""],
    "negative seq": [json.dumps({"producer": "x", "seq": -1}).encode(), b""],
    "not arrow": [json.dumps({"producer": "x", "seq": 1}).encode(), b"garbage" * 10],
    "truncated arrow": [
        json.dumps({"producer": "x", "seq": 1}).encode(),
        encode_batch(edge_updates([0], [1], event_time=0))[:-20],
    ],
    "wrong schema": [
        json.dumps({"producer": "x", "seq": 1}).encode(),
        encode_batch(pa.record_batch({"a": [1, 2]})),
    ],
    "id out of range": [
        json.dumps({"producer": "x", "seq": 1}).encode(),
        encode_batch(edge_updates([0], [5000], event_time=0)),
    ],
    "nan feature": [
        json.dumps({"producer": "x", "seq": 1}).encode(),
        encode_batch(
            make_updates([3], node=[0], feature=np.full((1, 2), np.nan), event_time=0)
        ),
    ],
    "too many rows": [
        json.dumps({"producer": "x", "seq": 1}).encode(),
        encode_batch(edge_updates(np.zeros(600, int), np.ones(600, int), event_time=0)),
    ],
    "oversized frame": [
        json.dumps({"producer": "x", "seq": 1}).encode(),
        b"\0" * (1 << 17),
    ],
}


def test_malformed_frames_are_rejected_with_a_reason(served, tmp_path) -> None:
    with IngestClient(served.server.endpoint, "fuzz") as client:
        for seq, (name, frames) in enumerate(MALFORMED.items(), start=1):
            reply = call(client, frames)
            assert reply["ok"] is False, name
            assert reply["error"], name
            assert call(client, good(seq))["ok"] is True, f"after {name}"
    counters = served.server.counters()
    assert counters["rejected"] == len(MALFORMED)
    assert counters["accepted_batches"] == len(MALFORMED)
    assert counters["rejected_size"] == 1


def test_a_message_beyond_the_transport_cap_is_dropped(served) -> None:
    """ZMQ_MAXMSGSIZE cuts the connection; the endpoint serves the next client."""
    with IngestClient(served.server.endpoint, "huge") as client:
        client.send_frames([b"{}", b"\0" * (1 << 19)])
    with IngestClient(served.server.endpoint, "next") as client:
        assert call(client, good(1))["ok"] is True


@given(frames=st.lists(st.binary(max_size=300), min_size=0, max_size=4))
@settings(max_examples=60, deadline=None)
def test_random_frames_never_stop_the_endpoint(frames, tmp_path_factory) -> None:
    log = UpdateLog(tmp_path_factory.mktemp("fuzz") / "log")
    server = IngestServer(log, "tcp://127.0.0.1:*", limits=LIMITS)
    try:
        with IngestClient(server.endpoint, "fuzz") as client:
            if frames:
                client.send_frames(frames)
                server.serve_once(2000)
                reply = client.receive(2000)
                assert reply is not None
                assert reply["ok"] is False or reply.get("type") == "pong"
            client.send_frames(good(1))
            accepted = server.serve_once(2000)
            assert [a.batch.num_rows for a in accepted] == [1]
    finally:
        server.close()
        log.close()
    assert log.next_offset == 1


VALID = encode_batch(
    make_updates(
        [0, 3, 1],
        src=[1, 0, 1],
        dst=[2, 0, 2],
        node=[0, 4, 0],
        feature=np.ones((3, 2), np.float32),
        event_time=0,
    )
)


@given(
    flips=st.lists(
        st.tuples(st.integers(0, len(VALID) - 1), st.integers(1, 255)),
        min_size=1,
        max_size=8,
    ),
    cut=st.integers(0, len(VALID)),
)
@settings(max_examples=150, deadline=None)
def test_corrupted_arrow_payloads_are_rejected_or_valid(flips, cut, tmp_path_factory):
    """Bit-flipped and truncated IPC streams: a clean reject, or a valid batch."""
    payload = bytearray(VALID)
    for position, mask in flips:
        payload[position] ^= mask
    log = UpdateLog(tmp_path_factory.mktemp("corrupt") / "log")
    server = IngestServer(log, "tcp://127.0.0.1:*", limits=LIMITS)
    try:
        with IngestClient(server.endpoint, "fuzz") as client:
            client.send_frames(
                [
                    json.dumps({"producer": "p", "seq": 1}).encode(),
                    bytes(payload[:cut] if cut % 3 == 0 else payload),
                ]
            )
            accepted = server.serve_once(2000)
            reply = client.receive(2000)
            assert reply is not None
            assert reply["ok"] == bool(accepted)
            client.send_frames(good(1))
            assert len(server.serve_once(2000)) == 1
    finally:
        server.close()
        log.close()


def test_zmq_ingest_feeds_the_streaming_gnn(tmp_path) -> None:
    graph = rmat_graph(scale=6)
    x = features(graph.num_nodes)
    model = make_model("gcn")
    batches = list(UpdateStream(graph, feature_dim=IN_DIM, seed=4).batches(600, 50))
    endpoint = free_endpoint()
    source = ZmqIngest(
        tmp_path / "log",
        endpoint,
        setup=StaticSetup(graph, x, StreamingModel.from_module(model)),
    )
    p = Pipeline("ingest")
    p.step("updates", source)
    last = streaming_gnn(p, "gnn", "updates", num_layers=2, dtype="float64")
    query = free_endpoint()
    sink = EmbeddingSink(str(tmp_path / "emb.npy"), query_endpoint=query)
    p.step("embeddings", sink, last)
    p.step("summary", summarize_stream, "embeddings")
    p.record("summary")
    answers = []

    def produce() -> None:
        with IngestClient(endpoint, "producer") as client:
            client.send_all(batches, timeout_s=1.0, deadline_s=60)
            # the job is live: its sink answers between items (ticks every 100 ms)
            answers.append(query_embeddings(query, [0, 1, 10**6], timeout_s=30))
            client.end()

    thread = threading.Thread(target=produce)
    thread.start()
    result = execute(p, "local")
    thread.join()
    assert result.outputs["applied_updates"] == 600
    [answer] = answers
    assert answer["ok"]
    assert answer["live"] == [True, True, False]
    assert np.asarray(answer["embeddings"]).shape == (3, 5)
    oracle = Oracle(graph, x)
    for batch in batches:
        oracle.apply(batch)
    nodes, expected = oracle.embeddings(model)
    np.testing.assert_allclose(
        np.load(tmp_path / "emb.npy")[nodes], expected, atol=1e-6
    )


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
def test_strata_ingest_sends_a_file(served, tmp_path, suffix, capsys) -> None:
    graph = rmat_graph(scale=5)
    batches = list(UpdateStream(graph, feature_dim=2, seed=1).batches(250, 250))
    path = write_update_file(batches, tmp_path / f"updates.{suffix}")
    parser = argparse.ArgumentParser()
    command = IngestCommand()
    command.configure(parser)
    args = parser.parse_args([served.server.endpoint, str(path), "--batch-rows", "40"])
    assert command.run(args) == 0
    out = capsys.readouterr().out
    assert "7 newly logged (250 rows, offsets 0..249)" in out
    assert command.run(args) == 0  # again: every batch is a duplicate
    assert "0 newly logged (0 rows, offsets -1..-1), 7 already held" in (
        capsys.readouterr().out
    )


def test_send_all_logs_its_progress(served, caplog) -> None:
    batches = [edge_updates([i], [i + 1], event_time=i) for i in range(5)]
    with (
        caplog.at_level("INFO", logger="strata.ingest"),
        IngestClient(served.server.endpoint, "progress") as client,
    ):
        client.send_all(batches)
    final = caplog.records[-1]
    assert final.progress.done  # type: ignore[attr-defined]
    assert (final.progress.n, final.progress.total) == (5, 5)  # type: ignore[attr-defined]
    assert "5 batches in the log" in final.getMessage()
