"""The per-partition settings the storage engine obeys.

`LogConfig` is the log's narrow, typed view of `strom.config.TopicConfig`, which
knows the keys, their defaults, overrides, broker synonyms and validation: its
fields are TopicConfig attributes of the same name and default. Build one with
`from_topic_config` or, from raw overrides, `for_topic`. The log never parses
config strings itself.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from strom.config import TOPIC_KEYS, TopicConfig, effective_topic_config
from strom.config.values import LONG_MAX

if TYPE_CHECKING:
    from strom.config import BrokerConfig

__all__ = ["LONG_MAX", "LogConfig"]

_SELF_CHECKED = tuple(
    (TOPIC_KEYS[key].attr, TOPIC_KEYS[key])
    for key in ("message.timestamp.type", "segment.bytes", "segment.ms", "segment.index.bytes")
)
"""Keys whose limits the log itself relies on, checked even for a LogConfig built by hand."""


@dataclass(frozen=True)
class LogConfig:
    """What a partition log needs to know; field names and defaults are TopicConfig's."""

    segment_bytes: int = TopicConfig.segment_bytes
    segment_ms: int = TopicConfig.segment_ms
    segment_jitter_ms: int = TopicConfig.segment_jitter_ms
    segment_index_bytes: int = TopicConfig.segment_index_bytes
    index_interval_bytes: int = TopicConfig.index_interval_bytes
    max_message_bytes: int = TopicConfig.max_message_bytes
    message_timestamp_type: str = TopicConfig.message_timestamp_type
    message_timestamp_before_max_ms: int = TopicConfig.message_timestamp_before_max_ms
    message_timestamp_after_max_ms: int = TopicConfig.message_timestamp_after_max_ms
    flush_messages: int = TopicConfig.flush_messages
    flush_ms: int = TopicConfig.flush_ms
    cleanup_policy: tuple[str, ...] = TopicConfig.cleanup_policy
    retention_ms: int = TopicConfig.retention_ms
    retention_bytes: int = TopicConfig.retention_bytes
    compression_type: str = TopicConfig.compression_type
    compression_gzip_level: int = TopicConfig.compression_gzip_level
    compression_lz4_level: int = TopicConfig.compression_lz4_level
    compression_zstd_level: int = TopicConfig.compression_zstd_level
    delete_retention_ms: int = TopicConfig.delete_retention_ms
    min_compaction_lag_ms: int = TopicConfig.min_compaction_lag_ms
    max_compaction_lag_ms: int = TopicConfig.max_compaction_lag_ms
    min_cleanable_dirty_ratio: float = TopicConfig.min_cleanable_dirty_ratio

    def __post_init__(self) -> None:
        for attr, spec in _SELF_CHECKED:
            value = getattr(self, attr)
            if spec.validator is not None and not spec.validator.accepts(value):
                spec.check(value)  # raises ConfigError (a ValueError) naming the key

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

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
        return cls(**{name: getattr(config, name) for name in _FIELDS})

    @classmethod
    def for_topic(cls, broker: BrokerConfig, overrides: Mapping[str, str]) -> LogConfig:
        """Resolve overrides against the broker's defaults (ConfigError for bad values)."""
        return cls.from_topic_config(effective_topic_config(broker, overrides))


_FIELDS = tuple(f.name for f in dataclasses.fields(LogConfig))
"""LogConfig's fields, read once: `from_topic_config` runs for every topic on each metadata change."""
