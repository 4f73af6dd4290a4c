"""Small durable-file helpers: atomic replace, directory fsync, complete writes."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

TMP_SUFFIX = ".tmp"


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (created, renamed, deleted files) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a synced temporary file and a rename.

    A crash leaves either no ``path`` (and a ``.tmp`` file to delete) or all of it.
    """
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        pwrite_all(fd, [data], 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def pwrite_all(fd: int, pieces: list[bytes | pa.Buffer], position: int) -> None:
    """Write ``pieces`` contiguously at ``position``, retrying short writes."""
    views = [memoryview(p) for p in pieces]
    while views:
        written = os.pwritev(fd, views, position)
        position += written
        while views and written >= len(views[0]):
            written -= len(views[0])
            views.pop(0)
        if views and written:
            views[0] = views[0][written:]
