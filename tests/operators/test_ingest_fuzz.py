"""A live ingest endpoint under a barrage of garbage: all refused, nothing logged.

The catalogue (:func:`catalogue`) holds malformed headers (random ones, wrong types,
seqs past the log's int64), wrong frame counts, oversized headers and payloads,
broken Arrow (random, truncated, bit-flipped, a declared length of 2 GiB, a zstd
body claiming a terabyte), valid Arrow that fails validation (wrong schema, node
ids out of range, NaN features) and a valid batch sent out of seq order. A bad
payload under a new producer's first seq is refused with its reason, and the log
records the refusal in that seq's place (no rows); bit flips go under producer
``fuzz`` with ``seq >= 2`` from ``first_seq=1``, so even one that happens to decode
to a valid batch is refused (a gap), and the log only ever holds the valid
producer's rows.
"""

from __future__ import annotations

import itertools
import json
import random
import struct
import threading
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pytest

from strata.engine import execute
from strata.jobs import stream_ingest
from strata.operators.streaming import UpdateStream
from strata.operators.streaming.client import IngestClient, encode_batch
from strata.operators.streaming.protocol import (
    MAX_HEADER_BYTES,
    ProtocolError,
    parse_request,
)
from strata.operators.streaming.update_files import write_update_file
from strata.storage import UpdateLog, edge_updates, make_updates
from tests.jobs.test_stream_ingest import GRAPH, SMALL, stream_job
from tests.operators.streaming_helpers import free_endpoint
from tests.operators.test_streaming_ingest import served  # noqa: F401 (fixture)

SENDERS = 20  # connections sending garbage at once


@dataclass(frozen=True, slots=True)
class Garbage:
    """One bad request: its frames and the reject reason it must get (None: any)."""

    name: str
    frames: list[bytes]
    reason: str | None

    @property
    def size(self) -> int:
        return sum(len(f) for f in self.frames)


def header(**fields: object) -> bytes:
    return json.dumps(fields).encode()


def fuzz_header(seq: int = 2) -> bytes:
    """A valid batch header whose batch the log refuses (a gap), whatever it holds."""
    return header(producer="fuzz", seq=seq, first_seq=1)


_PAYLOAD_PRODUCERS = itertools.count()


def payload_header() -> bytes:
    """The first batch of a new producer: its payload decides the answer.

    A bad payload is refused with its reason, and the refusal takes seq 1's place
    in that producer's order (resends of it are refused again, with the reason).
    """
    return header(producer=f"payload-{next(_PAYLOAD_PRODUCERS)}", seq=1, first_seq=1)


def _zstd_bomb() -> bytes:
    """A zstd-compressed IPC stream whose buffers claim 1 TiB uncompressed."""
    batch = edge_updates(np.arange(100), np.arange(100), event_time=0)
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.ipc.new_stream(sink, batch.schema, options=options) as writer:
        writer.write(batch)
    data = bytearray(sink.getvalue().to_pybytes())
    # each compressed buffer starts with its int64 uncompressed length: 800 here
    for at in range(len(data) - 8):
        if struct.unpack_from("<q", data, at)[0] == 800:
            struct.pack_into("<q", data, at, 1 << 40)
    return bytes(data)


