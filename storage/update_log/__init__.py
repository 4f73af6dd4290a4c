"""The update log: durable, offset-addressed storage of graph-update batches.

See :mod:`storage.update_log.log` for the guarantees and
:mod:`storage.update_log._format` for the on-disk layout.
"""

from storage.update_log.errors import LogCorruptError, LogError, LogFullError
from storage.update_log.log import UpdateLog
from storage.update_log.types import (
    AppendResult,
    LogConfig,
    LogRecord,
    RecoveryReport,
)

__all__ = [
    "AppendResult",
    "LogConfig",
    "LogCorruptError",
    "LogError",
    "LogFullError",
    "LogRecord",
    "RecoveryReport",
    "UpdateLog",
]
