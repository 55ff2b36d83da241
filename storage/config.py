"""The per-partition settings the storage engine obeys, with Kafka's topic defaults.

`LogConfig` is a narrow, typed view of `strom.config.TopicConfig` (which knows
overrides, broker synonyms and validation); build one with `from_topic_config`
or, from raw overrides, `for_topic`. The log never parses config strings itself.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from strom.config import BrokerConfig, TopicConfig

LONG_MAX = 2**63 - 1
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"


@dataclass(frozen=True)
class LogConfig:
    """What a partition log needs to know; field names match TopicConfig's attributes."""

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    max_message_bytes: int = 1048588
    message_timestamp_type: str = CREATE_TIME
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3600000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    cleanup_policy: tuple[str, ...] = ("delete",)
    retention_ms: int = 604800000
    retention_bytes: int = -1
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5

    def __post_init__(self) -> None:
        if self.message_timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise ValueError(f"bad message.timestamp.type {self.message_timestamp_type!r}")
        if self.segment_bytes < 14 or self.segment_ms < 1 or self.segment_index_bytes < 4:
            raise ValueError("segment.bytes, segment.ms or segment.index.bytes out of range")

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def compact(self) -> bool:
        """Compacted topics require a key on every record."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """Whether time/size retention applies."""
        return "delete" in self.cleanup_policy

    @property
    def roll_ms(self) -> int:
        """segment.ms, capped by max.compaction.lag.ms on compacted topics (Kafka's maxSegmentMs),
        so the active segment rolls in time to be cleaned within the lag."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    def random_jitter(self, rng: random.Random) -> int:
        """A segment's roll jitter, drawn once when it is created (Kafka: < min(jitter, segment.ms))."""
        if self.segment_jitter_ms <= 0:
            return 0
        return rng.randrange(min(self.segment_jitter_ms, self.roll_ms))

    @classmethod
    def from_topic_config(cls, config: TopicConfig) -> LogConfig:
        """Take the storage-related fields of an effective (resolved) topic config."""
        return cls(
            segment_bytes=config.segment_bytes,
            segment_ms=config.segment_ms,
            segment_jitter_ms=config.segment_jitter_ms,
            segment_index_bytes=config.segment_index_bytes,
            index_interval_bytes=config.index_interval_bytes,
            max_message_bytes=config.max_message_bytes,
            message_timestamp_type=config.message_timestamp_type,
            message_timestamp_before_max_ms=config.message_timestamp_before_max_ms,
            message_timestamp_after_max_ms=config.message_timestamp_after_max_ms,
            flush_messages=config.flush_messages,
            flush_ms=config.flush_ms,
            cleanup_policy=tuple(config.cleanup_policy),
            retention_ms=config.retention_ms,
            retention_bytes=config.retention_bytes,
            compression_type=config.compression_type,
            compression_gzip_level=config.compression_gzip_level,
            compression_lz4_level=config.compression_lz4_level,
            compression_zstd_level=config.compression_zstd_level,
            delete_retention_ms=config.delete_retention_ms,
            min_compaction_lag_ms=config.min_compaction_lag_ms,
            max_compaction_lag_ms=config.max_compaction_lag_ms,
            min_cleanable_dirty_ratio=config.min_cleanable_dirty_ratio,
        )

    @classmethod
    def for_topic(cls, broker: BrokerConfig, overrides: Mapping[str, str]) -> LogConfig:
        """Resolve overrides against the broker's defaults (ConfigError for bad values)."""
        from strom.config import effective_topic_config

        return cls.from_topic_config(effective_topic_config(broker, overrides))
