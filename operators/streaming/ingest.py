"""Ingestion: a pyzmq endpoint that validates update batches, logs them, acks them.

**Protocol** (a ROUTER socket, bound to ``tcp://127.0.0.1:5555`` by default; clients use
DEALER sockets, see :class:`~strata.operators.streaming.client.IngestClient`). A request
is two frames:

1. a JSON header: ``{"producer": "<id>", "seq": <int>, "first_seq": <int>}``
   (``seq`` counts up by one per batch from the producer's ``first_seq``; a resend
   repeats it), or ``{"type": "hello", "producer": "<id>"}`` (answered with the
   producer's ``high_water`` and ``first_seq`` in the log, or nulls), or
   ``{"type": "end", "producer": "<id>"}`` when a producer is done, or
   ``{"type": "ping"}`` (see :mod:`strata.operators.streaming.protocol`);
2. an Arrow IPC stream holding the update batch, in the ``strata.storage.updates``
   schema
   (``kind`` int8, ``src``/``dst``/``node`` int64, optional ``feature``
   fixed-size list of float32, ``event_time`` int64 ms).

Each batch is checked (frame count and size, header, Arrow decoding, then
``validate_updates``: schema, kinds, id range, feature width, row and byte
limits), appended to the :class:`~strata.storage.UpdateLog` with its ``(producer, seq)``
(group commit: one fsync for every batch received together), and only then
acknowledged with one JSON frame ``{"ok": true, "seq", "first_offset",
"last_offset", "duplicate"}``.

Exactly once, whatever the order of arrival: the log takes a producer's batches in
seq order only. A batch at or below the producer's high-water mark is one the log
holds: it is acknowledged with its original offsets (``-1`` once retention deleted
it) and logged nothing (``duplicate: true``). A batch that arrives before an earlier
one (after a reconnect, a batch sent later can overtake resends) is not logged: the
answer ``{"ok": false, "gap": true, "expected": <seq>}`` tells the producer to send
from ``expected`` on, in order. So a producer may resend until acknowledged, every
batch enters the log exactly once, and "duplicate" is never said of a batch that
was lost. A bad frame gets ``{"ok": false, "seq", "error": "<reason>"}``, is counted
by reason, and the endpoint keeps serving; a full log (the quota, see
:class:`~strata.storage.LogConfig`) answers ``"retry": true``: backpressure.

:class:`IngestServer` is the endpoint itself (usable alone: benchmarks, tools);
:class:`ZmqIngest` is the source step that runs one and emits the logged batches.

Examples:
    >>> import tempfile, numpy as np
    >>> from strata.storage import UpdateLog, edge_updates
    >>> from strata.operators.streaming.client import IngestClient
    >>> log = UpdateLog(tempfile.mkdtemp() + "/log")
    >>> server = IngestServer(log, "tcp://127.0.0.1:*")
    >>> client = IngestClient(server.endpoint, producer_id="doc")
    >>> client.submit(edge_updates([0, 1], [1, 2], event_time=0), seq=1)
    >>> accepted = server.serve_once(timeout_ms=1000)
    >>> [(a.first_offset, a.batch.num_rows) for a in accepted]
    [(0, 2)]
    >>> client.receive(timeout_ms=1000)["first_offset"]
    0
    >>> client.close(); server.close(); log.close()
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import zmq

from strata.engine.operator import IDLE, Operator, StepContext
from strata.operators.streaming.items import TICK, UPDATES
from strata.operators.streaming.offsets import LogPosition
from strata.operators.streaming.protocol import (
    EndRequest,
    HelloRequest,
    PingRequest,
    ProtocolError,
    parse_request,
)
from strata.operators.streaming.setup import Setup
from strata.operators.streaming.windows import wall_ms
from strata.storage import (
    DEFAULT_MAX_LOG_BYTES,
    MAX_NODES,
    AppendResult,
    LogConfig,
    LogFullError,
    LogSeqGapError,
    StorageError,
    UpdateLimits,
    UpdateLog,
    validate_updates,
)

DEFAULT_ENDPOINT = "tcp://127.0.0.1:5555"
#: Node ids a streaming job accepts: up to this many times its starting graph's
#: nodes (at least a million more); larger ids are refused at the endpoint.
NODE_HEADROOM = 4
_logger = logging.getLogger("strata.ingest")


@dataclass(frozen=True, slots=True)
class Refused:
    """Why a well-addressed batch is refused: its payload is bad, its seq is fine.

    The refusal takes the seq's place in the producer's order (the log records
    it, :meth:`strata.storage.UpdateLog.refuse`), so the producer's next batches are
    logged, and a resend of it is refused again.
    """

    reason: str
    detail: str

    def __str__(self) -> str:
        return f"{self.reason}: {self.detail}"


#: A parsed batch waiting to be logged: (peer, seq, producer, batch, first_seq).
_Pending = tuple[bytes, int, str, "pa.RecordBatch | Refused", int]


@dataclass(frozen=True, slots=True)
class Accepted:
    """A batch appended to the log (new, not a resend)."""

    first_offset: int
    batch: pa.RecordBatch
    arrival_ms: int


class IngestServer:
    """The ingestion endpoint (see the module docstring).

    Args:
        log: The log to append to (the server writes; nobody else may).
        endpoint: Where to bind; ``tcp://127.0.0.1:*`` picks a free port
            (:attr:`endpoint` holds the real one).
        limits: What a batch must satisfy (``validate_updates``).
        max_frame_bytes: Larger payloads are refused before decoding; far larger
            messages are cut by the transport (``ZMQ_MAXMSGSIZE``), so memory
            stays bounded whatever a client sends.
        max_group: Most batches appended with one fsync.
    """

    def __init__(
        self,
        log: UpdateLog,
        endpoint: str = DEFAULT_ENDPOINT,
        *,
        limits: UpdateLimits | None = None,
        max_frame_bytes: int = 16 << 20,
        max_group: int = 64,
    ) -> None:
        self.log = log
        self.limits = limits or UpdateLimits()
        self.max_frame_bytes = max_frame_bytes
        self.max_group = max_group
        self.socket: zmq.Socket[Any] = zmq.Context.instance().socket(zmq.ROUTER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.RCVHWM, 256)
        self.socket.setsockopt(zmq.MAXMSGSIZE, 4 * max_frame_bytes + 4096)
        self.socket.bind(endpoint)
        self.endpoint: str = self.socket.getsockopt_string(zmq.LAST_ENDPOINT)
        self.accepted_batches = 0
        self.accepted_rows = 0
        self.duplicates = 0
        self.gaps = 0
        self.rejected: Counter[str] = Counter()
        self.requests = 0
        self.producers: set[str] = set()
        self.ended: set[str] = set()

    def serve_once(self, timeout_ms: int = 100) -> list[Accepted]:
        """Wait up to ``timeout_ms`` for requests; handle every one received.

        Returns:
            The new batches now in the log, in offset order (resends excluded).
        """
        if not self.socket.poll(timeout_ms):
            return []
        requests: list[list[Any]] = []
        while len(requests) < self.max_group:
            try:
                requests.append(self.socket.recv_multipart(zmq.NOBLOCK, copy=False))
            except zmq.Again:
                break
        self.requests += len(requests)
        arrival = wall_ms()
        replies: list[tuple[bytes, dict[str, Any]]] = []
        pending: list[_Pending] = []
        for frames in requests:
            peer = bytes(frames[0].buffer)
            parsed = self._parse(frames[1:])
            if isinstance(parsed, dict):
                replies.append((peer, parsed))
            else:
                pending.append((peer, *parsed))
        accepted = self._append(pending, replies, arrival)
        for peer, reply in replies:
            self._reply(peer, reply)
        return accepted

    def _reject(self, reason: str, seq: Any, detail: str) -> dict[str, Any]:
        self.rejected[reason] += 1
        return {"ok": False, "seq": seq, "error": f"{reason}: {detail}"}

    def _parse(
        self, frames: list[Any]
    ) -> dict[str, Any] | tuple[int, str, pa.RecordBatch | Refused, int]:
        """A ``(seq, producer, batch, first_seq)`` to log, or the reply to send now.

        Nothing raises, whatever the frames: a bad request is a reject (counted by
        its reason), and so is a failure of the server's own code while answering
        one (counted as ``internal`` and logged with its traceback).
        """
        seq: int | None = None
        try:
            request = parse_request(
                [f.buffer if isinstance(f, zmq.Frame) else f for f in frames]
            )
            if isinstance(request, PingRequest):
                return {"ok": True, "type": "pong", "next_offset": self.log.next_offset}
            if isinstance(request, HelloRequest):
                producer = request.producer
                self.producers.add(producer)  # it is expected to send "end"
                return {
                    "ok": True,
                    "type": "hello",
                    "producer": producer,
                    "high_water": self.log.high_water(producer),
                    "first_seq": self.log.first_seq(producer),
                }
            if isinstance(request, EndRequest):
                self.ended.add(request.producer)
                return {"ok": True, "type": "end", "producer": request.producer}
            seq = request.seq
            self.producers.add(request.producer)
            batch = self._decode(request.payload)
            return seq, request.producer, batch, request.first_seq
        except ProtocolError as exc:
            return self._reject(exc.reason, exc.seq, exc.detail)
        except Exception as exc:  # the server's own bug: counted, logged, answered
            _logger.exception("ingest endpoint %s: a request failed", self.endpoint)
            return self._reject("internal", seq, f"{type(exc).__name__}: {exc}"[:200])

    def _decode(self, payload: Any) -> pa.RecordBatch | Refused:
        """The update batch in ``payload``, or why it is refused."""
        size = memoryview(payload).nbytes
        if size > self.max_frame_bytes:
            return Refused("size", f"{size} bytes > limit {self.max_frame_bytes}")
        try:
            with pa.ipc.open_stream(pa.py_buffer(payload)) as reader:
                table = reader.read_all()
            table.validate(full=True)  # corrupt buffers must not reach kernels
            return validate_updates(table, self.limits)
        except StorageError as exc:
            return Refused("invalid", str(exc))
        except Exception as exc:  # untrusted bytes: a decoding failure is a refusal
            return Refused("arrow", (str(exc) or type(exc).__name__)[:200])

    def _append(
        self,
        pending: list[_Pending],
        replies: list[tuple[bytes, dict[str, Any]]],
        arrival: int,
    ) -> list[Accepted]:
        """Log the parsed batches in arrival order with one sync; queue the replies.

        Every acknowledgement, a resend's included, waits for the group's sync, so
        no batch is acknowledged before it is durable. The log decides each batch:
        next in its producer's seq order (logged), at or below the high-water mark
        (held: a duplicate), past the next expected seq (a gap: nothing logged, the
        producer is told which seq the log expects), or refused.
        """
        logged: list[tuple[_Pending, AppendResult]] = []
        for item in pending:
            peer, seq, producer, batch, first_seq = item
            try:
                if isinstance(batch, Refused):  # holds its seq's place, no rows
                    result = self.log.refuse(
                        producer, seq, str(batch), first_seq=first_seq, sync=False
                    )
                else:
                    result = self.log.append(
                        batch,
                        producer_id=producer,
                        seq=seq,
                        first_seq=first_seq,
                        sync=False,
                    )
            except LogFullError as exc:  # backpressure: the producer retries later
                self.rejected["full"] += 1
                reply: dict[str, Any] = {"ok": False, "seq": seq, "retry": True}
                replies.append((peer, {**reply, "error": f"full: {exc}"}))
            except LogSeqGapError as exc:  # an earlier batch is missing: resend it
                self.gaps += 1
                reply = {
                    "ok": False,
                    "seq": seq,
                    "gap": True,
                    "expected": exc.expected,
                    "error": f"gap: {exc}",
                }
                replies.append((peer, reply))
            except StorageError as exc:  # below the producer's first seq, limits
                replies.append((peer, self._reject("log", seq, str(exc))))
            else:
                logged.append((item, result))
        if logged:
            self.log.commit()  # a failed sync raises: nothing below is acknowledged
        accepted = []
        for (peer, seq, _, batch, _), result in logged:
            if isinstance(batch, Refused) or result.refused:
                replies.append((peer, self._refused(seq, batch, result)))
                continue
            reply = {
                "ok": True,
                "seq": seq,
                "first_offset": result.first_offset,
                "last_offset": result.last_offset,
                "duplicate": result.duplicate,
            }
            replies.append((peer, reply))
            if result.duplicate:
                self.duplicates += 1
                continue
            self.accepted_batches += 1
            self.accepted_rows += batch.num_rows
            accepted.append(Accepted(result.first_offset, batch, arrival))
        return accepted

    def _refused(
        self, seq: int, batch: pa.RecordBatch | Refused, result: AppendResult
    ) -> dict[str, Any]:
        """The answer to a batch whose seq the log holds as a refusal."""
        if result.duplicate:  # refused when first sent; the answer stays the same
            why = "it was refused when first sent (the log holds it as refused)"
            reason = batch.reason if isinstance(batch, Refused) else "refused"
            return self._reject(reason, seq, why)
        assert isinstance(batch, Refused)
        return self._reject(batch.reason, seq, batch.detail)

    def _reply(self, peer: bytes, reply: dict[str, Any]) -> None:
        try:
            self.socket.send_multipart([peer, json.dumps(reply).encode()], zmq.NOBLOCK)
        except zmq.Again:  # a peer that does not read its acks: it will resend
            self.rejected["unsent_reply"] += 1

    def counters(self) -> dict[str, int]:
        """Accepted, duplicate and rejected counts (rejections by reason)."""
        out = {
            "accepted_batches": self.accepted_batches,
            "accepted_rows": self.accepted_rows,
            "duplicates": self.duplicates,
            "gaps": self.gaps,
            "rejected": sum(self.rejected.values()),
        }
        out.update({f"rejected_{k}": v for k, v in sorted(self.rejected.items())})
        return out

    def close(self, linger_ms: int = 500) -> None:
        """Close the socket (the log stays open: its owner closes it).

        Answers already queued get ``linger_ms`` to leave (a producer whose last
        acknowledgements are lost only resends; this spares it the wait).
        """
        self.socket.close(linger=linger_ms)


class ZmqIngest(LogPosition, Operator[None, dict[str, Any]]):
    """A source step serving an :class:`IngestServer`; emits what it logs.

    Before serving it emits the ``init`` item of ``setup`` (if given, once) and
    replays the log from its position: rows logged before a crash but not yet
    processed. It is ``Stateful`` (the next offset to emit) and, once a checkpoint
    is durable, truncates log segments below that checkpoint's offset.

    It stops after ``max_updates`` log rows, once every producer that said hello
    sent ``end`` (with ``stop_on_end``), or after ``idle_timeout_s`` without a
    request (once something arrived).

    Args:
        log_path: The log directory (created if missing; empty: a temporary one,
            which a resumed run cannot find).
        endpoint: Where to bind (loopback by default).
        setup: The starting graph and model, sent first, or None.
        limits: Validation limits of incoming batches. The ``init`` item of
            ``setup`` narrows them: feature rows must have the model's input
            width, and node ids stay below ``NODE_HEADROOM`` times the starting
            graph's nodes (at least a million more).
        max_frame_bytes: Largest accepted payload.
        max_updates: Stop once the log holds this many rows.
        stop_on_end: Stop when a producer sends ``end``: once every producer
            that sent a batch to this run did (or ``expected_producers`` did).
        expected_producers: With ``stop_on_end``, stop only once this many
            distinct producers sent ``end`` to this run.
        idle_timeout_s: Stop after this long without a request.
        tick_ms: Emit a ``tick`` this often while idle.
        segment_bytes: Log segment size.
        max_log_bytes: The log's disk quota (None: unbounded). When it is full,
            producers are answered "retry" until a completed checkpoint lets
            retention delete the segments below it.
    """

    def __init__(
        self,
        log_path: str | Path,
        endpoint: str = DEFAULT_ENDPOINT,
        *,
        setup: Setup | None = None,
        limits: UpdateLimits | None = None,
        max_frame_bytes: int = 16 << 20,
        max_updates: int | None = None,
        stop_on_end: bool = True,
        expected_producers: int | None = None,
        idle_timeout_s: float | None = None,
        tick_ms: int = 100,
        segment_bytes: int = 64 << 20,
        max_log_bytes: int | None = DEFAULT_MAX_LOG_BYTES,
    ) -> None:
        self.log_path = str(log_path)
        self.endpoint = endpoint
        self.setup = setup
        self.limits = limits
        self.max_frame_bytes = max_frame_bytes
        self.max_updates = max_updates
        self.stop_on_end = stop_on_end
        self.expected_producers = expected_producers
        self.idle_timeout_s = idle_timeout_s
        self.tick_ms = tick_ms
        self.segment_bytes = segment_bytes
        self.max_log_bytes = max_log_bytes
        LogPosition.__init__(self, offset=0)
        self._log: UpdateLog | None = None
        self._ctx: StepContext | None = None
        #: (feature width, node-id bound) taken from the ``init`` item.
        self.learned: tuple[int, int] | None = None

    def open(self, ctx: StepContext) -> None:
        """Remember the context."""
        self._ctx = ctx

    def finish(self) -> Iterator[Any]:
        """Emit ``init``, replay the log's unprocessed rows, then serve."""
        for item in self.init_once(self.setup):
            self._learn_limits(item)
            yield item
        if not self.log_path:  # no directory given: a fresh temporary log
            self.log_path = str(Path(tempfile.mkdtemp(prefix="strata-ingest-")) / "log")
        config = LogConfig(  # batches are validated by the server: limits=None
            segment_bytes=self.segment_bytes,
            max_log_bytes=self.max_log_bytes,
            limits=None,
        )
        self._log = UpdateLog(self.log_path, config)
        try:
            for first, batch in self._log.read(self.offset):
                self.offset = first + batch.num_rows
                yield _updates(first, batch, wall_ms())
            server = IngestServer(
                self._log,
                self.endpoint,
                limits=self.effective_limits(),
                max_frame_bytes=self.max_frame_bytes,
            )
            try:
                yield from self._serve(server)
            finally:
                self._count(server)
                server.close()
        finally:
            self._log.close()
            self._log = None

    def _serve(self, server: IngestServer) -> Iterator[Any]:
        last_request = time.monotonic()
        last_tick = wall_ms()
        handled = 0
        while not self._finished(server):
            accepted = server.serve_once(timeout_ms=min(self.tick_ms, 50))
            now = time.monotonic()
            if server.requests != handled:
                handled, last_request = server.requests, now
            for item in accepted:
                self.offset = item.first_offset + item.batch.num_rows
                yield _updates(item.first_offset, item.batch, item.arrival_ms)
            if accepted:
                continue
            idle = now - last_request
            if (
                handled
                and self.idle_timeout_s is not None
                and idle >= self.idle_timeout_s
            ):
                return
            if wall_ms() - last_tick >= self.tick_ms:
                last_tick = wall_ms()
                yield {"kind": TICK, "now_ms": last_tick}
            yield IDLE

    def _finished(self, server: IngestServer) -> bool:
        if self.max_updates is not None and self.offset >= self.max_updates:
            return True
        if not self.stop_on_end:
            return False
        if self.expected_producers is not None:
            return len(server.ended) >= self.expected_producers
        # every producer that sent a batch said it is done
        return bool(server.ended) and server.producers <= server.ended

    def _count(self, server: IngestServer) -> None:
        if self._ctx is not None:
            for name, value in server.counters().items():
                self._ctx.metrics.counter(name).inc(value)

    # ------------------------------------------------------------------ limits
    def _learn_limits(self, init: dict[str, Any]) -> None:
        """Take the feature width and a node-id bound from the ``init`` item.

        A batch the job's layers would fail on (a feature row of another width)
        or that would make them allocate without bound (a node id far past the
        graph) must be refused at the endpoint: once logged, it would fail the
        job again on every resume.
        """
        num_nodes = int(init["num_nodes"])
        self.learned = (
            int(init["f"].shape[1]),
            min(MAX_NODES, max(NODE_HEADROOM * num_nodes, num_nodes + (1 << 20))),
        )

    def effective_limits(self) -> UpdateLimits:
        """The given limits, narrowed by what the ``init`` item says (if any)."""
        limits = self.limits or UpdateLimits()
        if self.learned is None:
            return limits
        feature_dim, max_nodes = self.learned
        return replace(
            limits,
            feature_dim=limits.feature_dim or feature_dim,
            max_nodes=min(limits.max_nodes, max_nodes),
        )

    # ------------------------------------------------------------------ state
    def snapshot(self) -> dict[str, Any]:
        """The log position, and the limits learned from ``init``."""
        state = super().snapshot()
        state["learned"] = None if self.learned is None else list(self.learned)
        return state

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from a snapshot."""
        super().restore(state)
        learned = state.get("learned")
        self.learned = None if learned is None else (int(learned[0]), int(learned[1]))

    def on_checkpoint_complete(self, checkpoint: int) -> None:
        """Drop log segments a resume from this checkpoint cannot need."""
        offset = self.durable_offset()
        if self._log is not None and offset is not None:
            self._log.truncate_before(offset)

    def __repr__(self) -> str:
        return f"ZmqIngest({self.endpoint!r}, log={self.log_path!r})"


def _updates(first: int, batch: pa.RecordBatch, arrival_ms: int) -> dict[str, Any]:
    return {"kind": UPDATES, "batch": batch, "offset": first, "arrival_ms": arrival_ms}
