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
    int_ids: bool = True  # the first data row's two id fields are integers


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


#: Header names recognised as an edge list's source, destination and weight columns
#: (compared in lower case), in order of preference.
SRC_NAMES = ("src", "source", "from", "u", "src_id", "source_id", "node1")
DST_NAMES = ("dst", "target", "to", "v", "dst_id", "target_id", "node2")
WEIGHT_NAMES = ("weight", "weights", "w", "value")
_KNOWN_NAMES = frozenset(SRC_NAMES + DST_NAMES + WEIGHT_NAMES)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _looks_like_header(
    first: list[str], second: list[str] | None, id_type: str, named: bool
) -> bool:
    """Whether the first data line is a header, from its fields and the next line's.

    ``int`` ids: a first line whose id fields are not integers. Otherwise (string or
    auto ids) a line cannot be told from a header by its id fields alone, so it is
    a header when columns were named, when its fields are known column names
    (``src``, ``target``, ``weight`` ...), when the next line's ids are integers
    while its are not, or when a third field is text above a number.
    """
    first_ids = [f.strip() for f in first[:2]]
    if all(_is_int(f) for f in first_ids):
        return False
    if id_type == "int" or named:
        return True
    if any(f.strip().lower() in _KNOWN_NAMES for f in first):
        return True
    if second is None:
        return False
    if all(_is_int(f.strip()) for f in second[:2]):
        return True
    return (
        len(first) > 2
        and len(second) > 2
        and not _is_number(first[2].strip())
        and _is_number(second[2].strip())
    )


def detect_layout(
    path: Path, fmt: str, header: bool | None, id_type: str, named: bool = False
) -> TextLayout:
    """Read the head of a text edge list to find comments, header and delimiter.

    Args:
        path: the file.
        fmt: ``csv``, ``tsv`` or ``snap``.
        header: ``True``/``False`` when the user said; ``None`` detects it.
        id_type: ``int``, ``str`` or ``auto`` (see :func:`_looks_like_header`).
        named: whether a column was chosen by name (then there must be a header).
    """
    leading = 0
    lines: list[tuple[int, str]] = []
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
        for number, raw in enumerate(f, start=1):
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if _is_skipped(line):
                leading += 0 if lines else 1
                continue
            lines.append((number, line))
            if len(lines) == 2:
                break
    if not lines:
        raise FormatError.build(
            str(path), "read_edges", "at least one edge line", "no data lines"
        )
    first = lines[0][1]
    whitespace = fmt == "snap"
    delimiter = {"csv": ",", "tsv": "\t"}.get(fmt, "\t" if "\t" in first else " ")
    probe = TextLayout(delimiter, whitespace, leading, False, ())
    split: list[list[str]] = []
    for number, line in lines:
        try:
            split.append(split_line(line, probe))
        except csv.Error as err:
            raise FormatError.build(
                f"{path}:{number}",
                "read_edges",
                "a well-formed CSV line",
                f"{line[:60]!r} ({err})",
            ) from None
    fields = split[0]
    if header is None:
        second = split[1] if len(split) > 1 else None
        header = _looks_like_header(fields, second, id_type, named)
    names = (
        tuple(f.strip() for f in fields)
        if header
        else tuple(f"f{i}" for i in range(len(fields)))
    )
    data_row = split[1] if header and len(split) > 1 else fields
    int_ids = all(_is_int(f.strip()) for f in data_row[:2])
    return TextLayout(delimiter, whitespace, leading, header, names, int_ids)


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
