"""The ingestion wire protocol: typed requests, parsed from untrusted frames.

A request is a list of frames (what a DEALER client sends to the
:class:`~strata.operators.streaming.ingest.IngestServer`'s ROUTER, less the peer id).
The first frame is a UTF-8 JSON object of at most :data:`MAX_HEADER_BYTES`
bytes; its ``"type"`` (``"batch"`` when absent) says which request it is:

=========  ==========================================================  ======
type       header fields                                               frames
=========  ==========================================================  ======
``batch``  ``producer`` (1-256 chars), ``seq``, ``first_seq`` (opt.,    2
           default 1): ints in ``[0, MAX_SEQ]``, ``first_seq <= seq``
``hello``  ``producer``                                                 1
``end``    ``producer``                                                 1
``ping``   (none)                                                       1
=========  ==========================================================  ======

A batch's second frame is an Arrow IPC stream; this module does not decode it (the
server does, then checks it with :func:`strata.storage.validate_updates`). Any other
header (bad UTF-8 or JSON, not an object, an unknown type or field, a field of the wrong
type or out of range) or frame count raises :class:`ProtocolError`, and nothing else
does, whatever the bytes: :func:`parse_request` is the one place untrusted header bytes
are read.

Examples:
    >>> parse_request([b'{"producer": "p", "seq": 3}', b"<arrow>"])
    BatchRequest(producer='p', seq=3, first_seq=1, payload=b'<arrow>')
    >>> parse_request([b'{"type": "ping"}'])
    PingRequest()
    >>> parse_request(HelloRequest("p").frames())
    HelloRequest(producer='p')
    >>> try:
    ...     parse_request([b'{"producer": "p", "seq": 18446744073709551616}', b""])
    ... except ProtocolError as exc:
    ...     print(exc.reason, exc.seq)
    ...     print(exc.detail)
    header None
    seq in batch header: expected an int in [0, 2**63 - 1], got 18446744073709551616.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from strata.storage import format_error

#  Largest ``seq`` (and ``first_seq``): the update log stores it as a signed  64-bit
# field (``strata.storage.update_log._format``), so larger ones are refused here.
MAX_SEQ = (1 << 63) - 1
#: Largest header frame, in bytes.
MAX_HEADER_BYTES = 4096
#: Longest producer id, in characters.
MAX_PRODUCER_CHARS = 256
#: How much of a bad value an error message shows.
_SHOW_CHARS = 80
_INT64 = range(-(1 << 63), 1 << 63)
_MISSING = object()  # a field the header does not have

Frame: TypeAlias = bytes | memoryview


class ProtocolError(ValueError):
    """A request that breaks the protocol; the server answers it with a reject.

    Attributes:
        reason: A short counter key: ``"frames"`` (wrong frame count), ``"size"``
            (header too large) or ``"header"`` (anything wrong in the header).
        seq: The request's ``seq`` if the header held a readable one (an int in
            the signed 64-bit range), else None: the client matches the reject
            to its batch by it.
        detail: What is wrong: the field, the value it had, what was expected.
    """

    def __init__(self, reason: str, seq: int | None, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.seq = seq
        self.detail = detail


@dataclass(frozen=True, slots=True)
class BatchRequest:
    """An update batch: log ``payload`` as ``producer``'s batch ``seq``.

    ``first_seq`` is the seq the producer's stream starts at (the log's
    expectation for a producer it has not seen).
    """

    producer: str
    seq: int
    first_seq: int
    payload: Frame

    def frames(self) -> list[bytes]:
        """The request as frames to send."""
        header = {
            "producer": self.producer,
            "seq": self.seq,
            "first_seq": self.first_seq,
        }
        return [_dump(header), bytes(self.payload)]


@dataclass(frozen=True, slots=True)
class HelloRequest:
    """Ask which of ``producer``'s seqs the log holds (its high-water mark)."""

    producer: str

    def frames(self) -> list[bytes]:
        """The request as frames to send."""
        return [_dump({"type": "hello", "producer": self.producer})]


@dataclass(frozen=True, slots=True)
class EndRequest:
    """``producer`` has sent everything."""

    producer: str

    def frames(self) -> list[bytes]:
        """The request as frames to send."""
        return [_dump({"type": "end", "producer": self.producer})]


@dataclass(frozen=True, slots=True)
class PingRequest:
    """Is the endpoint there? (answered with the log's next offset)."""

    def frames(self) -> list[bytes]:
        """The request as frames to send."""
        return [_dump({"type": "ping"})]


Request: TypeAlias = BatchRequest | HelloRequest | EndRequest | PingRequest

#: type -> (fields a header may hold besides "type", frames the request has)
_SHAPES: dict[str, tuple[frozenset[str], int]] = {
    "batch": (frozenset({"producer", "seq", "first_seq"}), 2),
    "hello": (frozenset({"producer"}), 1),
    "end": (frozenset({"producer"}), 1),
    "ping": (frozenset(), 1),
}
_MOST_FRAMES = max(frames for _, frames in _SHAPES.values())


