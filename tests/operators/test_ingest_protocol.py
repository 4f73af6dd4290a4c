"""strata.operators.streaming.protocol: typed requests from untrusted frames."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strata.operators.streaming.protocol import (
    MAX_HEADER_BYTES,
    MAX_SEQ,
    BatchRequest,
    EndRequest,
    HelloRequest,
    PingRequest,
    ProtocolError,
    Request,
    parse_request,
)


def head(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


@pytest.mark.parametrize(
    "request_",
    [
        BatchRequest("p", 1, 1, b"arrow bytes"),
        BatchRequest("producer-é", MAX_SEQ, 0, b""),
        BatchRequest("x" * 256, 7, 7, b"\0" * 10),
        HelloRequest("p"),
        EndRequest("p"),
        PingRequest(),
    ],
    ids=repr,
)
def test_valid_requests_round_trip(request_: Request) -> None:
    assert parse_request(request_.frames()) == request_


def test_batch_defaults_and_memoryview_payloads() -> None:
    payload = memoryview(b"abc")
    request = parse_request([memoryview(head(producer="p", seq=5)), payload])
    assert request == BatchRequest("p", 5, 1, b"abc")
    assert isinstance(request, BatchRequest)
    assert request.payload is payload  # not copied
    typed = parse_request([head(type="batch", producer="p", seq=0, first_seq=0), b""])
    assert typed == BatchRequest("p", 0, 0, b"")


def test_max_seq_is_the_largest_seq_the_log_format_stores() -> None:
    """The log writes seq as a signed 64-bit field (``struct`` "q")."""
    struct.pack("<q", MAX_SEQ)
    with pytest.raises(struct.error):
        struct.pack("<q", MAX_SEQ + 1)


PAYLOAD = b"payload"

#: name -> (frames, reason, seq echoed, text the detail must contain)
BAD: dict[str, tuple[list[bytes], str, int | None, str]] = {
    "no frames": ([], "frames", None, "0 frames"),
    "three frames": ([head(producer="p", seq=1), b"", b""], "frames", None, "3"),
    "batch without payload": ([head(producer="p", seq=4)], "frames", 4, "2 frame"),
    "ping with payload": ([head(type="ping"), b""], "frames", None, "1 frame"),
    "hello with payload": (
        [head(type="hello", producer="p"), b""],
        "frames",
        None,
        "1",
    ),
    "oversize header": (
        [head(producer="p" * MAX_HEADER_BYTES, seq=1), PAYLOAD],
        "size",
        None,
        f"at most {MAX_HEADER_BYTES} bytes",
    ),
    "not utf-8": ([b"\xff\xfe{}", PAYLOAD], "header", None, "UTF-8 JSON"),
    "utf-16": ([json.dumps({"type": "ping"}).encode("utf-16")], "header", None, "UTF"),
    "not json": ([b"{producer: p}", PAYLOAD], "header", None, "JSON"),
    "NaN": ([b'{"producer": "p", "seq": NaN}', PAYLOAD], "header", None, "NaN"),
    "deep nesting": ([b"[" * 2000 + b"]" * 2000, PAYLOAD], "header", None, "JSON"),
    "a list": ([b"[1, 2]", PAYLOAD], "header", None, "a JSON object, got [1, 2]"),
    "a string": ([b'"seq"', PAYLOAD], "header", None, "a JSON object"),
    "null": ([b"null", PAYLOAD], "header", None, "a JSON object, got null"),
    "unknown type": ([head(type="upload", producer="p")], "header", None, "type"),
    "type not a string": ([head(type=1, producer="p")], "header", None, "type"),
    "unknown field": ([head(producer="p", seq=2, sq=3), PAYLOAD], "header", 2, "sq"),
    "ping with producer": (
        [head(type="ping", producer="p")],
        "header",
        None,
        "producer",
    ),
    "no producer": ([head(seq=1), PAYLOAD], "header", 1, "producer"),
    "producer null": ([head(producer=None, seq=1), PAYLOAD], "header", 1, "null"),
    "producer empty": ([head(producer="", seq=1), PAYLOAD], "header", 1, "producer"),
    "producer a number": ([head(producer=5, seq=1), PAYLOAD], "header", 1, "got 5"),
    "producer too long": (
        [head(producer="p" * 257, seq=1), PAYLOAD],
        "header",
        1,
        "1-256",
    ),
    "producer lone surrogate": (
        [b'{"producer": "\\udc80", "seq": 1}', PAYLOAD],
        "header",
        1,
        "surrogate",
    ),
    "hello without producer": ([head(type="hello")], "header", None, "producer"),
    "end with list producer": ([head(type="end", producer=["p"])], "header", None, "["),
    "no seq": ([head(producer="p"), PAYLOAD], "header", None, "seq in batch header"),
    "seq a string": ([head(producer="p", seq="1"), PAYLOAD], "header", None, '"1"'),
    "seq a float": ([head(producer="p", seq=1.0), PAYLOAD], "header", None, "1.0"),
    "seq 1e30": ([head(producer="p", seq=1e30), PAYLOAD], "header", None, "1e+30"),
    "seq a bool": ([head(producer="p", seq=True), PAYLOAD], "header", None, "true"),
    "seq -1": ([head(producer="p", seq=-1), PAYLOAD], "header", -1, "got -1"),
    "seq 2**63": (
        [head(producer="p", seq=2**63), PAYLOAD],
        "header",
        None,
        "2**63 - 1",
    ),
    "seq 2**64": ([head(producer="p", seq=2**64), PAYLOAD], "header", None, "seq"),
    "seq 4000 digits": (
        [b'{"producer": "p", "seq": ' + b"9" * 4000 + b"}", PAYLOAD],
        "header",
        None,
        "...",
    ),
    "first_seq negative": (
        [head(producer="p", seq=3, first_seq=-2), PAYLOAD],
        "header",
        3,
        "first_seq",
    ),
    "first_seq null": (
        [head(producer="p", seq=3, first_seq=None), PAYLOAD],
        "header",
        3,
        "first_seq in batch header: expected an int",
    ),
    "first_seq 2**63": (
        [head(producer="p", seq=3, first_seq=2**63), PAYLOAD],
        "header",
        3,
        "first_seq",
    ),
    "first_seq after seq": (
        [head(producer="p", seq=3, first_seq=4), PAYLOAD],
        "header",
        3,
        "first_seq in batch header: expected <= seq (3), got 4",
    ),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_requests_are_refused_with_a_reason_and_the_field(name: str) -> None:
    frames, reason, seq, detail = BAD[name]
    with pytest.raises(ProtocolError) as info:
        parse_request(frames)
    error = info.value
    assert (error.reason, error.seq) == (reason, seq)
    assert detail in error.detail
    assert str(error) == f"{reason}: {error.detail}"
    assert "expected" in error.detail
    assert "got" in error.detail


def test_a_bad_value_is_shown_cut_short() -> None:
    with pytest.raises(ProtocolError) as info:
        parse_request([head(producer="p", seq="x" * 1000), PAYLOAD])
    assert len(info.value.detail) < 200
    assert info.value.detail.endswith('...".') or "..." in info.value.detail


SCALAR = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(max_size=20)
)


def _nested(inner: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return (
        inner
        | st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    )


JSON = _nested(_nested(SCALAR))  # two levels of lists and objects
FIELD = st.sampled_from(["type", "producer", "seq", "first_seq", "extra"])
TYPE = st.sampled_from(["batch", "hello", "end", "ping", "", "Batch"])
HEADER = st.dictionaries(FIELD, JSON | TYPE | st.integers(-2, 2**64), max_size=5)


def _parse_or_refuse(frames: list[bytes]) -> Request | None:
    try:
        return parse_request(frames)
    except ProtocolError as exc:
        error = exc
    assert error.reason in {"frames", "size", "header"}
    assert error.seq is None or -(2**63) <= error.seq < 2**63
    json.dumps({"seq": error.seq, "error": str(error)})  # the reply can be sent
    return None


@given(frames=st.lists(st.binary(max_size=64), min_size=1, max_size=3))
@settings(max_examples=300, deadline=None)
def test_arbitrary_bytes_raise_only_protocol_errors(frames: list[bytes]) -> None:
    _parse_or_refuse(frames)


@given(
    header=HEADER,
    frames=st.integers(1, 3),
    encoding=st.sampled_from([True, False]),
)
@settings(max_examples=300, deadline=None)
def test_arbitrary_json_objects_raise_only_protocol_errors(
    header: dict[str, Any], frames: int, encoding: bool
) -> None:
    raw = json.dumps(header, ensure_ascii=encoding).encode("utf-8", "surrogatepass")
    request = _parse_or_refuse([raw] + [PAYLOAD] * (frames - 1))
    if isinstance(request, BatchRequest):
        assert 0 <= request.first_seq <= request.seq <= MAX_SEQ
        assert type(request.seq) is int
        assert type(request.first_seq) is int
        assert 1 <= len(request.producer) <= 256
    if request is not None:  # what parses re-encodes to the same request
        assert parse_request(request.frames()) == request
