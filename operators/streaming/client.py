"""IngestClient: send update batches to an ingestion endpoint until each is acked.

A DEALER socket speaking the protocol of :mod:`operators.streaming.ingest`. Batch
``i`` of a stream gets ``seq = first_seq + i``, so resending a whole file after a
crash (with the same producer id) is idempotent: batches already logged come back
as duplicates with their original offsets. :meth:`IngestClient.send_all` keeps up to
``window`` batches in flight, resends any not acknowledged within ``timeout_s``
(the endpoint may be restarting: the socket reconnects by itself), backs off on
``retry`` answers (a full log), and reports what was acknowledged.

Examples:
    >>> import tempfile
    >>> from storage import UpdateLog, edge_updates
    >>> from operators.streaming.ingest import IngestServer
    >>> import threading
    >>> log = UpdateLog(tempfile.mkdtemp() + "/log")
    >>> server = IngestServer(log, "tcp://127.0.0.1:*")
    >>> stop = threading.Event()
    >>> def serve():
    ...     while not stop.is_set():
    ...         server.serve_once(20)
    >>> thread = threading.Thread(target=serve); thread.start()
    >>> with IngestClient(server.endpoint, producer_id="doc") as client:
    ...     report = client.send_all([edge_updates([0], [1], event_time=0)] * 3)
    >>> report.acked_rows, report.duplicate_batches, report.rejected
    (3, 0, {})
    >>> stop.set(); thread.join(); server.close(); log.close()
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa
import zmq


def query_embeddings(
    endpoint: str, nodes: list[int], *, timeout_s: float = 5.0
) -> dict[str, Any]:
    """Ask a running job's sink for the current embeddings of ``nodes``.

    The job's :class:`~operators.streaming.sinks.EmbeddingSink` must have a
    ``query_endpoint``; this connects there.

    Returns:
        ``{"ok", "nodes", "live", "embeddings", "watermark", "applied_updates"}``.

    Raises:
        TimeoutError: if the sink did not answer within ``timeout_s`` (it answers
            between items; a live source sends a tick at least every 100 ms).
    """
    socket: zmq.Socket[Any] = zmq.Context.instance().socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    try:
        socket.connect(endpoint)
        socket.send(json.dumps({"nodes": [int(n) for n in nodes]}).encode())
        if not socket.poll(int(timeout_s * 1000)):
            raise TimeoutError(f"no answer from {endpoint} within {timeout_s} s")
        reply: dict[str, Any] = json.loads(socket.recv())
        return reply
    finally:
        socket.close(linger=0)


def encode_batch(batch: pa.RecordBatch | pa.Table) -> bytes:
    """An update batch as an Arrow IPC stream (the request's second frame)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write(batch)
    data: bytes = sink.getvalue().to_pybytes()
    return data


@dataclass(slots=True)
class IngestReport:
    """What a :meth:`IngestClient.send_all` call got acknowledged.

    Attributes:
        batches: Batches sent (each counted once, however often resent).
        acked_batches: Batches newly logged.
        acked_rows: Rows newly logged.
        duplicate_batches: Batches the log already held (resends).
        duplicate_rows: Their rows.
        rejected: ``seq -> reason`` of refused batches (not resent).
        resends: Requests sent again after a timeout or a ``retry`` answer.
        first_offset: Lowest offset acknowledged (``-1``: none).
        last_offset: Highest offset acknowledged (``-1``: none).
        seconds: Wall time of the call.
    """

    batches: int = 0
    acked_batches: int = 0
    acked_rows: int = 0
    duplicate_batches: int = 0
    duplicate_rows: int = 0
    rejected: dict[int, str] = field(default_factory=dict)
    resends: int = 0
    first_offset: int = -1
    last_offset: int = -1
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        out = asdict(self)
        out["rejected"] = {str(k): v for k, v in self.rejected.items()}
        return out


@dataclass(slots=True)
class _InFlight:
    payload: bytes
    rows: int
    sent_at: float
    not_before: float = 0.0


class IngestClient:
    """One producer's connection to an ingestion endpoint.

    Args:
        endpoint: The endpoint (``tcp://127.0.0.1:5555``).
        producer_id: This producer's id (its ``seq`` numbers are its own).
    """

    def __init__(self, endpoint: str, producer_id: str) -> None:
        self.endpoint = endpoint
        self.producer_id = producer_id
        self.socket: zmq.Socket[Any] = zmq.Context.instance().socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.connect(endpoint)

    # ------------------------------------------------------------------ raw
    def submit(self, batch: pa.RecordBatch | bytes, seq: int) -> None:
        """Send one batch (or its encoded bytes) as ``seq``; do not wait."""
        payload = batch if isinstance(batch, bytes) else encode_batch(batch)
        header = {"producer": self.producer_id, "seq": seq}
        self.socket.send_multipart([json.dumps(header).encode(), payload])

    def send_frames(self, frames: list[bytes]) -> None:
        """Send raw frames (tests use this to send malformed requests)."""
        self.socket.send_multipart(frames)

    def receive(self, timeout_ms: int) -> dict[str, Any] | None:
        """The next reply, or None after ``timeout_ms``."""
        if not self.socket.poll(timeout_ms):
            return None
        reply: dict[str, Any] = json.loads(self.socket.recv())
        return reply

    def request(self, header: dict[str, Any], timeout_s: float = 5.0) -> dict[str, Any]:
        """Send a control request (``ping``, ``end``) and wait for its reply.

        Raises:
            TimeoutError: if no reply came within ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        self.socket.send_multipart([json.dumps(header).encode()])
        while (left := deadline - time.monotonic()) > 0:
            reply = self.receive(int(left * 1000) + 1)
            if reply is not None and reply.get("type") in ("pong", "end"):
                return reply
        raise TimeoutError(f"no reply from {self.endpoint} within {timeout_s} s")

    def end(self, timeout_s: float = 5.0) -> dict[str, Any]:
        """Tell the endpoint this producer is done."""
        return self.request({"type": "end", "producer": self.producer_id}, timeout_s)

    # ------------------------------------------------------------------ streams
    def send_all(
        self,
        batches: Iterable[pa.RecordBatch],
        *,
        first_seq: int = 1,
        window: int = 8,
        timeout_s: float = 2.0,
        deadline_s: float | None = None,
        on_ack: Callable[[dict[str, Any]], None] | None = None,
    ) -> IngestReport:
        """Send every batch until acknowledged; return the report.

        Args:
            batches: The batches, in order (read lazily).
            first_seq: ``seq`` of the first batch.
            window: Batches in flight at once.
            timeout_s: Resend a batch not acknowledged this long after sending.
            deadline_s: Give up (``TimeoutError``) after this long.
            on_ack: Called with every acknowledgement (progress, tests).
        """
        report = IngestReport()
        start = time.monotonic()
        source = iter(batches)
        flight: dict[int, _InFlight] = {}
        seq = first_seq
        exhausted = False
        while flight or not exhausted:
            while not exhausted and len(flight) < window:
                batch = next(source, None)
                if batch is None:
                    exhausted = True
                    break
                payload = encode_batch(batch)
                self.submit(payload, seq)
                flight[seq] = _InFlight(payload, batch.num_rows, time.monotonic())
                report.batches += 1
                seq += 1
            reply = self.receive(50)
            if reply is not None:
                self._settle(reply, flight, report, on_ack)
            now = time.monotonic()
            if deadline_s is not None and now - start > deadline_s:
                raise TimeoutError(
                    f"{len(flight)} batches unacknowledged after {deadline_s} s"
                )
            for s, item in flight.items():  # resend what timed out or may be retried
                if now - item.sent_at >= timeout_s and now >= item.not_before:
                    self.submit(item.payload, s)
                    item.sent_at = now
                    report.resends += 1
        report.seconds = time.monotonic() - start
        return report

    def _settle(
        self,
        reply: dict[str, Any],
        flight: dict[int, _InFlight],
        report: IngestReport,
        on_ack: Callable[[dict[str, Any]], None] | None,
    ) -> None:
        seq = reply.get("seq")
        if not isinstance(seq, int) or seq not in flight:
            return  # a late answer to a resent batch, or a control reply
        item = flight[seq]
        if reply.get("ok"):
            del flight[seq]
            if reply.get("duplicate"):
                report.duplicate_batches += 1
                report.duplicate_rows += item.rows
            else:
                report.acked_batches += 1
                report.acked_rows += item.rows
            first, last = int(reply["first_offset"]), int(reply["last_offset"])
            if first >= 0:
                low = (
                    first
                    if report.first_offset < 0
                    else min(report.first_offset, first)
                )
                report.first_offset = low
                report.last_offset = max(report.last_offset, last)
            if on_ack is not None:
                on_ack(reply)
        elif reply.get("retry"):  # a full log: back off, then resend
            item.not_before = time.monotonic() + 0.2
            item.sent_at = 0.0
        else:
            del flight[seq]
            report.rejected[seq] = str(reply.get("error"))

    def close(self) -> None:
        """Close the socket."""
        self.socket.close(linger=0)

    def __enter__(self) -> IngestClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
