"""On-disk layout of update-log segments: the file header and the record frame.

A segment file ``<base_offset, 20 digits>.seg`` is a header followed by records::

    header   magic "STRATLOG" | version u16 | flags u16 | base_offset u64
             | snapshot_len u32 | snapshot (JSON) | crc32 u32 (of everything before)
    record   magic "SREC" | body_len u32 | crc32 u32 (of body_len and body) | body
    body     first_offset i64 | count u32 | seq i64 | min_event_time i64
             | max_event_time i64 | producer_len u16 | producer id (UTF-8)
             | payload (one Arrow IPC stream holding one record batch)

A *refusal* record (``count`` 0) holds a producer's refused seq: its payload is the
reason, in UTF-8, and it covers no rows (readers skip it).

All integers are little-endian. The header's snapshot maps each producer id to
``[high-water seq, first_offset, last_offset, first seq]`` as of the segment's start
(the high-water record's offsets; segments written before the fourth field was added
read as first seq 0), so the dedup state can be rebuilt from the last segment alone.
A record's CRC covers its length, so a torn or overwritten length cannot pass as a
shorter record.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass

import pyarrow as pa

SEGMENT_SUFFIX = ".seg"
FILE_MAGIC = b"STRATLOG"
RECORD_MAGIC = b"SREC"
VERSION = 1
_FILE_FIXED = struct.Struct("<8sHHQI")
_PREFIX = struct.Struct("<4sII")
_BODY = struct.Struct("<qIqqqH")
PREFIX_SIZE = _PREFIX.size
BODY_HEADER_SIZE = _BODY.size
# A record longer than this is a damaged length field, not a real record.
MAX_BODY_BYTES = 1 << 31
NO_SEQ = -1
#: Largest ``seq`` a record can store (a signed 64-bit field).
MAX_SEQ = (1 << 63) - 1
#: Longest reason a refusal record keeps.
MAX_REASON_BYTES = 1024
#: Longest producer id a record can store (a u16 length field).
MAX_PRODUCER_BYTES = (1 << 16) - 1

ProducerSnapshot = dict[str, tuple[int, int, int, int]]


def segment_name(base_offset: int) -> str:
    """File name of the segment whose first row offset is ``base_offset``."""
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def parse_segment_name(name: str) -> int | None:
    """Base offset encoded in a segment file name, or None for other files."""
    stem = name[: -len(SEGMENT_SUFFIX)]
    if name.endswith(SEGMENT_SUFFIX) and len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


def encode_file_header(base_offset: int, producers: ProducerSnapshot) -> bytes:
    """Encode a segment header carrying the producer snapshot."""
    snapshot = json.dumps(
        {pid: list(value) for pid, value in sorted(producers.items())},
        separators=(",", ":"),
    ).encode()
    head = _FILE_FIXED.pack(FILE_MAGIC, VERSION, 0, base_offset, len(snapshot))
    crc = zlib.crc32(snapshot, zlib.crc32(head))
    return head + snapshot + struct.pack("<I", crc)


@dataclass(frozen=True, slots=True)
class FileHeader:
    """A decoded segment header."""

    base_offset: int
    producers: ProducerSnapshot
    size: int


def decode_file_header(data: bytes) -> FileHeader | str:
    """Decode a header from the start of a segment; a string says what is wrong."""
    if len(data) < _FILE_FIXED.size + 4:
        return "a file shorter than a segment header"
    magic, version, _, base, snap_len = _FILE_FIXED.unpack_from(data)
    if magic != FILE_MAGIC:
        return f"magic {magic!r} (not a Strata log segment)"
    if version != VERSION:
        return f"format version {version} (this code reads {VERSION})"
    end = _FILE_FIXED.size + snap_len
    if len(data) < end + 4:
        return "a segment header cut short"
    (crc,) = struct.unpack_from("<I", data, end)
    if zlib.crc32(data[:end]) != crc:
        return "a segment header with a bad checksum"
    raw = json.loads(data[_FILE_FIXED.size : end])
    producers = {
        pid: (int(v[0]), int(v[1]), int(v[2]), int(v[3]) if len(v) > 3 else 0)
        for pid, v in raw.items()
    }
    return FileHeader(base_offset=base, producers=producers, size=end + 4)


@dataclass(frozen=True, slots=True)
class RecordHeader:
    """The fixed fields of one record (everything but the Arrow payload)."""

    first_offset: int
    count: int
    seq: int
    min_event_time: int
    max_event_time: int
    producer_id: str | None
    body_len: int

    @property
    def last_offset(self) -> int:
        """Offset of the record's last row."""
        return self.first_offset + self.count - 1

    @property
    def size(self) -> int:
        """Bytes the record occupies in the segment file."""
        return PREFIX_SIZE + self.body_len


def encode_record(
    first_offset: int,
    batch: pa.RecordBatch,
    producer_id: str | None,
    seq: int,
    event_range: tuple[int, int],
) -> list[bytes | pa.Buffer]:
    """Frame one batch as a record; returns the pieces to write in order."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    payload = sink.getvalue()
    pid = (producer_id or "").encode()
    head = _BODY.pack(
        first_offset, batch.num_rows, seq, event_range[0], event_range[1], len(pid)
    )
    body_len = len(head) + len(pid) + payload.size
    length = struct.pack("<I", body_len)
    crc = zlib.crc32(payload, zlib.crc32(pid, zlib.crc32(head, zlib.crc32(length))))
    return [RECORD_MAGIC + length + struct.pack("<I", crc), head, pid, payload]


def encode_refusal(
    first_offset: int, producer_id: str, seq: int, reason: str
) -> list[bytes | pa.Buffer]:
    """Frame a refusal of ``(producer_id, seq)``: no rows, the reason as payload."""
    pid = producer_id.encode()
    text = reason.encode()[:MAX_REASON_BYTES]
    head = _BODY.pack(first_offset, 0, seq, 0, 0, len(pid))
    length = struct.pack("<I", len(head) + len(pid) + len(text))
    crc = zlib.crc32(text, zlib.crc32(pid, zlib.crc32(head, zlib.crc32(length))))
    return [RECORD_MAGIC + length + struct.pack("<I", crc), head, pid, text]


def decode_prefix(data: bytes) -> tuple[int, int] | str:
    """Decode a record prefix into ``(body_len, crc)``; a string says what is wrong."""
    magic, body_len, crc = _PREFIX.unpack_from(data)
    if magic != RECORD_MAGIC:
        return f"record magic {magic!r}"
    if not BODY_HEADER_SIZE <= body_len <= MAX_BODY_BYTES:
        return f"record length {body_len}"
    return body_len, crc


def decode_body_header(body: bytes | memoryview, body_len: int) -> RecordHeader:
    """Decode the fixed body fields (the body must hold at least those bytes)."""
    first, count, seq, t_min, t_max, pid_len = _BODY.unpack_from(body)
    start = BODY_HEADER_SIZE
    pid = bytes(body[start : start + pid_len]).decode() if pid_len else None
    return RecordHeader(first, count, seq, t_min, t_max, pid, body_len)


def check_body(body: bytes, crc: int) -> bool:
    """Whether ``body`` (a whole record body) matches its stored checksum."""
    return zlib.crc32(body, zlib.crc32(struct.pack("<I", len(body)))) == crc


def decode_payload(body: bytes, header: RecordHeader) -> pa.RecordBatch:
    """Read the Arrow batch of a checked record body (zero-copy over ``body``)."""
    start = BODY_HEADER_SIZE + len((header.producer_id or "").encode())
    reader = pa.ipc.open_stream(pa.py_buffer(body)[start:])
    return reader.read_next_batch()
