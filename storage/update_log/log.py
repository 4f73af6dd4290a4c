"""UpdateLog: an append-only, checksummed, offset-addressed log of update batches.

Offsets count update *rows*: the log's first row has offset 0 and each appended batch
of ``n`` rows becomes one record covering ``[first_offset, first_offset + n - 1]``. A
reader may start at any row offset (the record holding it is sliced), so replay from a
checkpoint offset neither repeats nor skips a row.

Durability. ``append`` returns only after the record is written and ``fdatasync``-ed
(and, when it opened a new segment, the directory fsynced); only then may ingestion
acknowledge it. Group commit: ``append(..., sync=False)`` followed by ``commit()``, or
``append_many``, pays one sync for many batches. Readers of this object see committed
records only, so a consumer never processes a row that a crash could take back.

Recovery on open. Sealed segments are trusted up to their checksums, which every read
checks. The last segment is scanned in full: a cut-short or checksum-failing record at
its end with nothing intact after it is a torn tail and is truncated away (reported in
:attr:`UpdateLog.recovery`); damage followed by an intact record is data loss in the
middle of the log and raises :class:`LogCorruptError` naming the file and byte position.

Exactly-once ingest. Appends with ``(producer_id, seq)`` are taken in seq order only:
``seq`` must be the producer's high-water mark plus one (its ``first_seq`` when the log
has not seen it). An append at or below the high-water mark is a resend of a batch the
log holds: it writes nothing and returns the original offsets (``(-1, -1)`` once
retention deleted it). An append past the next expected seq raises
:class:`LogSeqGapError` naming the expected seq, and writes nothing: "duplicate" is
therefore only ever said of a batch that was really logged, whatever order batches
arrive in. High-water marks live in every segment header, so they survive restarts and
retention.

Examples:
    >>> import tempfile, numpy as np
    >>> from strata.storage.updates import edge_updates
    >>> root = tempfile.mkdtemp()
    >>> with UpdateLog(f"{root}/log") as log:
    ...     log.append(edge_updates(np.array([0, 1]), np.array([1, 2]), event_time=0),
    ...                producer_id="p", seq=1)
    ...     log.append(edge_updates(np.array([2]), np.array([0]), event_time=0),
    ...                producer_id="p", seq=1)  # a resend: nothing written
    ...     try:
    ...         log.append(edge_updates(np.array([2]), np.array([0]), event_time=0),
    ...                    producer_id="p", seq=3)  # seq 2 must come first
    ...     except LogSeqGapError as gap:
    ...         print("expected", gap.expected)
    ...     [(first, b.num_rows) for first, b in log.read(1)]
    AppendResult(first_offset=0, last_offset=1, duplicate=False)
    AppendResult(first_offset=0, last_offset=1, duplicate=True)
    expected 2
    [(1, 1)]
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import fcntl
import json
import os
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from strata.storage.errors import format_error
from strata.storage.update_log import _format as fmt
from strata.storage.update_log._files import (
    TMP_SUFFIX,
    fsync_dir,
    pwrite_all,
    write_atomic,
)
from strata.storage.update_log._producers import ProducerTable, SeqBelowStart, SeqGap
from strata.storage.update_log._segment import Segment
from strata.storage.update_log.errors import (
    LogCorruptError,
    LogError,
    LogFullError,
    LogSeqGapError,
)
from strata.storage.update_log.types import (
    AppendResult,
    LogConfig,
    LogRecord,
    RecoveryReport,
)
from strata.storage.updates import validate_updates

_META = "strata-log.json"
_LOCK = "writer.lock"
_META_BODY = {"format": "strata-update-log", "version": fmt.VERSION}


class UpdateLog:
    """An append-only log of update batches in a directory of segment files.

    Args:
        path: the log directory; created (with parents) when missing.
        config: segment size, quota, validation limits.
        readonly: open for reading only, e.g. a consumer in another process. No
            lock is taken and nothing is repaired; reads see whole, checksummed
            records, and a torn tail simply ends the data for now.

    Raises:
        LogError: when ``path`` is a file or a non-empty directory that is not an
            update log, or another writer holds the log.
        LogCorruptError: when stored data is damaged beyond a torn tail.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        config: LogConfig | None = None,
        *,
        readonly: bool = False,
    ) -> None:
        self.config = config or LogConfig()
        self.readonly = readonly
        self._dir = Path(path)
        self._where = f"UpdateLog({self._dir})"
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._segments: list[Segment] = []
        self._producers = ProducerTable(self.config.dedup_window)
        self._fd = -1
        self._lock_fd = -1
        self._closed = False
        self._broken: str | None = None
        self._size = 0
        self._next = 0
        self._committed = 0
        self.duplicates = 0
        self._check_directory()
        try:
            self.recovery = self._open_readonly() if readonly else self._open_writer()
        except BaseException:
            self.close()  # release the lock and files of a log that failed to open
            raise

    # ------------------------------------------------------------------ opening
    def _error(
        self, subject: str, expected: str, got: str, hint: str | None = None
    ) -> LogError:
        return LogError(format_error(subject, self._where, expected, got, hint))

    def _check_directory(self) -> None:
        if self._dir.exists() and not self._dir.is_dir():
            raise self._error(
                "path", "a log directory", "a file", "pick a new or empty directory"
            )
        if (self._dir / _META).exists():
            try:
                meta = json.loads((self._dir / _META).read_text())
            except (OSError, ValueError) as exc:
                raise self._error("path", "readable log metadata", str(exc)) from exc
            if not isinstance(meta, dict) or meta.get("format") != _META_BODY["format"]:
                raise self._error("path", "an update log", f"metadata {meta}")
            return
        if self.readonly:
            raise self._error("path", "an existing update log", "no log metadata")
        if self._dir.exists():  # a creation cut short leaves only temporary files
            for entry in self._dir.iterdir():
                if entry.name.endswith(TMP_SUFFIX) and entry.is_file():
                    entry.unlink()
        if self._dir.exists() and any(self._dir.iterdir()):
            raise self._error(
                "path",
                "an update log or an empty directory",
                "a directory with other files",
                "an update log holds a strata-log.json; pick a new directory",
            )
        self._dir.mkdir(parents=True, exist_ok=True)
        write_atomic(self._dir / _META, json.dumps(_META_BODY).encode())

    def _list_segments(self) -> list[Path]:
        named = []
        for entry in self._dir.iterdir():
            base = fmt.parse_segment_name(entry.name)
            if base is not None:
                named.append((base, entry))
        return [entry for _, entry in sorted(named)]

    def _open_writer(self) -> RecoveryReport:
        self._lock_fd = os.open(self._dir / _LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            self._lock_fd = -1
            raise self._error(
                "lock",
                "no other writer",
                "a writer holding writer.lock",
                "open with readonly=True to read while another process writes",
            ) from None
        removed = []
        for entry in self._dir.iterdir():
            if entry.name.endswith(TMP_SUFFIX):  # a segment or metadata being created
                entry.unlink()
                removed.append(entry.name)
        paths = self._list_segments()
        if not paths:
            self._create_segment(0)
            paths = self._list_segments()
        self._segments = [Segment.open(p) for p in paths]
        last = self._segments[-1]
        self._fd = os.open(last.path, os.O_RDWR)
        self._producers.load(last.header.producers)
        size = os.fstat(self._fd).st_size
        scan = last.scan(self._fd, size, verify=True, visit=self._producers.remember)
        cut = 0
        if scan.problem is not None:
            self._check_torn(last, self._fd, scan.end_position, size, scan.problem)
            os.ftruncate(self._fd, scan.end_position)
            os.fsync(self._fd)
            cut = size - scan.end_position
        last.indexed = True
        self._next = self._committed = last.end_offset
        self._size = sum(s.path.stat().st_size for s in self._segments)
        return RecoveryReport(
            segments=len(self._segments),
            start_offset=self._segments[0].base_offset,
            next_offset=self._next,
            truncated_segment=last.path.name if cut else None,
            truncated_at=scan.end_position if cut else None,
            truncated_bytes=cut,
            reason=scan.problem,
            removed_files=tuple(removed),
            producers=len(self._producers),
        )

    def _check_torn(
        self, segment: Segment, fd: int, position: int, size: int, problem: str
    ) -> None:
        """Raise unless the damage at ``position`` is a torn tail."""
        after = segment.valid_record_after(fd, position, size)
        if after is not None:
            raise LogCorruptError.build(
                f"segment {segment.path.name}",
                f"UpdateLog at byte {position} of {segment.path}",
                "a torn tail (nothing intact after damage)",
                f"{problem} followed by an intact record at byte {after}",
                "records in the middle of the log are damaged; restore the file, or "
                "truncate it at this byte position by hand to drop what follows",
            )

    def _open_readonly(self) -> RecoveryReport:
        self._refresh()
        if not self._segments:
            raise self._error("path", "at least one segment", "none")
        return RecoveryReport(
            segments=len(self._segments),
            start_offset=self._segments[0].base_offset,
            next_offset=self._committed,
        )

    def _refresh(self) -> None:
        """Readonly: pick up new and retired segments and newly written records."""
        known = {s.path.name: s for s in self._segments}
        fresh = [known.get(p.name) or Segment.open(p) for p in self._list_segments()]
        for segment in fresh[:-1]:
            segment.index_sealed()
        if fresh:
            last = fresh[-1]
            with open(last.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                scan = last.scan(f.fileno(), size, verify=True)
                if scan.problem is not None:  # a record being written, or torn
                    position = scan.end_position
                    self._check_torn(last, f.fileno(), position, size, scan.problem)
        self._segments = fresh
        self._committed = self._next = fresh[-1].end_offset if fresh else 0

    def _create_segment(self, base_offset: int) -> Segment:
        snapshot = self._producers.snapshot()
        path = self._dir / fmt.segment_name(base_offset)
        write_atomic(path, fmt.encode_file_header(base_offset, snapshot))
        segment = Segment.open(path)
        segment.indexed = True
        return segment

    # ------------------------------------------------------------------ properties
    @property
    def path(self) -> Path:
        """The log directory."""
        return self._dir

    @property
    def start_offset(self) -> int:
        """First row offset still retained."""
        with self._lock:
            return int(self._segments[0].base_offset)

    @property
    def next_offset(self) -> int:
        """Offset the next appended row gets (written, maybe not yet committed)."""
        return self._next

    @property
    def committed_offset(self) -> int:
        """Rows below this offset are durable and visible to readers."""
        return self._committed

    @property
    def size_bytes(self) -> int:
        """Bytes held by the segment files."""
        return self._size

    @property
    def num_segments(self) -> int:
        """Number of segment files."""
        return len(self._segments)

    def high_water(self, producer_id: str) -> int | None:
        """The highest ``seq`` logged for ``producer_id``, or None if never seen."""
        with self._lock:
            return self._producers.high_water(producer_id)

    def first_seq(self, producer_id: str) -> int | None:
        """The first ``seq`` logged for ``producer_id``, or None if never seen."""
        with self._lock:
            return self._producers.first_seq(producer_id)

    # ------------------------------------------------------------------ appending
    def append(
        self,
        batch: pa.RecordBatch,
        *,
        producer_id: str | None = None,
        seq: int | None = None,
        first_seq: int | None = None,
        sync: bool = True,
    ) -> AppendResult:
        """Append one batch as one record; with ``sync``, return once it is durable.

        Args:
            batch: an update batch (``strata.storage.updates`` schema), at least
                one row.
            producer_id: who sent it; with ``seq`` it makes the append idempotent.
            seq: the producer's batch number: its high-water mark plus one, or at
                most the high-water mark for a resend.
            first_seq: the seq a producer the log has not seen must start with;
                None lets it start anywhere (callers that append in order).
            sync: fdatasync before returning (default). With ``False`` the record
                becomes durable and readable at the next :meth:`commit`.

        Returns:
            The record's offsets, or the original ones for an already-logged seq
            (``(-1, -1)`` when retention has deleted it).

        Raises:
            UpdateError: when the batch fails ``config.limits``.
            LogFullError: when the quota or the disk is full (retryable).
            LogSeqGapError: when ``seq`` is past the next expected seq (retryable
                once the earlier seqs are logged).
            LogError: when the log is closed, readonly, or failed to sync, or
                ``seq`` lies below the producer's first logged seq or out of range.
        """
        with self._lock:
            result = self._append(batch, producer_id, seq, first_seq)
            if sync and self._next > self._committed:  # a resend's original, too
                self._sync()
            return result

    def append_many(
        self,
        items: Iterable[tuple[pa.RecordBatch, str | None, int | None]],
        *,
        first_seq: int | None = None,
    ) -> list[AppendResult]:
        """Append ``(batch, producer_id, seq)`` items with one sync (group commit).

        If an item fails, the items before it stay logged and are committed before
        the error propagates; resending them with the same ``(producer_id, seq)``
        returns their offsets without logging them twice. ``first_seq`` is as in
        :meth:`append`, for every item.
        """
        with self._lock:
            results: list[AppendResult] = []
            try:
                for batch, producer_id, seq in items:
                    results.append(self._append(batch, producer_id, seq, first_seq))
            finally:
                if self._next > self._committed and self._broken is None:
                    self._sync()
            return results

    def commit(self) -> int:
        """Make every appended record durable and readable; return committed_offset."""
        with self._lock:
            self._check_writable()
            if self._next > self._committed:
                self._sync()
            return self._committed

    def _check_writable(self) -> None:
        if self._closed:
            raise self._error("log", "an open log", "a closed one")
        if self.readonly:
            raise self._error("log", "a writable log", "one opened readonly")
        if self._broken is not None:
            raise self._error(
                "log",
                "a healthy log",
                f"a failed sync ({self._broken})",
                "reopen the log; unacknowledged appends may be lost and resent",
            )

    def _append(
        self,
        batch: pa.RecordBatch,
        producer_id: str | None,
        seq: int | None,
        first_seq: int | None = None,
    ) -> AppendResult:
        self._check_writable()
        held = self._check_seq(producer_id, seq, first_seq)
        if held is not None:
            return held
        if self.config.limits is not None:
            batch = validate_updates(batch, self.config.limits)
        if batch.num_rows == 0:
            raise self._error("batch", "at least one row", "0 rows")
        event_range = (0, 0)  # unvalidated batches (limits=None) may lack the column
        if (
            "event_time" in batch.schema.names
            and batch.column("event_time").null_count == 0
        ):
            times = pc.min_max(batch.column("event_time"))
            event_range = (int(times["min"].as_py()), int(times["max"].as_py()))
        seq_field = fmt.NO_SEQ if seq is None else seq
        pieces = fmt.encode_record(
            self._next, batch, producer_id, seq_field, event_range
        )
        return self._write(pieces, batch.num_rows, producer_id, seq)

    def refuse(
        self,
        producer_id: str,
        seq: int,
        reason: str,
        *,
        first_seq: int | None = None,
        sync: bool = True,
    ) -> AppendResult:
        """Record that batch ``seq`` of ``producer_id`` was refused (bad data).

        A refusal takes the seq's place in the producer's order, like an append,
        but holds no rows: readers never see it, and the producer's next seq can
        be logged after it. A resend of a refused seq finds the refusal
        (:attr:`AppendResult.refused`) and is refused again, so the answer to a
        batch never changes. Ordering errors are those of :meth:`append`.

        Returns:
            ``(offset, offset - 1)``: an empty range at the log's next offset, or
            the earlier answer (a refusal, or a logged batch) for a resend.
        """
        with self._lock:
            self._check_writable()
            held = self._check_seq(producer_id, seq, first_seq)
            if held is not None:
                result = held
            else:
                pieces = fmt.encode_refusal(self._next, producer_id, seq, reason)
                result = self._write(pieces, 0, producer_id, seq)
            if sync and self._next > self._committed:
                self._sync()
            return result

    def _check_seq(
        self, producer_id: str | None, seq: int | None, first_seq: int | None
    ) -> AppendResult | None:
        """None when ``seq`` is next for its producer; the held answer for a resend."""
        if (producer_id is None) != (seq is None):
            raise self._error(
                "producer_id/seq", "both or neither", f"{producer_id!r}/{seq!r}"
            )
        if producer_id is None or seq is None:
            return None
        for name, value in (("seq", seq), ("first_seq", first_seq)):
            if value is not None and not 0 <= value <= fmt.MAX_SEQ:
                raise self._error(name, f"0 <= {name} <= 2**63 - 1", str(value))
        if len(producer_id.encode()) > fmt.MAX_PRODUCER_BYTES:
            raise self._error(
                "producer_id",
                f"at most {fmt.MAX_PRODUCER_BYTES} UTF-8 bytes",
                f"{len(producer_id.encode())} bytes",
            )
        original = self._find_logged(producer_id, seq, first_seq)
        if original is None:
            return None
        self.duplicates += 1
        return AppendResult(*original, duplicate=True)

    def _write(
        self,
        pieces: list[bytes | pa.Buffer],
        rows: int,
        producer_id: str | None,
        seq: int | None,
    ) -> AppendResult:
        """Write one encoded record at the log's end (rolling a full segment)."""
        first = self._next
        size = sum(len(memoryview(p)) for p in pieces)
        active = self._segments[-1]
        # Segments are named by their first row offset, so a new one starts only
        # at a row the active one does not cover: never for a refusal (no rows),
        # never after a segment that holds no rows (the name would repeat).
        roll = (
            rows > 0
            and active.end_offset > active.base_offset
            and active.end_position + size > self.config.segment_bytes
        )
        self._check_quota(size, roll)
        if roll:
            self._roll()
            active = self._segments[-1]
        position = active.end_position
        try:
            pwrite_all(self._fd, pieces, position)
        except OSError as exc:
            os.ftruncate(self._fd, position)  # leave no partial record behind
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise LogFullError.build(
                    "disk",
                    self._where,
                    "free space",
                    "a full disk",
                    "free space or truncate the log, then retry",
                ) from exc
            raise
        active.add(first, position, size, rows)
        self._size += size
        self._next = first + rows
        if producer_id is not None and seq is not None:
            self._producers.remember(
                fmt.RecordHeader(first, rows, seq, 0, 0, producer_id, 0)
            )
        return AppendResult(first, self._next - 1)

    def _check_quota(self, size: int, roll: bool) -> None:
        quota = self.config.max_log_bytes
        extra = 4096 if roll else 0  # a new segment's header, over-estimated
        if quota is not None and self._size + size + extra > quota:
            raise LogFullError.build(
                "quota",
                self._where,
                f"at most {quota} bytes in the log",
                f"{self._size} bytes stored plus a {size}-byte record",
                "retryable: truncate_before(checkpoint offset) frees sealed segments",
            )

    def _find_logged(
        self, producer_id: str, seq: int, first_seq: int | None
    ) -> tuple[int, int] | None:
        """Offsets of an already-logged ``(producer_id, seq)``; None if it is next."""
        try:
            return self._producers.find(producer_id, seq, self._segments, first_seq)
        except SeqGap as gap:
            high = self._producers.high_water(producer_id)
            raise LogSeqGapError(
                format_error(
                    "seq",
                    self._where,
                    f"{gap.expected} (the next seq of producer {producer_id!r})",
                    f"{seq}",
                    "batches are logged in seq order: send the missing ones first"
                    if high is not None
                    else f"a new producer starts at its first seq {gap.expected}",
                ),
                gap.expected,
            ) from None
        except SeqBelowStart as below:
            raise self._error(
                "seq",
                f"a seq >= {below.start}, the first logged for {producer_id!r}",
                str(seq),
                "a seq below a producer's first batch was never logged",
            ) from None

    def _sync(self) -> None:
        try:
            os.fdatasync(self._fd)
        except OSError as exc:
            # After a failed fsync the page cache cannot be trusted (the kernel may
            # have dropped the dirty pages), so retrying could acknowledge lost data.
            self._broken = str(exc)
            raise self._error("sync", "fdatasync to succeed", str(exc)) from exc
        self._committed = self._next
        self._changed.notify_all()

    def _roll(self) -> None:
        """Seal the active segment (synced) and start a new one at the next offset."""
        self._sync()
        os.close(self._fd)
        self._fd = -1
        segment = self._create_segment(self._next)
        self._fd = os.open(segment.path, os.O_RDWR)
        self._segments.append(segment)
        self._size += segment.end_position

    # ------------------------------------------------------------------ reading
    def records(
        self, from_offset: int | None = None, to_offset: int | None = None
    ) -> Iterator[LogRecord]:
        """Yield committed records from row ``from_offset`` up to ``to_offset``.

        The first and last records are sliced so exactly the rows in
        ``[from_offset, to_offset)`` come out. Every record's checksum is checked.

        Args:
            from_offset: first row; default the log's start.
            to_offset: end (exclusive); default everything committed now.

        Raises:
            LogError: when ``from_offset`` was truncated away or lies past the end.
            LogCorruptError: when a record fails its checksum (file and byte named).
        """
        with self._lock:
            if self._closed:
                raise self._error("log", "an open log", "a closed one")
            if self.readonly:
                self._refresh()
            segments = list(self._segments)
            end = self._committed
        start = segments[0].base_offset if from_offset is None else from_offset
        stop = end if to_offset is None else min(to_offset, end)
        if not segments[0].base_offset <= start <= end:
            raise self._error(
                "from_offset",
                f"an offset in [{segments[0].base_offset}, {end}]",
                str(start),
                "offsets below the start were truncated after a checkpoint",
            )
        bases = [s.base_offset for s in segments]
        first_segment = max(0, bisect.bisect_right(bases, start) - 1)
        for segment in segments[first_segment:]:
            if segment.base_offset >= stop:
                return
            if segment is not segments[-1]:  # the last one is indexed as written
                with self._lock:  # one thread indexes; others wait and reuse it
                    segment.index_sealed()
            if segment.end_offset > start:
                yield from self._segment_records(segment, start, stop)

    def _segment_records(
        self, segment: Segment, start: int, stop: int
    ) -> Iterator[LogRecord]:
        try:
            fd = os.open(segment.path, os.O_RDONLY)
        except FileNotFoundError:
            raise self._error(
                "from_offset",
                "offsets still in the log",
                f"{segment.path.name} gone",
                "the log was truncated while reading",
            ) from None
        try:
            index = max(0, segment.locate(start))
            while index < len(segment.firsts) and segment.firsts[index] < stop:
                header, body = segment.read(fd, index)
                if header.count == 0:  # a refusal: it holds no rows
                    index += 1
                    continue
                batch = fmt.decode_payload(body, header)
                lo = max(start - header.first_offset, 0)
                hi = min(stop - header.first_offset, header.count)
                if lo > 0 or hi < header.count:
                    batch = batch.slice(lo, hi - lo)
                yield LogRecord(
                    header.first_offset + lo,
                    batch,
                    header.producer_id,
                    None if header.seq == fmt.NO_SEQ else header.seq,
                    header.min_event_time,
                    header.max_event_time,
                )
                index += 1
        finally:
            os.close(fd)

    def read(
        self, from_offset: int | None = None, to_offset: int | None = None
    ) -> Iterator[tuple[int, pa.RecordBatch]]:
        """Yield ``(first_offset, batch)`` for committed rows; see :meth:`records`."""
        for record in self.records(from_offset, to_offset):
            yield record.first_offset, record.batch

    def follow(
        self,
        from_offset: int | None = None,
        *,
        idle_timeout_s: float | None = None,
        poll_s: float = 0.05,
    ) -> Iterator[tuple[int, pa.RecordBatch]]:
        """Yield committed rows from ``from_offset`` on, waiting for new ones.

        A live consumer's loop: it returns once nothing new arrived for
        ``idle_timeout_s`` (never, by default) or the log is closed. A writer wakes
        in-process followers on commit; readonly logs poll every ``poll_s``.
        """
        position = self.start_offset if from_offset is None else from_offset
        idle_since = time.monotonic()
        while not self._closed:
            for first, batch in self.read(position):
                position = first + batch.num_rows
                idle_since = time.monotonic()
                yield first, batch
            waited = time.monotonic() - idle_since
            if idle_timeout_s is not None and waited >= idle_timeout_s:
                return
            wait = poll_s if idle_timeout_s is None else min(poll_s, idle_timeout_s)
            if self.readonly:
                time.sleep(wait)
            else:
                self._wait_for_commit(position, wait)

    def _wait_for_commit(self, position: int, timeout: float) -> None:
        with self._changed:
            self._changed.wait_for(
                lambda: self._committed > position or self._closed, timeout
            )

    def verify(self) -> int:
        """Check every record's checksum and offsets; return the number checked.

        Raises:
            LogCorruptError: naming the first damaged segment file and byte position.
        """
        checked = 0
        for _ in self.records(self.start_offset):
            checked += 1
        return checked

    # ------------------------------------------------------------------ retention
    def truncate_before(self, offset: int) -> int:
        """Delete sealed segments whose rows all lie below ``offset``.

        Call after a checkpoint at ``offset`` is complete. The active segment is
        never deleted, so the log keeps at least its tail. Producer high-water marks
        survive (they are in the remaining segment headers).

        Returns:
            The new :attr:`start_offset`.
        """
        with self._lock:
            self._check_writable()
            if offset > self._committed:
                raise self._error(
                    "offset",
                    f"an offset <= committed_offset {self._committed}",
                    str(offset),
                    "only truncate below a completed checkpoint",
                )
            doomed = 0
            while (
                doomed + 1 < len(self._segments)
                and self._segments[doomed + 1].base_offset <= offset
            ):
                doomed += 1
            for segment in self._segments[:doomed]:  # oldest first: a crash keeps
                self._size -= segment.path.stat().st_size  # a contiguous suffix
                segment.path.unlink()
            if doomed:
                del self._segments[:doomed]
                fsync_dir(self._dir)
            return self._segments[0].base_offset

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        """Commit pending appends, release the files and the writer lock."""
        with self._lock:
            if self._closed:
                return
            try:
                pending = self._next > self._committed
                if not self.readonly and self._broken is None and pending:
                    self._sync()
            finally:
                self._closed = True
                for fd in (self._fd, self._lock_fd):
                    if fd >= 0:
                        with contextlib.suppress(OSError):
                            os.close(fd)
                self._fd = self._lock_fd = -1
                self._changed.notify_all()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __enter__(self) -> UpdateLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "readonly" if self.readonly else "writer"
        start = self._segments[0].base_offset if self._segments else 0
        return (
            f"UpdateLog({str(self._dir)!r}, {mode}, offsets=[{start}, "
            f"{self._committed}), segments={len(self._segments)})"
        )
