"""Value types of the update log: its configuration, reports and results."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import pyarrow as pa

from strata.storage.errors import format_error
from strata.storage.update_log.errors import LogError
from strata.storage.updates import UpdateLimits

#: The default disk quota of an update log: bounded unless asked otherwise.
DEFAULT_MAX_LOG_BYTES = 1 << 30


@dataclass(frozen=True, slots=True)
class LogConfig:
    """How an :class:`UpdateLog` writes.

    Attributes:
        segment_bytes: a segment is sealed and a new one started once the next
            record would grow it past this size (a larger record gets its own).
        max_log_bytes: disk quota over all segments (default
            :data:`DEFAULT_MAX_LOG_BYTES`, 1 GiB); ``None`` for none. An append that
            would exceed it raises :class:`LogFullError` and writes nothing: an
            ingestion endpoint then answers producers "retry" (backpressure) until
            retention (``truncate_before``, after a checkpoint) frees space.
        limits: what appended batches must satisfy (``validate_updates``); ``None``
            skips validation (for callers that validated already).
        dedup_window: resent ``seq`` values per producer answered from memory; older
            resends are looked up in the segment files.
    """

    segment_bytes: int = 64 << 20
    max_log_bytes: int | None = DEFAULT_MAX_LOG_BYTES
    limits: UpdateLimits | None = field(default_factory=UpdateLimits)
    dedup_window: int = 1024

    def __post_init__(self) -> None:
        for name in ("segment_bytes", "max_log_bytes", "dedup_window"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise LogError(
                    format_error(name, "LogConfig", "a value >= 1", str(value))
                )


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What opening the log found and repaired.

    Attributes:
        segments: segment files found.
        start_offset: first retained row offset.
        next_offset: offset the next append gets.
        truncated_segment: file whose torn tail was cut, if any.
        truncated_at: byte position the file was cut back to.
        truncated_bytes: bytes removed.
        reason: what the torn record looked like.
        removed_files: leftover temporary files deleted.
        producers: producers with a known high-water mark.
    """

    segments: int
    start_offset: int
    next_offset: int
    truncated_segment: str | None = None
    truncated_at: int | None = None
    truncated_bytes: int = 0
    reason: str | None = None
    removed_files: tuple[str, ...] = ()
    producers: int = 0

    @property
    def clean(self) -> bool:
        """Whether nothing had to be repaired."""
        return self.truncated_segment is None and not self.removed_files


class AppendResult(NamedTuple):
    """Offsets of an appended batch; ``duplicate`` marks an already-logged resend.

    A refusal (:meth:`UpdateLog.refuse`) covers no rows: ``last_offset`` is
    ``first_offset - 1``. A resend of a batch retention deleted answers ``(-1, -1)``.
    """

    first_offset: int
    last_offset: int
    duplicate: bool = False

    @property
    def refused(self) -> bool:
        """Whether the seq is held as a refusal (it covers no rows)."""
        return self.last_offset == self.first_offset - 1


@dataclass(frozen=True, slots=True)
class LogRecord:
    """A (possibly sliced) record as read back, with its producer and event times."""

    first_offset: int
    batch: pa.RecordBatch
    producer_id: str | None
    seq: int | None
    min_event_time: int
    max_event_time: int

    @property
    def last_offset(self) -> int:
        """Offset of the last row of ``batch``."""
        return self.first_offset + int(self.batch.num_rows) - 1
