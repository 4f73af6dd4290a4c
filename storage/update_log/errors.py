"""Errors of the update log, in the project's error template."""

from __future__ import annotations

from storage.errors import StorageError


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
