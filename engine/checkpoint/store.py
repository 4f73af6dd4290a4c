"""Checkpoints on disk: state files per task, a manifest that marks completion.

Layout of a checkpoint directory (one per run of a job)::

    DIR/
      checkpoint-00000007/
        count.0.5f2c9a.state    one task's state: step 'count', shard 0, run 5f2c9a
        count.1.5f2c9a.state
        numbers.0.5f2c9a.state
        MANIFEST.json           written last: checkpoint 7 is complete
      checkpoint-00000008/      no manifest (yet, or ever): ignored, then deleted

A state file holds the frames of :func:`strata.engine.wire.pack` (a JSON header plus raw
numpy, tensor and Arrow buffers; never pickle) behind a magic number, the frame
lengths and a CRC-32 of everything before it. Tasks write their files to a
temporary name and rename them into place without waiting for the disk; the driver,
completing the checkpoint, fsyncs every file the manifest lists and the directory,
then writes the manifest to a temporary name, fsyncs, renames it into place and
fsyncs the directories, so a crash leaves either a complete checkpoint or one
without a manifest, and the tasks never wait for fsync. The manifest lists each
task's file by name: files left by a killed worker of an earlier run (another run
token) are never read.

Examples:
    >>> import tempfile
    >>> from strata.engine.wire import pack
    >>> store = CheckpointStore(tempfile.mkdtemp())
    >>> entry = store.write_state(1, "count", 0, 1, "run0", pack({}, {"n": 3}))
    >>> store.commit(Manifest(1, "demo", (entry,)))
    >>> store.complete_ids(), store.read_state(1, entry)
    ([1], {'n': 3})
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import struct
import time
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from strata.engine.errors import CheckpointError, format_error
from strata.engine.metrics import Totals
from strata.engine.wire import Buffer, unpack

FORMAT = 1
MANIFEST = "MANIFEST.json"
_MAGIC = b"STRATA-STATE\x01\x00\x00\x00"
_DIR = re.compile(r"checkpoint-(\d{8,})\Z")

#: How a task took part in a checkpoint.
STATE, STATELESS, FINISHED = "state", "stateless", "finished"
#: The pseudo step id of the driver's collected items.
DRIVER = "_driver"


@dataclass(frozen=True, slots=True)
class TaskEntry:
    """One task's part of a checkpoint, as the manifest records it.

    Attributes:
        step: The step id.
        shard: The task's shard.
        shards: The step's shard count when the checkpoint was taken.
        status: ``state`` (a state file), ``stateless`` (nothing to store) or
            ``finished`` (the task ended before this checkpoint reached it; on
            resume it is not run again).
        file: The state file's name, for ``state``.
        nbytes: The state file's size.
        crc32: The state file's checksum.
        seconds: Time the task spent taking and writing its snapshot.
        totals: The task's work counters as the barrier passed (for ``finished``:
            its final ones), which a resumed task starts from; ``None`` in
            entries that do not count (the driver's).
    """

    step: str
    shard: int
    shards: int
    status: str
    file: str | None = None
    nbytes: int = 0
    crc32: int = 0
    seconds: float = 0.0
    totals: Totals | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the entry as JSON-able data."""
        data = asdict(self)
        data["totals"] = None if self.totals is None else self.totals.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskEntry:
        """Inverse of :meth:`to_dict`."""
        totals = data.get("totals")
        return cls(
            **{**data, "totals": None if totals is None else Totals.from_dict(totals)}
        )


@dataclass(frozen=True, slots=True)
class Manifest:
    """A complete checkpoint: its id, the pipeline's name and every task's entry.

    Attributes:
        checkpoint: The checkpoint's id.
        pipeline: The pipeline's name (for people reading the file).
        tasks: Every task's entry.
        driver: The file of the items the driver had collected, if any.
        created: Wall-clock time of completion.
        duration_s: Time from the checkpoint's start to its completion.
        resumes: How many times the run that took it had resumed (0: a fresh
            run); a run resuming from it is resume ``resumes + 1``.
    """

    checkpoint: int
    pipeline: str
    tasks: tuple[TaskEntry, ...]
    driver: TaskEntry | None = None
    created: float = field(default_factory=time.time)
    duration_s: float = 0.0
    resumes: int = 0

    @property
    def nbytes(self) -> int:
        """Bytes of state in this checkpoint."""
        extra = self.driver.nbytes if self.driver is not None else 0
        return extra + sum(entry.nbytes for entry in self.tasks)

    def to_json(self) -> str:
        """Return the manifest as JSON text."""
        data = {
            "format": FORMAT,
            "checkpoint": self.checkpoint,
            "pipeline": self.pipeline,
            "created": self.created,
            "duration_s": self.duration_s,
            "resumes": self.resumes,
            "tasks": [entry.to_dict() for entry in self.tasks],
            "driver": None if self.driver is None else self.driver.to_dict(),
        }
        return json.dumps(data, indent=1)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        """Parse a manifest; raise ``ValueError`` (or ``KeyError``) when malformed."""
        data = json.loads(text)
        if data.get("format") != FORMAT:
            raise ValueError(f"manifest format {data.get('format')!r}")
        return cls(
            checkpoint=int(data["checkpoint"]),
            pipeline=str(data["pipeline"]),
            tasks=tuple(TaskEntry.from_dict(t) for t in data["tasks"]),
            driver=None
            if data["driver"] is None
            else TaskEntry.from_dict(data["driver"]),
            created=float(data["created"]),
            duration_s=float(data["duration_s"]),
            resumes=int(data.get("resumes", 0)),
        )


class CheckpointStore:
    """The checkpoints of one job in one directory (see the module docstring).

    Args:
        directory: The checkpoint directory; created when missing.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def path(self, checkpoint: int) -> Path:
        """The directory of checkpoint ``checkpoint``."""
        return self.directory / f"checkpoint-{checkpoint:08d}"

    def ids(self) -> list[int]:
        """Ids of every checkpoint directory, complete or not, ascending."""
        if not self.directory.is_dir():
            return []
        found = (_DIR.match(p.name) for p in self.directory.iterdir() if p.is_dir())
        return sorted(int(m.group(1)) for m in found if m)

    def complete_ids(self) -> list[int]:
        """Ids of the complete checkpoints (a readable manifest), ascending."""
        return [n for n in self.ids() if self.manifest(n) is not None]

    def manifest(self, checkpoint: int) -> Manifest | None:
        """The manifest of ``checkpoint``, or ``None`` when it is incomplete."""
        try:
            text = (self.path(checkpoint) / MANIFEST).read_text()
            manifest = Manifest.from_json(text)
        except (OSError, ValueError, KeyError, TypeError):
            return None  # no manifest, or one this code cannot have written whole
        return manifest if manifest.checkpoint == checkpoint else None

    def write_state(
        self,
        checkpoint: int,
        step: str,
        shard: int,
        shards: int,
        run: str,
        frames: Sequence[Buffer],
    ) -> TaskEntry:
        """Write one task's encoded state durably; return its manifest entry."""
        start = time.perf_counter()
        folder = self.path(checkpoint)
        folder.mkdir(parents=True, exist_ok=True)
        views = [memoryview(_raw(frame)).cast("B") for frame in frames]
        head = _MAGIC + struct.pack(f"<I{len(views)}Q", len(views), *map(len, views))
        crc = zlib.crc32(head)
        for view in views:
            crc = zlib.crc32(view, crc)
        name = f"{step}.{shard}.{run}.state"
        target = folder / name
        temp = folder / f".{name}.tmp"
        with open(temp, "wb") as out:  # made durable by commit(), by the driver
            out.write(head)
            for view in views:
                out.write(view)
            out.write(struct.pack("<I", crc))
        os.replace(temp, target)
        size = target.stat().st_size
        return TaskEntry(
            step, shard, shards, STATE, name, size, crc, time.perf_counter() - start
        )

    def read_state(self, checkpoint: int, entry: TaskEntry) -> Any:
        """Read and decode one task's state, checking its size and checksum.

        Raises:
            CheckpointError: The file is missing, truncated or corrupt.
        """
        assert entry.file is not None
        path = self.path(checkpoint) / entry.file
        try:
            data = bytearray(path.read_bytes())  # writable: restored arrays may be
        except OSError as exc:  # updated in place
            raise _corrupt(entry, path, f"an unreadable file ({exc})") from exc
        if (
            len(data) != entry.nbytes
            or zlib.crc32(memoryview(data)[:-4]) != entry.crc32
        ):
            raise _corrupt(entry, path, "a file whose size or checksum does not match")
        view = memoryview(data)
        (count,) = struct.unpack_from("<I", view, len(_MAGIC))
        lengths = struct.unpack_from(f"<{count}Q", view, len(_MAGIC) + 4)
        offset = len(_MAGIC) + 4 + 8 * count
        frames = []
        for length in lengths:
            frames.append(view[offset : offset + length])
            offset += length
        _, value = unpack(frames)
        return value

    def commit(self, manifest: Manifest) -> None:
        """Mark a checkpoint complete: write its manifest atomically and durably."""
        folder = self.path(manifest.checkpoint)
        folder.mkdir(parents=True, exist_ok=True)
        entries = [*manifest.tasks, *([manifest.driver] if manifest.driver else [])]
        for entry in entries:
            if entry.file is not None:
                _fsync(folder / entry.file)
        _fsync_dir(folder)  # the state files' renames
        temp = folder / f".{MANIFEST}.tmp"
        with open(temp, "w") as out:
            out.write(manifest.to_json())
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, folder / MANIFEST)
        _fsync_dir(folder)
        _fsync_dir(self.directory)

    def prune(self, keep: int) -> None:
        """Delete all but the newest ``keep`` complete checkpoints.

        Incomplete checkpoints older than the newest complete one can never
        complete, so they go too.
        """
        complete = self.complete_ids()
        if not complete:
            return
        kept = set(complete[-keep:])
        for n in self.ids():
            if n < complete[-1] and n not in kept:
                shutil.rmtree(self.path(n), ignore_errors=True)

    def discard_incomplete(self) -> list[int]:
        """Delete every incomplete checkpoint (left by a crashed run); return ids."""
        removed = [n for n in self.ids() if self.manifest(n) is None]
        for n in removed:
            shutil.rmtree(self.path(n), ignore_errors=True)
        return removed


def _raw(frame: Buffer) -> Any:
    return getattr(frame, "buffer", frame)  # zmq.Frame exposes .buffer


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)  # fsync flushes the file, whichever fd wrote
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        with contextlib.suppress(OSError):  # some filesystems refuse; nothing to do
            os.fsync(fd)
    finally:
        os.close(fd)


def _corrupt(entry: TaskEntry, path: Path, got: str) -> CheckpointError:
    return CheckpointError(
        [
            format_error(
                "checkpoint state",
                entry.step,
                f"the intact file {path} ({entry.nbytes} bytes)",
                got,
                "the disk lost data after the checkpoint completed; delete that "
                "checkpoint's directory to resume from the one before it.",
            )
        ]
    )
