"""Line-level rules for text edge lists, and the scan that pins an error to a line.

pyarrow's CSV reader parses fast but reports errors without a reliable line number.
When it fails, :func:`find_bad_line` re-reads the file with the same rules in Python
and names the first offending line, so every malformed-input error says
``file:line``. :func:`normalise` rewrites files pyarrow cannot read directly (comments
after the first data line, runs of spaces in SNAP files) without changing line
numbers.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from strata.storage.errors import FormatError

_COMMENT_LINES = re.compile(rb"(?m)^[ \t]*#[^\n]*$")
_BLANKS = re.compile(rb"[ \t]+")
_EDGE_SPACES = re.compile(rb"(?m)^ | $")
_SNIFF = 4096  # bytes read to tell text from binary data


@dataclass(frozen=True, slots=True)
class TextLayout:
    """How a text edge list is laid out (found from its head)."""

    delimiter: str  # "," / "\t" / " " (SNAP: any run of spaces and tabs)
    whitespace: bool  # split on runs of whitespace (SNAP)
    leading_comments: int  # comment or blank lines before the first data line
    header: bool
    names: tuple[str, ...]  # column names (from the header, else f0, f1, ...)


def open_text(path: Path) -> io.BufferedIOBase:
    """Open a (possibly gzip/bz2-compressed) text file for binary reading."""
    stream = pa.input_stream(str(path), compression="detect")
    return io.BufferedReader(stream)


def _is_skipped(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def split_line(line: str, layout: TextLayout) -> list[str]:
    """Split one line into fields by the layout's rule."""
    if layout.whitespace:
        return line.split()
    if layout.delimiter == ",":
        return next(csv.reader([line]))
    return line.split(layout.delimiter)


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def detect_layout(
    path: Path, fmt: str, header: bool | None, numeric_ids: bool
) -> TextLayout:
    """Read the head of a text edge list to find comments, header and delimiter."""
    leading = 0
    first: str | None = None
    with open_text(path) as f:
        head = f.read(_SNIFF)
    with open_text(path) as f:
        if b"\0" in head:
            raise FormatError.build(
                str(path),
                "read_edges",
                "a text edge list (csv, tsv, snap) or parquet",
                f"binary data (a NUL byte in the first {min(len(head), _SNIFF)} bytes)",
                "pass --format parquet for Parquet files without a .parquet suffix.",
            )
        for raw in f:
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if _is_skipped(line):
                leading += 1
                continue
            first = line
            break
    if first is None:
        raise FormatError.build(
            str(path), "read_edges", "at least one edge line", "no data lines"
        )
    whitespace = fmt == "snap"
    delimiter = {"csv": ",", "tsv": "\t"}.get(fmt, "\t" if "\t" in first else " ")
    probe = TextLayout(delimiter, whitespace, leading, False, ())
    try:
        fields = split_line(first, probe)
    except csv.Error as err:
        raise FormatError.build(
            f"{path}:{leading + 1}",
            "read_edges",
            "a well-formed CSV line",
            f"{first[:60]!r} ({err})",
        ) from None
    if header is None:
        # A header is a first line whose id fields are not integers.
        header = numeric_ids and not all(_is_int(f.strip()) for f in fields[:2])
    names = (
        tuple(f.strip() for f in fields)
        if header
        else tuple(f"f{i}" for i in range(len(fields)))
    )
    return TextLayout(delimiter, whitespace, leading, header, names)


def find_bad_line(
    path: Path,
    layout: TextLayout,
    int_columns: tuple[int, ...],
    float_columns: tuple[int, ...],
) -> tuple[int, str, str] | None:
    """Return ``(line number, expected, line text)`` of the first malformed line.

    Comment and blank lines anywhere are skipped; every data line must have as many
    fields as the header (or the first data line) and parse where numbers are due.
    """
    width = len(layout.names)
    seen_header = not layout.header
    with open_text(path) as f:
        for number, raw in enumerate(f, start=1):
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if _is_skipped(line):
                continue
            if not seen_header:
                seen_header = True
                continue
            try:
                fields = split_line(line, layout)
            except csv.Error:
                return number, "a well-formed CSV line", line
            if len(fields) != width:
                return number, f"{width} fields", line
            for col in int_columns:
                if not _is_int(fields[col].strip()):
                    return number, f"an integer id in field {col + 1}", line
            for col in float_columns:
                try:
                    float(fields[col])
                except ValueError:
                    return number, f"a number in field {col + 1}", line
    return None


def normalise(path: Path, layout: TextLayout) -> bytes:
    """The file's bytes with comments blanked and (SNAP) whitespace runs collapsed.

    Line numbers are unchanged, so parse errors still point at the right line.
    """
    with open_text(path) as f:
        data = f.read()
    data = data.replace(b"\r\n", b"\n")
    data = _COMMENT_LINES.sub(b"", data)
    if layout.whitespace:
        data = _EDGE_SPACES.sub(b"", _BLANKS.sub(b" ", data))
    return data
