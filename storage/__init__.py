"""Partition log storage: segments, indexes, recovery, producer state, epochs.

Synchronous by design: the trio layer calls these from its thread and moves
the slow parts (`PartitionLog.flush`, `LogManager.checkpoint`, `load`, `close`)
to worker threads. See docs/storage.md for the on-disk formats and rules.

Below `strom.coordinator`, above `strom.config` and `strom.wire`: both the broker and the
coordinators use it; it imports neither.
"""

from strom.storage.cleaner import CleanerSettings, LogCleaner
from strom.storage.config import LogConfig
from strom.storage.errors import (
    CorruptLogError,
    KafkaStorageError,
    LogAppendError,
    LogError,
    OffsetOutOfRange,
)
from strom.storage.manager import LogManager
from strom.storage.partition import PartitionLog
from strom.storage.producer_entry import ProducerInfo
from strom.storage.results import AppendResult, ReadResult, SegmentInfo
from strom.storage.validate import AppendOrigin

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