def catalogue(max_frame_bytes: int, seed: int = 0) -> list[Garbage]:
    """Every kind of bad request, against an endpoint with ``max_frame_bytes``."""
    rng = random.Random(seed)
    valid = encode_batch(
        make_updates(
            [0, 3, 1],
            src=[1, 0, 1],
            dst=[2, 0, 2],
            node=[0, 4, 0],
            feature=np.ones((3, 8), np.float32),
            event_time=0,
        )
    )
    out = [
        # frame counts
        Garbage("no header", [b""], "header"),
        Garbage("two empty frames", [b"", b""], "header"),
        Garbage("batch without payload", [fuzz_header()], "frames"),
        Garbage("three frames", [fuzz_header(), valid, valid], "frames"),
        Garbage("five frames", [b"{}"] * 5, "frames"),
        Garbage("ping with payload", [header(type="ping"), b"x"], "frames"),
        Garbage("end with payload", [header(type="end", producer="f"), b""], "frames"),
        # headers
        Garbage("header not json", [b"\xff\xfe", valid], "header"),
        Garbage("header a list", [b"[1, 2]", valid], "header"),
        Garbage(
            "header nested 2000 deep", [b"[" * 2000 + b"]" * 2000, valid], "header"
        ),
        Garbage("header NaN seq", [b'{"producer": "f", "seq": NaN}', valid], "header"),
        Garbage("unknown type", [header(type="upload", producer="f")], "header"),
        Garbage("unknown field", [header(producer="f", seq=2, len=9), valid], "header"),
        Garbage("no producer", [header(seq=2), valid], "header"),
        Garbage("producer a list", [header(producer=["f"], seq=2), valid], "header"),
        Garbage(
            "producer too long", [header(producer="f" * 257, seq=2), valid], "header"
        ),
        Garbage(
            "producer lone surrogate",
            [b'{"producer": "\\ud800", "seq": 2}', valid],
            "header",
        ),
        Garbage("hello without producer", [header(type="hello")], "header"),
        Garbage(
            "oversized header",
            [header(producer="f", seq=2, pad="x" * MAX_HEADER_BYTES), valid],
            "size",
        ),
        # seqs: past the log's int64, of the wrong type, out of order
        *(
            Garbage(
                f"seq {value!r}", [header(producer="f", seq=value), valid], "header"
            )
            for value in (2**63, 2**64, -1, 1e30, "1", True, None, 2.0, [2])
        ),
        Garbage(
            "first_seq 2**63",
            [header(producer="f", seq=2, first_seq=2**63), valid],
            "header",
        ),
        Garbage(
            "first_seq after seq",
            [header(producer="f", seq=2, first_seq=3), valid],
            "header",
        ),
        Garbage("valid batch out of order", [fuzz_header(7), valid], "gap"),
        # payload sizes
        Garbage("empty payload", [payload_header(), b""], "arrow"),
        Garbage(
            "oversized payload",
            [payload_header(), b"\0" * (max_frame_bytes + 1)],
            "size",
        ),
        Garbage(
            "arrow message of 2 GiB",
            [payload_header(), b"\xff\xff\xff\xff\xff\xff\xff\x7f" + valid[8:200]],
            "arrow",
        ),
        Garbage("zstd bomb", [payload_header(), _zstd_bomb()], "arrow"),
        # broken Arrow
        Garbage("not arrow", [payload_header(), b"garbage" * 10], "arrow"),
        Garbage("truncated arrow", [fuzz_header(), valid[:-20]], "gap"),
        Garbage("arrow header only", [fuzz_header(), valid[:100]], "gap"),
        # valid Arrow, invalid updates
        Garbage(
            "wrong schema",
            [payload_header(), encode_batch(pa.record_batch({"a": [1, 2]}))],
            "invalid",
        ),
        Garbage(
            "negative node id",
            [payload_header(), encode_batch(edge_updates([-1], [0], event_time=0))],
            "invalid",
        ),
        Garbage(
            "node id past 2**31",
            [payload_header(), encode_batch(edge_updates([0], [2**31], event_time=0))],
            "invalid",
        ),
        Garbage(
            "nan feature",
            [
                payload_header(),
                encode_batch(
                    make_updates(
                        [3], node=[0], feature=np.full((1, 8), np.nan), event_time=0
                    )
                ),
            ],
            "invalid",
        ),
    ]
    for i in range(12):  # bit flips, out of order: a gap whatever they decode to
        payload = bytearray(valid)
        for _ in range(rng.randint(1, 6)):
            payload[rng.randrange(len(payload))] ^= rng.randint(1, 255)
        out.append(Garbage(f"bit flips {i}", [fuzz_header(), bytes(payload)], "gap"))
    values: list[object] = [None, True, -1, 0, 2, 2**63, 2**64, 1e30, "1", "", [], {}]
    values += ["batch", "hello", "end", "ping", "f" * 300, "ünï"]
    keys = ["type", "producer", "seq", "first_seq", "junk"]
    while len(out) < 120:  # random headers and frames the protocol refuses
        if rng.random() < 0.7:
            fields = {
                k: rng.choice(values) for k in rng.sample(keys, rng.randint(0, 5))
            }
            first = json.dumps(fields).encode()
        else:
            first = rng.randbytes(rng.randint(0, 40))
        frames = [first] + [rng.randbytes(rng.randint(0, 300))] * rng.randint(0, 3)
        try:
            parse_request(frames)
        except ProtocolError:
            out.append(Garbage(f"random {len(out)}", frames, None))
    return out


