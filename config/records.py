"""Record handling settings: size limits, compression, timestamps, compaction.

A mixin of `BrokerConfig`; like `LogSettings`, mostly the broker-wide defaults
behind topic-level keys.
"""

from __future__ import annotations

from dataclasses import dataclass

from strom.config.keys import setting
from strom.config.validators import at_least, between, either, exactly, one_of, subset_of
from strom.config.values import DOUBLE_MAX, LONG_MAX, ConfigType

C = ConfigType

CLEANUP_POLICIES = ("compact", "delete")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
GZIP_LEVEL = either(between(1, 9), exactly(-1))
LZ4_LEVEL = between(1, 17)
ZSTD_LEVEL = between(-131072, 22)


@dataclass(frozen=True, init=False, repr=False, eq=False)  # fields only: see BrokerConfig
class RecordSettings:
    """What batches are accepted, how they are stored, and how compaction treats them."""

    message_max_bytes: int = setting(
        "message.max.bytes",
        C.INT,
        1048588,
        "Largest record batch accepted.",
        validator=at_least(0),
        dynamic=True,
    )
    min_insync_replicas: int = setting(
        "min.insync.replicas",
        C.INT,
        1,
        "Replicas that must ack an acks=all write.",
        validator=at_least(1),
        dynamic=True,
    )
    unclean_leader_election_enable: bool = setting(
        "unclean.leader.election.enable",
        C.BOOLEAN,
        False,
        "Allow out-of-sync replicas to become leader.",
        dynamic=True,
    )
    compression_type: str = setting(
        "compression.type",
        C.STRING,
        "producer",
        "Codec of stored batches; producer = as sent.",
        validator=one_of(*COMPRESSION_TYPES),
        dynamic=True,
    )
    compression_gzip_level: int = setting(
        "compression.gzip.level",
        C.INT,
        -1,
        "gzip level when recompressing.",
        validator=GZIP_LEVEL,
        dynamic=True,
    )
    compression_lz4_level: int = setting(
        "compression.lz4.level",
        C.INT,
        9,
        "lz4 level when recompressing.",
        validator=LZ4_LEVEL,
        dynamic=True,
    )
    compression_zstd_level: int = setting(
        "compression.zstd.level",
        C.INT,
        3,
        "zstd level when recompressing.",
        validator=ZSTD_LEVEL,
        dynamic=True,
    )

    log_cleanup_policy: tuple[str, ...] = setting(
        "log.cleanup.policy",
        C.LIST,
        ("delete",),
        "delete and/or compact.",
        validator=subset_of(*CLEANUP_POLICIES),
        dynamic=True,
    )
    log_cleaner_enable: bool = setting(
        "log.cleaner.enable", C.BOOLEAN, True, "Run the log cleaner (needed for compaction)."
    )
    log_cleaner_threads: int = setting(
        "log.cleaner.threads", C.INT, 1, "Cleaner threads.", validator=at_least(0), dynamic=True
    )
    log_cleaner_dedupe_buffer_size: int = setting(
        "log.cleaner.dedupe.buffer.size",
        C.LONG,
        134217728,
        "Memory for key deduplication.",
        dynamic=True,
    )
    log_cleaner_io_buffer_size: int = setting(
        "log.cleaner.io.buffer.size",
        C.INT,
        524288,
        "Cleaner I/O buffer.",
        validator=at_least(0),
        dynamic=True,
    )
    log_cleaner_io_buffer_load_factor: float = setting(
        "log.cleaner.io.buffer.load.factor",
        C.DOUBLE,
        0.9,
        "Dedupe buffer load factor.",
        dynamic=True,
    )
    log_cleaner_io_max_bytes_per_second: float = setting(
        "log.cleaner.io.max.bytes.per.second",
        C.DOUBLE,
        DOUBLE_MAX,
        "Cleaner I/O throttle.",
        dynamic=True,
    )
    log_cleaner_backoff_ms: int = setting(
        "log.cleaner.backoff.ms",
        C.LONG,
        15000,
        "Sleep when nothing is cleanable.",
        validator=at_least(0),
        dynamic=True,
    )
    log_cleaner_min_cleanable_ratio: float = setting(
        "log.cleaner.min.cleanable.ratio",
        C.DOUBLE,
        0.5,
        "Dirty ratio that triggers cleaning.",
        validator=between(0, 1),
        dynamic=True,
    )
    log_cleaner_delete_retention_ms: int = setting(
        "log.cleaner.delete.retention.ms",
        C.LONG,
        86400000,
        "How long tombstones are kept.",
        validator=at_least(0),
        dynamic=True,
    )
    log_cleaner_min_compaction_lag_ms: int = setting(
        "log.cleaner.min.compaction.lag.ms",
        C.LONG,
        0,
        "Minimum age before compaction.",
        validator=at_least(0),
        dynamic=True,
    )
    log_cleaner_max_compaction_lag_ms: int = setting(
        "log.cleaner.max.compaction.lag.ms",
        C.LONG,
        LONG_MAX,
        "Maximum age before compaction.",
        validator=at_least(1),
        dynamic=True,
    )

    log_message_timestamp_type: str = setting(
        "log.message.timestamp.type",
        C.STRING,
        "CreateTime",
        "CreateTime or LogAppendTime.",
        validator=one_of(*TIMESTAMP_TYPES),
        dynamic=True,
    )
    log_message_timestamp_before_max_ms: int = setting(
        "log.message.timestamp.before.max.ms",
        C.LONG,
        LONG_MAX,
        "How far in the past a CreateTime timestamp may be.",
        validator=at_least(0),
        dynamic=True,
    )
    log_message_timestamp_after_max_ms: int = setting(
        "log.message.timestamp.after.max.ms",
        C.LONG,
        3600000,
        "How far in the future a CreateTime timestamp may be (Kafka 4.0: 1 hour).",
        validator=at_least(0),
        dynamic=True,
    )
    log_message_downconversion_enable: bool = setting(
        "log.message.downconversion.enable",
        C.BOOLEAN,
        True,
        "Deprecated in Kafka; accepted, Strom never down-converts.",
        dynamic=True,
    )
