"""Storage: the partition log (log/), the log cleaner (cleaner/) and the Raft store (raft/).

The modules at this level are what the three share: durable atomic writes (durable), file
I/O helpers (fileio), the log's exceptions (log_errors) and the data directory lock (dir_lock).

Synchronous by design: the trio layer calls these from its thread and moves
the slow parts (`PartitionLog.flush`, `LogManager.checkpoint`, `load`, `close`)
to worker threads. See docs/storage.md for the on-disk formats and rules.

Below `strom.coordinator`, above `strom.config` and `strom.wire`: both the broker and the
coordinators use it; it imports neither.
"""

from strom.storage.cleaner.log_cleaner import CleanerSettings, LogCleaner
from strom.storage.log.log_config import LogConfig
from strom.storage.log.log_manager import LogManager
from strom.storage.log.partition import PartitionLog
from strom.storage.log.producer_entry import ProducerInfo
from strom.storage.log.results import AppendResult, ReadResult, SegmentInfo
from strom.storage.log.validate import AppendOrigin
from strom.storage.log_errors import (
    CorruptLogError,
    KafkaStorageError,
    LogAppendError,
    LogError,
    OffsetOutOfRange,
)

__all__ = [
    "AppendOrigin",
    "AppendResult",
    "CleanerSettings",
    "CorruptLogError",
    "KafkaStorageError",
    "LogAppendError",
    "LogCleaner",
    "LogConfig",
    "LogError",
    "LogManager",
    "OffsetOutOfRange",
    "PartitionLog",
    "ProducerInfo",
    "ReadResult",
    "SegmentInfo",
]