def send_and_check(client: IngestClient, garbage: list[Garbage]) -> Counter[str]:
    """Send every request at once, then check each got a reject; count reasons."""
    for item in garbage:
        client.send_frames(item.frames)
    reasons: Counter[str] = Counter()
    for _ in garbage:
        reply = client.receive(10_000)
        assert reply is not None, (
            f"{client.producer_id}: the endpoint stopped answering"
        )
        assert reply["ok"] is False, reply
        assert isinstance(reply["error"], str)
        assert reply["error"]
        reasons[reply["error"].split(":")[0]] += 1
    return reasons


def barrage(endpoint: str, garbage: list[Garbage], max_bytes: int) -> Counter[str]:
    """Every catalogue entry once, checked one by one; then all of it from
    :data:`SENDERS` connections at once (entries under ``max_bytes``).

    Returns:
        The reject reasons of every request, by reason.
    """
    reasons: Counter[str] = Counter()
    with IngestClient(endpoint, "fuzz") as client:
        for item in garbage:
            client.send_frames(item.frames)
            reply = client.receive(10_000)
            assert reply is not None, f"no answer to {item.name!r}"
            assert reply["ok"] is False, (item.name, reply)
            reason = reply["error"].split(":")[0]
            assert item.reason in (None, reason), (item.name, reply)
            reasons[reason] += 1
    small = [g for g in garbage if g.size <= max_bytes]
    results: list[Counter[str]] = []
    errors: list[BaseException] = []

    def sender(i: int) -> None:
        order = random.Random(i).sample(small, len(small))
        try:
            with IngestClient(endpoint, f"fuzz-{i}") as client:
                results.append(send_and_check(client, order))
        except BaseException as exc:  # re-raised in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=sender, args=(i,)) for i in range(SENDERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert len(results) == SENDERS
    for result in results:
        reasons.update(result)
    return reasons


def test_garbage_barrage_then_valid_batches_are_all_logged(
    served,  # noqa: F811 (the fixture)
    tmp_path,
) -> None:
    server = served.server
    garbage = catalogue(server.max_frame_bytes)
    reasons = barrage(server.endpoint, garbage, max_bytes=1 << 14)
    counters = server.counters()
    assert "rejected_internal" not in counters, counters
    assert counters["rejected"] + counters["gaps"] == sum(reasons.values())
    for reason in ("frames", "header", "size", "arrow", "invalid"):
        assert counters[f"rejected_{reason}"] == reasons[reason] > 0
    assert counters["accepted_batches"] == 0
    # a message past the transport cap cuts its connection, no answer; the
    # endpoint serves the others, and that producer once it reconnects
    with IngestClient(server.endpoint, "huge") as huge:
        huge.send_frames([fuzz_header(), b"\0" * (4 * server.max_frame_bytes + 8192)])
        assert huge.receive(300) is None
        assert huge.request({"type": "ping"}, timeout_s=10)["ok"] is True
    assert server.counters()["rejected"] == counters["rejected"]
    batches = [edge_updates([i, i], [i + 1, 7], event_time=i) for i in range(30)]
    with IngestClient(server.endpoint, "valid") as client:
        report = client.send_all(batches, window=4, deadline_s=60)
    assert (report.acked_batches, report.acked_rows, report.rejected) == (30, 60, {})
    assert server.counters()["accepted_rows"] == 60
    assert server.log.high_water("valid") == 30
    assert server.log.high_water("fuzz") is None
    served.close()
    with UpdateLog(tmp_path / "log", readonly=True) as log:
        logged = pa.Table.from_batches([b for _, b in log.read(0)])
    assert logged.equals(pa.Table.from_batches(batches))


