"""One segment file of the update log: its header, record index, scans and reads.

The index holds one entry per record (first row offset and byte position), so it is
sparse in row offsets: a seek bisects to the record holding an offset and slices it.
It is rebuilt from the file (never stored), lazily for sealed segments.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from strata.storage.update_log import _format as fmt
from strata.storage.update_log.errors import LogCorruptError


def _damaged(
    path: Path, position: int, what: str, hint: str | None = None
) -> Exception:
    return LogCorruptError.build(
        f"segment {path.name}",
        f"UpdateLog at byte {position} of {path}",
        "an intact record",
        what,
        hint,
    )


@dataclass(slots=True)
class Scan:
    """Outcome of scanning records from a position: where and why it stopped."""

    end_position: int
    end_offset: int
    problem: str | None = None


@dataclass(slots=True)
class Segment:
    """A segment file: header, and the index of the records scanned so far.

    Attributes:
        path: the file.
        header: its decoded header (base offset, producer snapshot).
        firsts: first row offset of each indexed record.
        positions: byte position of each indexed record.
        end_position: byte position after the last indexed record.
        end_offset: row offset after the last indexed record.
        indexed: whether the whole file has been indexed.
    """

    path: Path
    header: fmt.FileHeader
    firsts: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    end_position: int = 0
    end_offset: int = 0
    indexed: bool = False

    @classmethod
    def open(cls, path: Path) -> Segment:
        """Read a segment's header; raise LogCorruptError when it is not one."""
        with path.open("rb") as f:
            data = f.read(64 * 1024)
        header = fmt.decode_file_header(data)
        if isinstance(header, str) and "cut short" in header:
            with path.open("rb") as f:  # a header with a large producer snapshot
                header = fmt.decode_file_header(f.read())
        if isinstance(header, str):
            raise _damaged(path, 0, header)
        expected = fmt.parse_segment_name(path.name)
        if header.base_offset != expected:
            raise _damaged(path, 0, f"base offset {header.base_offset} in its header")
        return cls(
            path=path,
            header=header,
            end_position=header.size,
            end_offset=header.base_offset,
        )

    @property
    def base_offset(self) -> int:
        """Row offset of the segment's first record."""
        return self.header.base_offset

    def add(self, first_offset: int, position: int, size: int, count: int) -> None:
        """Index a record just written at ``position``."""
        self.firsts.append(first_offset)
        self.positions.append(position)
        self.end_position = position + size
        self.end_offset = first_offset + count

    # ------------------------------------------------------------------ scanning
    def scan(
        self,
        fd: int,
        file_size: int,
        *,
        verify: bool,
        visit: Callable[[fmt.RecordHeader], None] | None = None,
    ) -> Scan:
        """Index records from ``end_position`` on, stopping at the first problem.

        With ``verify`` every body is read and its checksum checked; without it only
        the framing (magic, length, offset continuity) is. The index keeps every
        record before the problem; ``visit`` sees each indexed record's header.
        """
        position, offset = self.end_position, self.end_offset
        while position < file_size:
            if file_size - position < fmt.PREFIX_SIZE:
                return Scan(position, offset, "a record prefix cut short")
            prefix = fmt.decode_prefix(os.pread(fd, fmt.PREFIX_SIZE, position))
            if isinstance(prefix, str):
                return Scan(position, offset, prefix)
            body_len, crc = prefix
            if position + fmt.PREFIX_SIZE + body_len > file_size:
                return Scan(position, offset, f"a record of {body_len} bytes cut short")
            start = position + fmt.PREFIX_SIZE
            if verify:
                body = os.pread(fd, body_len, start)
                if not fmt.check_body(body, crc):
                    return Scan(position, offset, "a record with a bad checksum")
            else:
                body = os.pread(fd, fmt.BODY_HEADER_SIZE, start)
            header = fmt.decode_body_header(body, body_len)
            if header.first_offset != offset:  # count 0: a refusal record
                got = f"offsets {header.first_offset}+{header.count}"
                return Scan(position, offset, f"{got} where {offset} was next")
            if visit is not None:
                if not verify:  # the producer id lies past the fixed fields
                    body = os.pread(fd, body_len, start)
                visit(fmt.decode_body_header(body, body_len))
            self.add(offset, position, header.size, header.count)
            position, offset = position + header.size, header.last_offset + 1
        return Scan(position, offset)

    def valid_record_after(self, fd: int, position: int, file_size: int) -> int | None:
        """Position of a whole, checksummed record after ``position``, if any.

        Tells a torn tail (nothing intact follows the damage) from damage in the
        middle of the data (an intact record follows), which must not be skipped.
        """
        data = os.pread(fd, file_size - position, position)
        at = data.find(fmt.RECORD_MAGIC, 1)
        while at != -1:
            if len(data) - at >= fmt.PREFIX_SIZE:
                prefix = fmt.decode_prefix(data[at : at + fmt.PREFIX_SIZE])
                if not isinstance(prefix, str):
                    body_len, crc = prefix
                    start = at + fmt.PREFIX_SIZE
                    body = data[start : start + body_len]
                    if len(body) == body_len and fmt.check_body(body, crc):
                        return position + at
            at = data.find(fmt.RECORD_MAGIC, at + 1)
        return None

    def index_sealed(self) -> None:
        """Index a sealed segment's framing; damage there is always an error."""
        if self.indexed:
            return
        fd = os.open(self.path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            scan = self.scan(fd, size, verify=False)
        finally:
            os.close(fd)
        if scan.problem is not None:
            raise _damaged(self.path, scan.end_position, scan.problem)
        self.indexed = True

    # ------------------------------------------------------------------ reading
    def locate(self, offset: int) -> int:
        """Index of the record holding row ``offset`` (which must be indexed)."""
        return bisect.bisect_right(self.firsts, offset) - 1

    def read(self, fd: int, index: int) -> tuple[fmt.RecordHeader, bytes]:
        """Read and check the record at ``index``; return its header and body."""
        position = self.positions[index]
        prefix = fmt.decode_prefix(os.pread(fd, fmt.PREFIX_SIZE, position))
        if isinstance(prefix, str):
            raise _damaged(self.path, position, prefix)
        body_len, crc = prefix
        body = os.pread(fd, body_len, position + fmt.PREFIX_SIZE)
        if len(body) != body_len or not fmt.check_body(body, crc):
            raise _damaged(
                self.path,
                position,
                f"a bad checksum in the record of offset {self.firsts[index]}",
                "the stored data changed after it was written; restore the segment "
                "from a replica or truncate the log below this offset",
            )
        header = fmt.decode_body_header(body, body_len)
        if header.first_offset != self.firsts[index]:
            raise _damaged(self.path, position, f"offset {header.first_offset}")
        return header, body

    def read_batch(
        self, fd: int, index: int
    ) -> tuple[fmt.RecordHeader, pa.RecordBatch]:
        """Read the record at ``index`` and decode its Arrow batch."""
        header, body = self.read(fd, index)
        return header, fmt.decode_payload(body, header)

    def find_seq(self, producer_id: str, seq: int) -> tuple[int, int] | None:
        """Offsets of the record ``(producer_id, seq)`` in this segment, if present."""
        self.index_sealed()
        fd = os.open(self.path, os.O_RDONLY)
        try:
            for position in self.positions:
                start = position + fmt.PREFIX_SIZE
                head = os.pread(fd, fmt.BODY_HEADER_SIZE, start)
                pid_len = int.from_bytes(head[-2:], "little")
                head += os.pread(fd, pid_len, start + fmt.BODY_HEADER_SIZE)
                header = fmt.decode_body_header(head, 0)
                if header.producer_id == producer_id and header.seq == seq:
                    return header.first_offset, header.last_offset
        finally:
            os.close(fd)
        return None
