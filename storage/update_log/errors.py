"""Errors of the update log, in the project's error template."""

from __future__ import annotations

from strata.storage.errors import StorageError


class LogError(StorageError):
    """The update log cannot do what was asked (bad directory, closed, bad offset)."""


class LogCorruptError(LogError):
    """Stored log data is damaged where it cannot be a torn tail; nothing is skipped.

    The message names the segment file and the byte position of the damage.
    """


class LogFullError(LogError):
    """The log's disk quota (or the disk) is full; nothing was written.

    Retryable: once retention frees space (``truncate_before``), the same append
    succeeds. Ingestion stops acknowledging and producers back off meanwhile.
    """

    retryable = True


class LogSeqGapError(LogError):
    """A producer's batch arrived before an earlier one; nothing was written.

    The log takes each producer's batches in seq order only (so that "already
    logged" is always true of a seq at or below the high-water mark). The producer
    sends :attr:`expected` and what follows, in order, then this one again.
    """

    retryable = True

    def __init__(self, message: str, expected: int) -> None:
        super().__init__(message)
        self.expected = expected
