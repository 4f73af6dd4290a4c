"""IngestClient: send update batches to an ingestion endpoint until each is acked.

A DEALER socket speaking the protocol of :mod:`strata.operators.streaming.ingest`. Batch
``i`` of a stream gets ``seq = first_seq + i``. :meth:`IngestClient.send_all` first
asks the endpoint which of the producer's seqs its log holds (``hello``) and skips
those, so running the same stream again after a crash (same producer id) resumes
where the log ends. It then keeps up to ``window`` batches in flight and resends, in
seq order, every batch not acknowledged within ``timeout_s`` (the endpoint may be
restarting: the socket reconnects by itself) and every batch from the seq a ``gap``
answer names on. It backs off on ``retry`` answers (a full log) and gives up with
:class:`IngestTimeoutError`, naming the endpoint, when nothing at all has been heard
from the endpoint for ``ack_timeout_s``.

Examples:
    >>> import tempfile
    >>> from strata.storage import UpdateLog, edge_updates
    >>> from strata.operators.streaming.ingest import IngestServer
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
    >>> with IngestClient(server.endpoint, producer_id="doc") as client:
    ...     again = client.send_all([edge_updates([0], [1], event_time=0)] * 4)
    >>> again.held_batches, again.acked_batches  # the log held seqs 1-3 already
    (3, 1)
    >>> stop.set(); thread.join(); server.close(); log.close()
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa
import zmq

from strata.engine.progress import progress_extra

_log = logging.getLogger("strata.ingest")


def query_embeddings(
    endpoint: str, nodes: list[int], *, timeout_s: float = 5.0
) -> dict[str, Any]:
    """Ask a running job's sink for the current embeddings of ``nodes``.

    The job's :class:`~strata.operators.streaming.sinks.EmbeddingSink` must have a
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


class IngestError(RuntimeError):
    """The endpoint's answers show that acknowledged data was lost.

    Attributes:
        report: What :meth:`IngestClient.send_all` had acknowledged when it gave
            up (None outside ``send_all``).
    """

    report: IngestReport | None = None


class IngestTimeoutError(IngestError, TimeoutError):
    """The endpoint did not answer within the client's deadline."""