@pytest.mark.parametrize(
    "executor",
    [
        "local",
        pytest.param("process", marks=[pytest.mark.slow, pytest.mark.multiprocess]),
    ],
)
def test_the_job_survives_garbage_and_applies_only_the_valid_updates(
    tmp_path, executor
) -> None:
    """jobs/stream_ingest.py serving an endpoint: garbage first, then valid updates;
    the embeddings equal those of a run that only ever saw the valid updates."""
    setup = stream_ingest.TrainedSetup(GRAPH, "sage", 16, 2, 0, None, 1, 1)
    dataset, x = setup.features()
    stream = UpdateStream(dataset.graph, feature_dim=x.shape[1], new_nodes=0.2, seed=5)
    batches = list(stream.batches(600, 50))
    endpoint = free_endpoint()
    out = tmp_path / "emb.npy"
    job = stream_job(
        endpoint=endpoint,
        log_dir=str(tmp_path / "log"),
        max_updates=600,
        idle_timeout_s=60,  # a safety net: the run stops at max_updates
        embeddings_out=str(out),
        window="count:200",
        **SMALL,
    )
    sent: dict[str, object] = {}

    def produce() -> None:
        try:
            with IngestClient(endpoint, "valid") as client:  # the job trains first
                client.request({"type": "ping"}, timeout_s=120)
            sent["reasons"] = barrage(endpoint, catalogue(16 << 20), max_bytes=1 << 14)
            with IngestClient(endpoint, "valid") as client:
                sent["report"] = client.send_all(batches, window=4, deadline_s=120)
        except BaseException as exc:  # re-raised in the test's thread
            sent["error"] = exc

    producer = threading.Thread(target=produce)
    producer.start()
    result = execute(job, executor)
    producer.join(timeout=60)
    assert "error" not in sent, sent.get("error")
    report = sent["report"]
    assert (report.acked_rows, report.rejected) == (600, {})  # type: ignore[attr-defined]
    assert result.outputs["applied_updates"] == 600
    counters = result.report.steps["updates"].counters  # the endpoint's own
    reasons: Counter[str] = sent["reasons"]  # type: ignore[assignment]
    assert counters.get("rejected_internal", 0) == 0
    assert counters["rejected"] + counters["gaps"] == sum(reasons.values())
    assert counters["accepted_rows"] == 600
    clean = tmp_path / "clean.npy"  # the same updates, from a file: no endpoint
    execute(
        stream_job(
            updates_file=str(write_update_file(batches, tmp_path / "valid.parquet")),
            embeddings_out=str(clean),
            **SMALL,
        ),
        "local",
    )
    np.testing.assert_allclose(np.load(out), np.load(clean), rtol=0, atol=1e-12)


def test_a_failure_of_the_server_itself_is_answered_counted_and_logged(
    served,  # noqa: F811 (the fixture)
    monkeypatch,
    caplog,
) -> None:
    def broken(producer: str) -> int:
        raise RuntimeError(f"no high-water mark for {producer}")

    monkeypatch.setattr(served.server.log, "high_water", broken)
    with IngestClient(served.server.endpoint, "p") as client:
        client.send_frames([header(type="hello", producer="p")])
        reply = client.receive(5000)
        assert reply == {
            "ok": False,
            "seq": None,
            "error": "internal: RuntimeError: no high-water mark for p",
        }
        assert client.request({"type": "ping"})["ok"] is True  # still serving
    assert served.server.counters()["rejected_internal"] == 1
    assert "a request failed" in caplog.text


def test_a_batch_of_the_wrong_feature_width_is_refused_not_logged(tmp_path) -> None:
    endpoint = free_endpoint()
    job = stream_job(
        endpoint=endpoint,
        log_dir=str(tmp_path / "log"),
        max_updates=1,
        idle_timeout_s=10,
        **SMALL,
    )
    wrong = make_updates([3], node=[0], feature=np.ones((1, 3)), event_time=0)
    right = make_updates([3], node=[0], feature=np.ones((1, 8)), event_time=0)
    reports = []

    def produce() -> None:
        with IngestClient(endpoint, "width") as client:
            client.request({"type": "ping"}, timeout_s=120)
            reports.append(client.send_all([wrong, right], deadline_s=10))

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    result = execute(job, "local", check=False)
    producer.join(timeout=60)
    assert result.ok, result.error
    assert list(reports[0].rejected) == [1]
    assert result.outputs["applied_updates"] == 1
