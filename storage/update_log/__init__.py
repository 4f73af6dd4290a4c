"""The update log: durable, offset-addressed storage of graph-update batches.

See :mod:`strata.storage.update_log.log` for the guarantees and
:mod:`strata.storage.update_log._format` for the on-disk layout.
"""

from strata.storage.update_log._format import MAX_SEQ
from strata.storage.update_log.errors import (
    LogCorruptError,
    LogError,
    LogFullError,
    LogSeqGapError,
)
from strata.storage.update_log.log import UpdateLog
from strata.storage.update_log.types import (
    DEFAULT_MAX_LOG_BYTES,
    AppendResult,
    LogConfig,
    LogRecord,
    RecoveryReport,
)

__all__ = [
    "DEFAULT_MAX_LOG_BYTES",
    "MAX_SEQ",
    "AppendResult",
    "LogConfig",
    "LogCorruptError",
    "LogError",
    "LogFullError",
    "LogRecord",
    "LogSeqGapError",
    "RecoveryReport",
    "UpdateLog",
]
