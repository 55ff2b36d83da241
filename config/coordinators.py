"""Settings of the internal topics and coordinators: offsets, groups, transactions.

A mixin of `BrokerConfig`. The internal topics' replication defaults are 1, as
in Kafka's shipped single-node server.properties, not Kafka's built-in 3 (which
would leave a one-node cluster without a group coordinator).
"""

from __future__ import annotations

from dataclasses import dataclass

from strom.config.keys import setting
from strom.config.validators import at_least, subset_of
from strom.config.values import INT_MAX, ConfigType

C = ConfigType


@dataclass(frozen=True, init=False, repr=False, eq=False)  # fields only: see BrokerConfig
class CoordinatorSettings:
    """Consumer offsets, group membership, transactions and producer ids."""

    offsets_topic_num_partitions: int = setting(
        "offsets.topic.num.partitions",
        C.INT,
        50,
        "Partitions of __consumer_offsets.",
        validator=at_least(1),
    )
    offsets_topic_replication_factor: int = setting(
        "offsets.topic.replication.factor",
        C.SHORT,
        1,
        "Replication of __consumer_offsets (Kafka's built-in default is 3).",
        validator=at_least(1),
    )
    offsets_topic_segment_bytes: int = setting(
        "offsets.topic.segment.bytes",
        C.INT,
        104857600,
        "Segment size of __consumer_offsets.",
        validator=at_least(1),
    )
    offsets_load_buffer_size: int = setting(
        "offsets.load.buffer.size",
        C.INT,
        5242880,
        "Read size when loading offsets.",
        validator=at_least(1),
    )
    offsets_retention_minutes: int = setting(
        "offsets.retention.minutes",
        C.INT,
        10080,
        "How long committed offsets of empty groups are kept.",
        validator=at_least(1),
    )
    offsets_retention_check_interval_ms: int = setting(
        "offsets.retention.check.interval.ms",
        C.LONG,
        600000,
        "How often stale offsets expire.",
        validator=at_least(1),
    )
    offsets_commit_timeout_ms: int = setting(
        "offsets.commit.timeout.ms",
        C.INT,
        5000,
        "Wait for an offset commit to be written.",
        validator=at_least(1),
    )
    offset_metadata_max_bytes: int = setting(
        "offset.metadata.max.bytes", C.INT, 4096, "Largest metadata string of a commit."
    )

    group_initial_rebalance_delay_ms: int = setting(
        "group.initial.rebalance.delay.ms",
        C.INT,
        3000,
        "Wait for more members before the first rebalance of an empty group.",
    )
    group_min_session_timeout_ms: int = setting(
        "group.min.session.timeout.ms", C.INT, 6000, "Smallest session timeout a member may ask."
    )
    group_max_session_timeout_ms: int = setting(
        "group.max.session.timeout.ms", C.INT, 1800000, "Largest session timeout a member may ask."
    )
    group_max_size: int = setting(
        "group.max.size", C.INT, INT_MAX, "Members allowed in one group.", validator=at_least(1)
    )
    group_coordinator_rebalance_protocols: tuple[str, ...] = setting(
        "group.coordinator.rebalance.protocols",
        C.LIST,
        ("classic", "consumer"),
        "Enabled group protocols.",
        validator=subset_of("classic", "consumer", "share", allow_empty=False),
    )

    transaction_state_log_num_partitions: int = setting(
        "transaction.state.log.num.partitions",
        C.INT,
        50,
        "Partitions of __transaction_state.",
        validator=at_least(1),
    )
    transaction_state_log_replication_factor: int = setting(
        "transaction.state.log.replication.factor",
        C.SHORT,
        1,
        "Replication of __transaction_state (Kafka's built-in default is 3).",
        validator=at_least(1),
    )
    transaction_state_log_min_isr: int = setting(
        "transaction.state.log.min.isr",
        C.INT,
        1,
        "min.insync.replicas of __transaction_state (Kafka's built-in default is 2).",
        validator=at_least(1),
    )
    transaction_state_log_segment_bytes: int = setting(
        "transaction.state.log.segment.bytes",
        C.INT,
        104857600,
        "Segment size of __transaction_state.",
        validator=at_least(1),
    )
    transactional_id_expiration_ms: int = setting(
        "transactional.id.expiration.ms",
        C.INT,
        604800000,
        "Idle time after which a transactional id expires.",
        validator=at_least(1),
    )
    transaction_max_timeout_ms: int = setting(
        "transaction.max.timeout.ms",
        C.INT,
        900000,
        "Largest transaction timeout a producer may ask.",
        validator=at_least(1),
    )
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = setting(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        C.INT,
        10000,
        "How often timed-out transactions are aborted.",
        validator=at_least(1),
    )
    transaction_remove_expired_transaction_cleanup_interval_ms: int = setting(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        C.INT,
        3600000,
        "How often expired transactional ids are removed.",
        validator=at_least(1),
    )
    transaction_partition_verification_enable: bool = setting(
        "transaction.partition.verification.enable",
        C.BOOLEAN,
        True,
        "Verify a partition joined the transaction before accepting transactional writes.",
        dynamic=True,
    )
    producer_id_expiration_ms: int = setting(
        "producer.id.expiration.ms",
        C.INT,
        86400000,
        "Idle time after which a producer id's state is dropped.",
        validator=at_least(1),
        dynamic=True,
    )
    producer_id_expiration_check_interval_ms: int = setting(
        "producer.id.expiration.check.interval.ms",
        C.INT,
        600000,
        "How often idle producer ids are expired.",
        validator=at_least(1),
    )
    replica_lag_time_max_ms: int = setting(
        "replica.lag.time.max.ms", C.LONG, 30000, "Followers lagging longer leave the ISR."
    )
