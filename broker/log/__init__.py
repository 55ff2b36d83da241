"""Partition log storage: segments, indexes, recovery, producer state, epochs.

Synchronous by design: the trio layer calls these from its thread and moves
the slow parts (`PartitionLog.flush`, `LogManager.checkpoint`, `load`, `close`)
to worker threads. See docs/storage.md for the on-disk formats and rules.
"""

from broker.log.cleaner import CleanerSettings, LogCleaner
from broker.log.config import LogConfig
from broker.log.errors import (
    CorruptLogError,
    KafkaStorageError,
    LogAppendError,
    LogError,
    OffsetOutOfRange,
)
from broker.log.manager import LogManager
from broker.log.partition import PartitionLog
from broker.log.producer_entry import ProducerInfo
from broker.log.results import AppendResult, ReadResult, SegmentInfo
from broker.log.validate import AppendOrigin

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
