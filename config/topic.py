"""Kafka's topic-level config keys, each with its broker-level synonyms.

`TopicConfig` holds a topic's effective settings as typed attributes (key with
underscores); its field definitions double as the table DescribeConfigs,
CreateTopics and AlterConfigs validate and resolve against.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from strom.config.broker import (
    CLEANUP_POLICIES,
    COMPRESSION_TYPES,
    GZIP_LEVEL,
    LZ4_LEVEL,
    MIN_SEGMENT_BYTES,
    TIMESTAMP_TYPES,
    ZSTD_LEVEL,
)
from strom.config.keys import Synonym, check_fields, keys_of, setting
from strom.config.validators import Validator, at_least, between, one_of, subset_of
from strom.config.values import LONG_MAX, ConfigType


def _scaled(factor: int) -> Callable[[int], int]:
    """Convert hours/minutes to ms."""
    return lambda value: value * factor


def _retention(factor: int) -> Callable[[int], int]:
    """Convert to ms; Kafka treats any negative broker retention as -1 (unlimited)."""
    return lambda value: -1 if value * factor < 0 else value * factor


def _same_name(*names: str) -> tuple[Synonym, ...]:
    return tuple(Synonym(name) for name in names)


_THROTTLED = Validator(
    "* or partition:brokerId entries separated by commas",
    lambda v: (
        v == ("*",)
        or all(len(p := item.split(":")) == 2 and all(s.strip().isdigit() for s in p) for item in v)
    ),
)


@dataclass(frozen=True)
class TopicConfig:
    """A topic's effective configuration (defaults are Kafka's topic defaults)."""

    cleanup_policy: tuple[str, ...] = setting(
        "cleanup.policy",
        ConfigType.LIST,
        ("delete",),
        "delete and/or compact.",
        validator=subset_of(*CLEANUP_POLICIES),
        synonyms=_same_name("log.cleanup.policy"),
    )
    compression_type: str = setting(
        "compression.type",
        ConfigType.STRING,
        "producer",
        "Codec of stored batches.",
        validator=one_of(*COMPRESSION_TYPES),
        synonyms=_same_name("compression.type"),
    )
    compression_gzip_level: int = setting(
        "compression.gzip.level",
        ConfigType.INT,
        -1,
        "gzip level.",
        validator=GZIP_LEVEL,
        synonyms=_same_name("compression.gzip.level"),
    )
    compression_lz4_level: int = setting(
        "compression.lz4.level",
        ConfigType.INT,
        9,
        "lz4 level.",
        validator=LZ4_LEVEL,
        synonyms=_same_name("compression.lz4.level"),
    )
    compression_zstd_level: int = setting(
        "compression.zstd.level",
        ConfigType.INT,
        3,
        "zstd level.",
        validator=ZSTD_LEVEL,
        synonyms=_same_name("compression.zstd.level"),
    )
    delete_retention_ms: int = setting(
        "delete.retention.ms",
        ConfigType.LONG,
        86400000,
        "How long tombstones are kept.",
        validator=at_least(0),
        synonyms=_same_name("log.cleaner.delete.retention.ms"),
    )
    file_delete_delay_ms: int = setting(
        "file.delete.delay.ms",
        ConfigType.LONG,
        60000,
        "Accepted for compatibility; ignored (a dropped segment's file is deleted at once; a read "
        "holding it keeps its open descriptor).",
        validator=at_least(0),
        synonyms=_same_name("log.segment.delete.delay.ms"),
    )
    flush_messages: int = setting(
        "flush.messages",
        ConfigType.LONG,
        LONG_MAX,
        "Messages between fsyncs.",
        validator=at_least(1),
        synonyms=_same_name("log.flush.interval.messages"),
    )
    flush_ms: int = setting(
        "flush.ms",
        ConfigType.LONG,
        LONG_MAX,
        "Time between fsyncs.",
        validator=at_least(0),
        synonyms=_same_name("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    )
    follower_replication_throttled_replicas: tuple[str, ...] = setting(
        "follower.replication.throttled.replicas",
        ConfigType.LIST,
        (),
        "Accepted for compatibility; no effect (Strom has no replication quotas: the "
        "*.replication.throttled.rate broker settings are refused).",
        validator=_THROTTLED,
    )
    index_interval_bytes: int = setting(
        "index.interval.bytes",
        ConfigType.INT,
        4096,
        "Bytes between offset index entries.",
        validator=at_least(0),
        synonyms=_same_name("log.index.interval.bytes"),
    )
    leader_replication_throttled_replicas: tuple[str, ...] = setting(
        "leader.replication.throttled.replicas",
        ConfigType.LIST,
        (),
        "Accepted for compatibility; no effect (as follower.replication.throttled.replicas).",
        validator=_THROTTLED,
    )
    local_retention_bytes: int = setting(
        "local.retention.bytes",
        ConfigType.LONG,
        -2,
        "Tiered storage local bytes; -2 = retention.bytes.",
        validator=at_least(-2),
        synonyms=_same_name("log.local.retention.bytes"),
    )
    local_retention_ms: int = setting(
        "local.retention.ms",
        ConfigType.LONG,
        -2,
        "Tiered storage local time; -2 = retention.ms.",
        validator=at_least(-2),
        synonyms=_same_name("log.local.retention.ms"),
    )
    max_compaction_lag_ms: int = setting(
        "max.compaction.lag.ms",
        ConfigType.LONG,
        LONG_MAX,
        "Maximum age before compaction.",
        validator=at_least(1),
        synonyms=_same_name("log.cleaner.max.compaction.lag.ms"),
    )
    max_message_bytes: int = setting(
        "max.message.bytes",
        ConfigType.INT,
        1048588,
        "Largest record batch accepted.",
        validator=at_least(0),
        synonyms=_same_name("message.max.bytes"),
    )
    message_timestamp_after_max_ms: int = setting(
        "message.timestamp.after.max.ms",
        ConfigType.LONG,
        3600000,
        "How far in the future a CreateTime timestamp may be.",
        validator=at_least(0),
        synonyms=_same_name("log.message.timestamp.after.max.ms"),
    )
    message_timestamp_before_max_ms: int = setting(
        "message.timestamp.before.max.ms",
        ConfigType.LONG,
        LONG_MAX,
        "How far in the past a CreateTime timestamp may be.",
        validator=at_least(0),
        synonyms=_same_name("log.message.timestamp.before.max.ms"),
    )
    message_timestamp_type: str = setting(
        "message.timestamp.type",
        ConfigType.STRING,
        "CreateTime",
        "CreateTime or LogAppendTime.",
        validator=one_of(*TIMESTAMP_TYPES),
        synonyms=_same_name("log.message.timestamp.type"),
    )
    min_cleanable_dirty_ratio: float = setting(
        "min.cleanable.dirty.ratio",
        ConfigType.DOUBLE,
        0.5,
        "Dirty ratio that triggers cleaning.",
        validator=between(0, 1),
        synonyms=_same_name("log.cleaner.min.cleanable.ratio"),
    )
    min_compaction_lag_ms: int = setting(
        "min.compaction.lag.ms",
        ConfigType.LONG,
        0,
        "Minimum age before compaction.",
        validator=at_least(0),
        synonyms=_same_name("log.cleaner.min.compaction.lag.ms"),
    )
    min_insync_replicas: int = setting(
        "min.insync.replicas",
        ConfigType.INT,
        1,
        "Replicas that must ack an acks=all write.",
        validator=at_least(1),
        synonyms=_same_name("min.insync.replicas"),
    )
    preallocate: bool = setting(
        "preallocate",
        ConfigType.BOOLEAN,
        False,
        "Accepted for compatibility; ignored (segment files grow as they are written).",
        synonyms=_same_name("log.preallocate"),
    )
    remote_log_copy_disable: bool = setting(
        "remote.log.copy.disable", ConfigType.BOOLEAN, False, "Stop copying to tiered storage."
    )
    remote_log_delete_on_disable: bool = setting(
        "remote.log.delete.on.disable",
        ConfigType.BOOLEAN,
        False,
        "Drop tiered data when disabling it.",
    )
    remote_storage_enable: bool = setting(
        "remote.storage.enable", ConfigType.BOOLEAN, False, "Tiered storage (unsupported by Strom)."
    )
    retention_bytes: int = setting(
        "retention.bytes",
        ConfigType.LONG,
        -1,
        "Partition size kept; -1 = unlimited.",
        synonyms=_same_name("log.retention.bytes"),
    )
    retention_ms: int = setting(
        "retention.ms",
        ConfigType.LONG,
        604800000,
        "Age of data kept; -1 = unlimited.",
        validator=at_least(-1),
        synonyms=(
            Synonym("log.retention.ms", _retention(1)),
            Synonym("log.retention.minutes", _retention(60_000)),
            Synonym("log.retention.hours", _retention(3_600_000)),
        ),
    )
    segment_bytes: int = setting(
        "segment.bytes",
        ConfigType.INT,
        1073741824,
        "Size at which a segment rolls.",
        validator=at_least(MIN_SEGMENT_BYTES),
        synonyms=_same_name("log.segment.bytes"),
    )
    segment_index_bytes: int = setting(
        "segment.index.bytes",
        ConfigType.INT,
        10485760,
        "Maximum offset index size.",
        validator=at_least(4),
        synonyms=_same_name("log.index.size.max.bytes"),
    )
    segment_jitter_ms: int = setting(
        "segment.jitter.ms",
        ConfigType.LONG,
        0,
        "Random segment roll jitter.",
        validator=at_least(0),
        synonyms=(
            Synonym("log.roll.jitter.ms"),
            Synonym("log.roll.jitter.hours", _scaled(3_600_000)),
        ),
    )
    segment_ms: int = setting(
        "segment.ms",
        ConfigType.LONG,
        604800000,
        "Age at which a segment rolls.",
        validator=at_least(1),
        synonyms=(Synonym("log.roll.ms"), Synonym("log.roll.hours", _scaled(3_600_000))),
    )
    unclean_leader_election_enable: bool = setting(
        "unclean.leader.election.enable",
        ConfigType.BOOLEAN,
        False,
        "Allow out-of-sync replicas to become leader.",
        synonyms=_same_name("unclean.leader.election.enable"),
    )

    def __post_init__(self) -> None:
        check_fields(self)


TOPIC_KEYS = keys_of(TopicConfig)
"""Every topic-level key, by Kafka name."""
