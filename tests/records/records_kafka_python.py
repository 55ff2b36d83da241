"""kafka-python, imported once with its import-time DeprecationWarnings silenced.

kafka-python's package __init__ reads its JSON schemas through a deprecated
importlib API; the suite turns warnings into errors, so import it here only.
"""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import codec as kafka_codec
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

__all__ = [
    "DefaultRecordBatch",
    "DefaultRecordBatchBuilder",
    "LegacyRecordBatch",
    "LegacyRecordBatchBuilder",
    "MemoryRecords",
    "MemoryRecordsBuilder",
    "kafka_codec",
]