@dataclass(slots=True)
class IngestReport:
    """What a :meth:`IngestClient.send_all` call got acknowledged.

    Every batch of the stream ends up in exactly one of: ``acked_batches``
    (logged by this call), ``duplicate_batches`` (the log already held it: sent
    and answered "duplicate", or skipped because ``hello`` said the log holds it,
    counted again in ``held_batches``), or ``rejected`` (refused; not resent).

    Attributes:
        batches: Batches in the stream (each counted once, however often resent).
        acked_batches: Batches newly logged.
        acked_rows: Rows newly logged.
        duplicate_batches: Batches the log already held.
        duplicate_rows: Their rows.
        held_batches: Of the duplicates, those not sent at all (``hello``).
        rejected: ``seq -> reason`` of refused batches (not resent).
        resends: Requests sent again (timeout, gap, or ``retry`` answer).
        gaps: ``gap`` answers (a batch overtook an earlier one).
        full: ``retry`` answers (the log was full: backpressure).
        first_offset: Lowest offset acknowledged (``-1``: none).
        last_offset: Highest offset acknowledged (``-1``: none).
        seconds: Wall time of the call.
    """

    batches: int = 0
    acked_batches: int = 0
    acked_rows: int = 0
    duplicate_batches: int = 0
    duplicate_rows: int = 0
    held_batches: int = 0
    rejected: dict[int, str] = field(default_factory=dict)
    resends: int = 0
    gaps: int = 0
    full: int = 0
    first_offset: int = -1
    last_offset: int = -1
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        """Whether every batch is in the log (logged now or held before)."""
        return not self.rejected and (
            self.acked_batches + self.duplicate_batches == self.batches
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        out = asdict(self)
        out["rejected"] = {str(k): v for k, v in self.rejected.items()}
        out["complete"] = self.complete
        return out


@dataclass(slots=True)
class _InFlight:
    payload: bytes
    rows: int
    sent_at: float
    not_before: float = 0.0


@dataclass(frozen=True, slots=True)
class Held:
    """What the endpoint's log holds of a producer (its ``hello`` answer)."""

    high_water: int | None
    first_seq: int | None

    def holds(self, seq: int) -> bool:
        """Whether the log holds (or held, before retention) ``seq``."""
        if self.high_water is None or self.first_seq is None:
            return False
        return self.first_seq <= seq <= self.high_water


class IngestClient:
    """One producer's connection to an ingestion endpoint.

    Args:
        endpoint: The endpoint (``tcp://127.0.0.1:5555``).
        producer_id: This producer's id (its ``seq`` numbers are its own).

    Raises:
        ValueError: for an endpoint zmq cannot connect to (named in the message).
    """

    def __init__(self, endpoint: str, producer_id: str) -> None:
        if not producer_id or len(producer_id) > 256:
            raise ValueError(
                f"producer id: expected 1-256 characters, got {producer_id!r}"
            )
        self.endpoint = endpoint
        self.producer_id = producer_id
        self.socket: zmq.Socket[Any] = zmq.Context.instance().socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        try:
            self.socket.connect(endpoint)
        except zmq.ZMQError as exc:
            self.socket.close(linger=0)
            raise ValueError(
                f"endpoint: expected transport://address:port "
                f"(e.g. tcp://127.0.0.1:5555), got {endpoint!r} ({exc})"
            ) from None

    # ------------------------------------------------------------------ raw
    def submit(
        self, batch: pa.RecordBatch | bytes, seq: int, *, first_seq: int = 1
    ) -> None:
        """Send one batch (or its encoded bytes) as ``seq``; do not wait."""
        payload = batch if isinstance(batch, bytes) else encode_batch(batch)
        header = {"producer": self.producer_id, "seq": seq, "first_seq": first_seq}
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
        """Send a control request (``ping``, ``hello``, ``end``) and await its reply.

        The request is sent again every second until answered (a restarting
        endpoint drops what it had not read).

        Raises:
            IngestTimeoutError: if no reply came within ``timeout_s``.
        """
        kind = header.get("type")
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            self.socket.send_multipart([json.dumps(header).encode()])
            resend_at = time.monotonic() + min(1.0, left)
            while (wait := resend_at - time.monotonic()) > 0:
                reply = self.receive(int(wait * 1000) + 1)
                if reply is not None and reply.get("type") in (kind, "pong"):
                    return reply
        raise IngestTimeoutError(
            f"endpoint {self.endpoint}: no answer to {kind!r} within {timeout_s} s "
            "(is the job running and serving this endpoint?)"
        )

    def hello(self, timeout_s: float = 10.0) -> Held:
        """Ask which of this producer's seqs the endpoint's log holds."""
        reply = self.request({"type": "hello", "producer": self.producer_id}, timeout_s)
        high, first = reply.get("high_water"), reply.get("first_seq")
        return Held(
            high if isinstance(high, int) else None,
            first if isinstance(first, int) else None,
        )

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
        ack_timeout_s: float = 10.0,
        deadline_s: float | None = None,
        rate_rows_per_s: float | None = None,
        on_ack: Callable[[dict[str, Any]], None] | None = None,
    ) -> IngestReport:
        """Send every batch until the log holds it; return the report.

        Args:
            batches: The batches, in order (read lazily).
            first_seq: ``seq`` of the first batch.
            window: Batches in flight at once (at least 1).
            timeout_s: Resend unacknowledged batches this long after sending.
            ack_timeout_s: Give up (:class:`IngestTimeoutError`) when the endpoint
                has not answered anything for this long: at the ``hello``, or
                while batches wait for acknowledgement.
            deadline_s: Give up (:class:`IngestTimeoutError`) after this long in
                all; None for no limit.
            rate_rows_per_s: Send at most this many rows per second (a steady
                load, as producer load tools do); None for as fast as acked.
            on_ack: Called with every acknowledgement (progress, tests).

        Raises:
            ValueError: for a window below 1, or a rate or timeout that is not
                positive.
            IngestTimeoutError: as above; what was acknowledged stays logged, and
                running the stream again with the same producer id resumes.
        """
        _check_positive("window", window)
        _check_positive("first_seq + 1", first_seq + 1)
        _check_positive("timeout_s", timeout_s)
        _check_positive("ack_timeout_s", ack_timeout_s)
        if rate_rows_per_s is not None:
            _check_positive("rate_rows_per_s", rate_rows_per_s)
        return _Sender(
            self,
            first_seq=first_seq,
            window=window,
            timeout_s=timeout_s,
            ack_timeout_s=ack_timeout_s,
            deadline_s=deadline_s,
            rate=rate_rows_per_s,
            on_ack=on_ack,
        ).run(batches)

    def close(self) -> None:
        """Close the socket."""
        self.socket.close(linger=0)

    def __enter__(self) -> IngestClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_positive(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name}: expected a value > 0, got {value!r}")