def parse_request(frames: Sequence[Frame]) -> Request:
    """The request ``frames`` hold (see the module docstring for the protocol).

    Raises:
        ProtocolError: for anything that is not a valid request, naming the field,
            the value and what was expected. It is the only exception raised.
    """
    if not 1 <= len(frames) <= _MOST_FRAMES:
        raise ProtocolError(
            "frames",
            None,
            format_error("request", "frames", "1 or 2 frames", f"{len(frames)} frames"),
        )
    header = _header(frames[0])
    seq = _echo(header.get("seq"))
    kind = header.get("type", "batch")
    if not isinstance(kind, str) or kind not in _SHAPES:
        raise _bad(seq, "type", "header", f"one of {sorted(_SHAPES)}", kind)
    allowed, expected_frames = _SHAPES[kind]
    unknown = sorted(set(header) - allowed - {"type"})
    if unknown:
        raise _bad(
            seq,
            unknown[0],
            f"{kind} header",
            f"only the fields {sorted(allowed | {'type'})}",
            header[unknown[0]],
        )
    if len(frames) != expected_frames:
        raise ProtocolError(
            "frames",
            seq,
            format_error(
                "request",
                f"{kind} request",
                f"{expected_frames} frame(s)",
                f"{len(frames)} frames",
            ),
        )
    if kind == "ping":
        return PingRequest()
    producer = _producer(header, kind, seq)
    if kind == "hello":
        return HelloRequest(producer)
    if kind == "end":
        return EndRequest(producer)
    batch_seq = _seq(header, "seq", seq, required=True)
    first_seq = _seq(header, "first_seq", seq, required=False)
    if first_seq > batch_seq:
        raise _bad(seq, "first_seq", "batch header", f"<= seq ({batch_seq})", first_seq)
    return BatchRequest(producer, batch_seq, first_seq, frames[1])


def _header(frame: Frame) -> dict[str, Any]:
    size = memoryview(frame).nbytes
    if size > MAX_HEADER_BYTES:
        raise ProtocolError(
            "size",
            None,
            format_error(
                "header",
                "request",
                f"at most {MAX_HEADER_BYTES} bytes",
                f"{size} bytes",
            ),
        )
    raw = bytes(frame)
    try:
        header = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        # RecursionError: deeply nested arrays; ValueError: bad JSON, NaN, and
        # ints past Python's digit limit
        got = f"{_show(raw)} ({type(exc).__name__}: {_clip(str(exc))})"
        raise ProtocolError(
            "header", None, format_error("header", "request", "UTF-8 JSON", got)
        ) from None
    if not isinstance(header, dict):
        raise _bad(None, "header", "request", "a JSON object", header)
    return header


def _producer(header: Mapping[str, Any], kind: str, seq: int | None) -> str:
    producer = header.get("producer", _MISSING)
    where = f"{kind} header"
    expected = f"a string of 1-{MAX_PRODUCER_CHARS} characters"
    if not isinstance(producer, str) or not 1 <= len(producer) <= MAX_PRODUCER_CHARS:
        raise _bad(seq, "producer", where, expected, producer)
    try:
        producer.encode("utf-8")  # the log stores it as UTF-8
    except UnicodeEncodeError:  # a lone surrogate, from a "\ud800" escape
        raise _bad(
            seq, "producer", where, "valid Unicode (no lone surrogates)", producer
        ) from None
    return producer


def _seq(
    header: Mapping[str, Any], field: str, seq: int | None, *, required: bool
) -> int:
    if field not in header and not required:
        return 1
    value = header.get(field, _MISSING)
    if type(value) is not int or not 0 <= value <= MAX_SEQ:  # bool is not a seq
        raise _bad(seq, field, "batch header", "an int in [0, 2**63 - 1]", value)
    return value


def _echo(value: Any) -> int | None:
    """``value`` if it is an int a JSON reader can hold (signed 64 bits)."""
    return value if type(value) is int and value in _INT64 else None


def _bad(
    seq: int | None, field: str, where: str, expected: str, value: Any
) -> ProtocolError:
    return ProtocolError(
        "header", seq, format_error(field, where, expected, _show(value))
    )


def _show(value: Any) -> str:
    """``value`` as JSON (or repr), cut to about 80 characters."""
    if value is _MISSING:
        return "nothing"
    if isinstance(value, bytes):
        return _clip(repr(value))
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return _clip(text)


def _clip(text: str) -> str:
    return text if len(text) <= _SHOW_CHARS else text[: _SHOW_CHARS - 3] + "..."


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _dump(header: dict[str, Any]) -> bytes:
    return json.dumps(header).encode()


__all__ = [
    "MAX_HEADER_BYTES",
    "MAX_PRODUCER_CHARS",
    "MAX_SEQ",
    "BatchRequest",
    "EndRequest",
    "HelloRequest",
    "PingRequest",
    "ProtocolError",
    "Request",
    "parse_request",
]
