"""Log storage layout settings: data dirs, segments, rolling, flushing, retention.

A mixin of `BrokerConfig`. Most of these are the broker-wide defaults behind a
topic-level key (see `strom.config.topic`), which is why they are dynamic in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass

from strom.config.keys import setting
from strom.config.validators import at_least
from strom.config.values import LONG_MAX, ConfigType

C = ConfigType

MIN_SEGMENT_BYTES = 14
"""The size of the smallest possible record batch overhead, Kafka's floor for segments."""


@dataclass(frozen=True, init=False, repr=False, eq=False)  # fields only: see BrokerConfig
class LogSettings:
    """Where logs live and how they are segmented, flushed and retained."""

    log_dir: str = setting(
        "log.dir",
        C.STRING,
        "./data",
        "Data directory when log.dirs is unset (Kafka's default is /tmp/kafka-logs).",
    )
    log_dirs: str | None = setting(
        "log.dirs", C.STRING, None, "Comma-separated data directories; wins over log.dir."
    )
    num_partitions: int = setting(
        "num.partitions", C.INT, 1, "Partitions of auto-created topics.", validator=at_least(1)
    )
    default_replication_factor: int = setting(
        "default.replication.factor", C.INT, 1, "Replication factor of auto-created topics."
    )
    num_recovery_threads_per_data_dir: int = setting(
        "num.recovery.threads.per.data.dir",
        C.INT,
        2,
        "Accepted for compatibility; ignored.",
        validator=at_least(1),
        dynamic=True,
    )
    log_segment_bytes: int = setting(
        "log.segment.bytes",
        C.INT,
        1073741824,
        "Size at which a segment rolls.",
        validator=at_least(MIN_SEGMENT_BYTES),
        dynamic=True,
    )
    log_roll_ms: int | None = setting(
        "log.roll.ms",
        C.LONG,
        None,
        "Age at which a segment rolls; wins over log.roll.hours.",
        validator=at_least(1),
        dynamic=True,
    )
    log_roll_hours: int = setting(
        "log.roll.hours",
        C.INT,
        168,
        "Segment roll age in hours.",
        validator=at_least(1),
        dynamic=True,
    )
    log_roll_jitter_ms: int | None = setting(
        "log.roll.jitter.ms",
        C.LONG,
        None,
        "Random roll jitter; wins over log.roll.jitter.hours.",
        validator=at_least(0),
        dynamic=True,
    )
    log_roll_jitter_hours: int = setting(
        "log.roll.jitter.hours",
        C.INT,
        0,
        "Random roll jitter in hours.",
        validator=at_least(0),
        dynamic=True,
    )
    log_index_size_max_bytes: int = setting(
        "log.index.size.max.bytes",
        C.INT,
        10485760,
        "Maximum offset index size.",
        validator=at_least(4),
        dynamic=True,
    )
    log_index_interval_bytes: int = setting(
        "log.index.interval.bytes",
        C.INT,
        4096,
        "Bytes between offset index entries.",
        validator=at_least(0),
        dynamic=True,
    )
    log_preallocate: bool = setting(
        "log.preallocate", C.BOOLEAN, False, "Preallocate segment files.", dynamic=True
    )
    log_segment_delete_delay_ms: int = setting(
        "log.segment.delete.delay.ms",
        C.LONG,
        60000,
        "Delay before deleting a dropped segment.",
        validator=at_least(0),
        dynamic=True,
    )

    log_flush_interval_messages: int = setting(
        "log.flush.interval.messages",
        C.LONG,
        LONG_MAX,
        "Messages between fsyncs.",
        validator=at_least(1),
        dynamic=True,
    )
    log_flush_interval_ms: int | None = setting(
        "log.flush.interval.ms",
        C.LONG,
        None,
        "Time between fsyncs; unset = log.flush.scheduler.interval.ms.",
        validator=at_least(0),
        dynamic=True,
    )
    log_flush_scheduler_interval_ms: int = setting(
        "log.flush.scheduler.interval.ms", C.LONG, LONG_MAX, "How often the flusher checks logs."
    )
    log_flush_offset_checkpoint_interval_ms: int = setting(
        "log.flush.offset.checkpoint.interval.ms",
        C.INT,
        60000,
        "How often the recovery point is checkpointed.",
        validator=at_least(0),
    )
    log_flush_start_offset_checkpoint_interval_ms: int = setting(
        "log.flush.start.offset.checkpoint.interval.ms",
        C.INT,
        60000,
        "How often the log start offset is checkpointed.",
        validator=at_least(0),
    )

    log_retention_hours: int = setting(
        "log.retention.hours", C.INT, 168, "Retention in hours; -1 = unlimited."
    )
    log_retention_minutes: int | None = setting(
        "log.retention.minutes", C.INT, None, "Retention in minutes; wins over hours."
    )
    log_retention_ms: int | None = setting(
        "log.retention.ms",
        C.LONG,
        None,
        "Retention in ms; wins over minutes; -1 = unlimited.",
        dynamic=True,
    )
    log_retention_bytes: int = setting(
        "log.retention.bytes", C.LONG, -1, "Partition size kept; -1 = unlimited.", dynamic=True
    )
    log_retention_check_interval_ms: int = setting(
        "log.retention.check.interval.ms",
        C.LONG,
        300000,
        "How often retention is enforced.",
        validator=at_least(1),
    )
    log_local_retention_ms: int = setting(
        "log.local.retention.ms",
        C.LONG,
        -2,
        "Tiered storage local retention; -2 = retention.ms.",
        validator=at_least(-2),
        dynamic=True,
    )
    log_local_retention_bytes: int = setting(
        "log.local.retention.bytes",
        C.LONG,
        -2,
        "Tiered storage local retention; -2 = retention.bytes.",
        validator=at_least(-2),
        dynamic=True,
    )