class _Sender:
    """One :meth:`IngestClient.send_all` call: the window, resends and pacing."""

    def __init__(
        self,
        client: IngestClient,
        *,
        first_seq: int,
        window: int,
        timeout_s: float,
        ack_timeout_s: float,
        deadline_s: float | None,
        rate: float | None,
        on_ack: Callable[[dict[str, Any]], None] | None,
    ) -> None:
        self.client = client
        self.first_seq = first_seq
        self.window = window
        self.timeout_s = timeout_s
        self.ack_timeout_s = ack_timeout_s
        self.deadline_s = deadline_s
        self.rate = rate
        self.on_ack = on_ack
        self.report = IngestReport()
        self.flight: dict[int, _InFlight] = {}  # seq order: inserted increasing
        self.start = time.monotonic()
        self.heard = self.start  # last time anything came from the endpoint
        self.progress = self.start  # last time a batch was acknowledged
        self.stale_gap: int | None = None  # a gap naming an acknowledged seq
        self.sent_rows = 0
        self.logged_at = self.start

    def run(self, batches: Iterable[pa.RecordBatch]) -> IngestReport:
        try:
            return self._run(batches)
        except IngestError as exc:  # say what was acknowledged before giving up
            self.report.seconds = time.monotonic() - self.start
            exc.report = self.report
            raise

    def _run(self, batches: Iterable[pa.RecordBatch]) -> IngestReport:
        held = self.client.hello(self.ack_timeout_s)
        self.heard = time.monotonic()
        source = iter(batches)
        seq = self.first_seq
        exhausted = False
        while self.flight or not exhausted:
            while not exhausted and len(self.flight) < self.window:
                if self._pace():
                    break  # not yet: the rate limit holds the next batch back
                batch = next(source, None)
                if batch is None:
                    exhausted = True
                    break
                self.report.batches += 1
                if held.holds(seq):  # logged by an earlier run: skip it
                    self.report.duplicate_batches += 1
                    self.report.duplicate_rows += batch.num_rows
                    self.report.held_batches += 1
                else:
                    payload = encode_batch(batch)
                    self.client.submit(payload, seq, first_seq=self.first_seq)
                    now = time.monotonic()
                    self.flight[seq] = _InFlight(payload, batch.num_rows, now)
                    self.sent_rows += batch.num_rows
                seq += 1
            reply = self.client.receive(self._wait_ms(exhausted))
            while reply is not None:
                self.heard = time.monotonic()
                self._settle(reply)
                reply = self.client.receive(0)
            self._check_time()
            self._resend()
            self._progress(exhausted)
        self.report.seconds = time.monotonic() - self.start
        self._progress(exhausted, final=True)
        return self.report

    def _progress(self, exhausted: bool, *, final: bool = False) -> None:
        """Log the batches the log holds, at most once a second (a bar on a TTY)."""
        now = time.monotonic()
        if not final and now - self.logged_at < 1.0:
            return
        self.logged_at = now
        report = self.report
        held = report.acked_batches + report.duplicate_batches
        total = report.batches if exhausted else None
        extra = progress_extra(
            f"ingest {self.client.producer_id}",
            held,
            total,
            unit="batch",
            values={"rows": f"{report.acked_rows:,}", "resends": str(report.resends)},
            done=final,
        )
        _log.info(
            "ingest %s: %d batches in the log, %s rows new, %d resends",
            self.client.endpoint,
            held,
            f"{report.acked_rows:,}",
            report.resends,
            extra=extra,
        )

    def _wait_ms(self, exhausted: bool) -> int:
        """How long to wait for replies before looking at the window again."""
        if self.flight or exhausted or self.rate is None:
            return 20 if self.flight else 0
        due = self.start + self.sent_rows / self.rate
        return max(0, min(20, int((due - time.monotonic()) * 1000)))

    def _pace(self) -> bool:
        """Whether the rate limit holds the next batch back for now."""
        if self.rate is None:
            return False
        due = self.start + self.sent_rows / self.rate
        return time.monotonic() < due

    def _check_time(self) -> None:
        now = time.monotonic()
        endpoint = self.client.endpoint
        stuck = now - self.progress > self.ack_timeout_s
        if self.flight and stuck and self.stale_gap is not None:
            raise IngestError(
                f"endpoint {endpoint}: its log expects seq {self.stale_gap} of "
                f"producer {self.client.producer_id!r}, which it acknowledged "
                "before: the log lost acknowledged data (was it deleted?)"
            )
        if self.flight and now - self.heard > self.ack_timeout_s:
            seqs = list(self.flight)
            raise IngestTimeoutError(
                f"endpoint {endpoint}: no answer for {self.ack_timeout_s} s with "
                f"{len(seqs)} batches unacknowledged (seqs {seqs[0]}..{seqs[-1]}); "
                "run the same stream again with the same producer id to resume"
            )
        if self.deadline_s is not None and now - self.start > self.deadline_s:
            raise IngestTimeoutError(
                f"endpoint {endpoint}: {len(self.flight)} batches unacknowledged "
                f"after the {self.deadline_s} s deadline"
            )

    def _resend(self) -> None:
        """Resend due batches in seq order, never one past a batch backing off."""
        now = time.monotonic()
        for seq, item in self.flight.items():
            if now - item.sent_at < self.timeout_s:
                continue
            if now < item.not_before:
                break  # a later seq now would only come back as a gap
            self.client.submit(item.payload, seq, first_seq=self.first_seq)
            item.sent_at = now
            self.report.resends += 1

    def _settle(self, reply: dict[str, Any]) -> None:
        seq = reply.get("seq")
        if not isinstance(seq, int) or seq not in self.flight:
            return  # a late answer to a resent batch, or a control reply
        item = self.flight[seq]
        report = self.report
        if reply.get("ok"):
            del self.flight[seq]
            self.progress = time.monotonic()
            self.stale_gap = None
            rows = item.rows
            if reply.get("duplicate"):
                report.duplicate_batches += 1
                report.duplicate_rows += rows
            else:
                report.acked_batches += 1
                report.acked_rows += rows
            self._offsets(int(reply["first_offset"]), int(reply["last_offset"]))
            if self.on_ack is not None:
                self.on_ack(reply)
        elif reply.get("gap"):
            self._rewind(int(reply["expected"]))
        elif reply.get("retry"):  # a full log: back off, then resend in order
            report.full += 1
            item.not_before = time.monotonic() + 0.2
            item.sent_at = 0.0
        else:
            del self.flight[seq]
            report.rejected[seq] = str(reply.get("error"))

    def _rewind(self, expected: int) -> None:
        """The log expects ``expected`` next: resend it and everything after it.

        A gap answer can be stale: it may arrive after the acknowledgement of
        ``expected`` (answers overtake each other across reconnects). Only when
        stale gaps keep coming without any progress for ``ack_timeout_s`` does
        the log really miss an acknowledged batch (see :meth:`_check_time`).
        """
        self.report.gaps += 1
        if expected not in self.flight:
            self.stale_gap = expected
            return
        for seq, item in self.flight.items():
            if seq >= expected:
                item.sent_at = 0.0  # due now; _resend keeps seq order

    def _offsets(self, first: int, last: int) -> None:
        if first < 0:
            return  # held, then deleted by retention: no offsets to report
        report = self.report
        report.first_offset = (
            first if report.first_offset < 0 else min(report.first_offset, first)
        )
        report.last_offset = max(report.last_offset, last)
