"""`BrokerConfig`: the typed, validated, immutable broker configuration.

Every broker key Strom types is declared here once, as a field: its Kafka name,
type, default (Kafka 4.0's, except where `STROM_DEFAULTS` says why not),
validator and whether Kafka can change it at runtime. Attributes are the keys
with dots as underscores (`log.retention.hours` -> `log_retention_hours`)
holding the configured value, so DescribeConfigs can report exactly what was
set; the properties below the fields derive the effective values Kafka computes
from them (retention ms > minutes > hours, log.dirs > log.dir, ...), and
construction checks every value and the rules that span several keys.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, partial
from types import MappingProxyType
from typing import Any

from strom.config.config_error import ConfigError
from strom.config.ignored import is_ignored
from strom.config.keys import attr_name, check_fields, keys_of, setting
from strom.config.listeners import (
    METRICS_LISTENER_EXPECTED,
    SECURITY_PROTOCOLS,
    Listener,
    parse_listener_names,
    parse_listeners,
    parse_metrics_listener,
    parse_protocol_map,
    split_list,
)
from strom.config.properties_file import apply_overrides, read_properties_file
from strom.config.quorum import (
    BOOTSTRAP_KEY,
    VOTERS_KEY,
    Address,
    is_own_controller,
    multi_node_refusal,
    parse_bootstrap_servers,
    parse_voters,
    runs_quorum,
)
from strom.config.security import (
    DEFAULT_PRINCIPAL_BUILDER,
    OAUTH_VALIDATOR,
    OAUTH_VALIDATOR_3X,
    SASL_MECHANISMS,
    SSL_SETTING_KEYS,
    STANDARD_AUTHORIZER,
    SslSettings,
    check_client_jaas,
    check_sasl_listener,
    listener_value,
    parse_listener_settings,
    parse_principal_mapping_rules,
)
from strom.config.unsupported import refuse_security_key, refuse_security_protocol
from strom.config.validators import (
    Validator,
    at_least,
    between,
    either,
    exactly,
    matches,
    one_of,
    subset_of,
)
from strom.config.values import DOUBLE_MAX, INT_MAX, LONG_MAX, ConfigType, ConfigValue, parse_value

STROM_DEFAULTS: Mapping[str, str] = {
    "node.id": "Kafka has no default (required); Strom's embedded node is 1",
    "process.roles": "Kafka has no default (required); Strom's embedded node is combined",
    "controller.quorum.voters": "Kafka needs voters or bootstrap servers; with neither, a Strom "
    "combined node is a one-node quorum of itself (as formatted with --standalone)",
    "listeners": "Kafka binds PLAINTEXT://:9092 (all interfaces); Strom binds loopback",
    "log.dir": "Kafka uses /tmp/kafka-logs; Strom uses ./data",
    "offsets.topic.replication.factor": "Kafka's built-in 3 needs 3 brokers; 1 as in server.properties",
    "transaction.state.log.replication.factor": "as offsets.topic.replication.factor",
    "transaction.state.log.min.isr": "Kafka's built-in 2; 1 as in Kafka's shipped server.properties",
    "queued.max.request.bytes": "Kafka's -1 lets ten slow 100 MB requests hold 1 GB; Strom bounds "
    "request memory at 256 MiB",
    "socket.send.buffer.bytes": "Kafka's 102400 caps each socket's buffer; Strom's -1 keeps the "
    "kernel's autotuning (a 1 MB fetch answer leaves in one write: 1.16x the CPU per consumed "
    "message with 102400)",
    "socket.receive.buffer.bytes": "as socket.send.buffer.bytes",
}
"""Where Strom's defaults deliberately differ from Kafka's, and why."""

LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "WARNING", "ERROR", "FATAL", "CRITICAL")
DEFAULT_PROTOCOL_MAP = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
MIN_SEGMENT_BYTES = 14
"""The size of the smallest possible record batch overhead, Kafka's floor for segments."""

# Value domains shared with the topic keys (`strom.config.topic`) these keys are defaults of.
CLEANUP_POLICIES = ("compact", "delete")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
"""replica.selector.class values: Kafka's two ReplicaSelector classes (KIP-392)."""
GZIP_LEVEL = either(between(1, 9), exactly(-1))
LZ4_LEVEL = between(1, 17)
ZSTD_LEVEL = between(-131072, 22)



def _valid_metrics_listener(value: str) -> bool:
    try:
        parse_metrics_listener(value)
    except ConfigError:
        return False
    return True


METRICS_LISTENER = Validator(METRICS_LISTENER_EXPECTED, _valid_metrics_listener)
_PY_LEVELS = {"TRACE": 5, "WARN": logging.WARNING, "FATAL": logging.CRITICAL}
_HOUR_MS = 3_600_000
_MINUTE_MS = 60_000


@dataclass(frozen=True)
class BrokerConfig:
    """The broker configuration; construction validates every value and cross-key rule."""

    # --- node identity, listeners, sockets, connection limits, topics, metadata log --------------
    node_id: int = setting(
        "node.id",
        ConfigType.INT,
        1,
        "This node's id (Kafka requires it; Strom's single node defaults to 1).",
        validator=at_least(0),
    )
    broker_id: int | None = setting(
        "broker.id",
        ConfigType.INT,
        None,
        "Legacy alias of node.id; if set it must equal node.id.",
        validator=at_least(0),
    )
    process_roles: tuple[str, ...] = setting(
        "process.roles",
        ConfigType.LIST,
        ("broker", "controller"),
        "Roles of this node: broker, controller, or both (combined).",
        validator=subset_of("broker", "controller", allow_empty=False),
    )
    cluster_id: str | None = setting(
        "cluster.id",
        ConfigType.STRING,
        None,
        "Strom's own: the cluster id to format new storage with (Kafka keeps it in "
        "meta.properties); unset means generate one.",
        validator=matches(r"[A-Za-z0-9_\-]{1,64}", "1-64 characters of A-Z a-z 0-9 _ -"),
    )
    broker_rack: str | None = setting(
        "broker.rack", ConfigType.STRING, None, "Rack of this broker."
    )
    replica_selector_class: str | None = setting(
        "replica.selector.class",
        ConfigType.STRING,
        None,
        "How a partition leader picks the replica a consumer should read from (KIP-392): "
        "unset or LeaderSelector (the leader), or RackAwareReplicaSelector (an in-sync replica "
        "on the consumer's client.rack). Other classes are refused.",
        validator=one_of(LEADER_SELECTOR, RACK_AWARE_SELECTOR),
    )
    controller_quorum_voters: tuple[str, ...] = setting(
        "controller.quorum.voters",
        ConfigType.LIST,
        (),
        "The static controller quorum: id@host:port of every voter (empty: a dynamic quorum "
        "found through controller.quorum.bootstrap.servers; with both empty Strom's combined "
        "node is a quorum of itself).",
    )
    controller_quorum_bootstrap_servers: tuple[str, ...] = setting(
        "controller.quorum.bootstrap.servers",
        ConfigType.LIST,
        (),
        "host:port of controllers to discover a dynamic quorum from (KIP-853).",
    )
    controller_quorum_election_timeout_ms: int = setting(
        "controller.quorum.election.timeout.ms",
        ConfigType.INT,
        1000,
        "Time without a leader before a voter starts an election.",
        validator=at_least(1),
    )
    controller_quorum_fetch_timeout_ms: int = setting(
        "controller.quorum.fetch.timeout.ms",
        ConfigType.INT,
        2000,
        "Time without a fetch from the leader before a follower becomes a candidate.",
        validator=at_least(1),
    )
    controller_quorum_election_backoff_max_ms: int = setting(
        "controller.quorum.election.backoff.max.ms",
        ConfigType.INT,
        1000,
        "Longest randomized backoff before a new election.",
        validator=at_least(0),
    )
    controller_quorum_request_timeout_ms: int = setting(
        "controller.quorum.request.timeout.ms",
        ConfigType.INT,
        2000,
        "Time to wait for a quorum request's response.",
        validator=at_least(1),
    )
    controller_socket_timeout_ms: int = setting(
        "controller.socket.timeout.ms",
        ConfigType.INT,
        30000,
        "How long a request a broker sends to the active controller (forwarded admin requests,"
        " AllocateProducerIds) may wait for its response before it is retried.",
        validator=at_least(1),
    )
    controller_quorum_retry_backoff_ms: int = setting(
        "controller.quorum.retry.backoff.ms",
        ConfigType.INT,
        20,
        "Backoff before retrying a failed quorum request.",
        validator=at_least(0),
    )
    controller_quorum_append_linger_ms: int = setting(
        "controller.quorum.append.linger.ms",
        ConfigType.INT,
        25,
        "Accepted for compatibility; ignored (the metadata log's leader does not linger).",
        validator=at_least(0),
    )
    broker_heartbeat_interval_ms: int = setting(
        "broker.heartbeat.interval.ms",
        ConfigType.INT,
        2000,
        "Time between a broker's heartbeats to the controller.",
        validator=at_least(1),
    )
    broker_session_timeout_ms: int = setting(
        "broker.session.timeout.ms",
        ConfigType.INT,
        9000,
        "A broker that has not heartbeated for this long is fenced (its lease expires).",
        validator=at_least(1),
    )
    initial_broker_registration_timeout_ms: int = setting(
        "initial.broker.registration.timeout.ms",
        ConfigType.INT,
        60000,
        "Time a starting broker waits to register with the controller before giving up.",
        validator=at_least(1),
    )
    strom_log_level: str = setting(
        "strom.log.level",
        ConfigType.STRING,
        "INFO",
        "Strom's own: root log level at start (case-insensitive); at runtime, loggers' levels "
        "change with kafka-configs --entity-type broker-loggers.",
        validator=one_of(*LOG_LEVELS, case_sensitive=False),
    )
    metrics_listener: str = setting(
        "metrics.listener",
        ConfigType.STRING,
        "",
        "Strom's own: where to serve Prometheus metrics and the health checks over HTTP, as "
        "http://host:port (empty host = all interfaces, port 0 = any free port); empty = off.",
        validator=METRICS_LISTENER,
    )

    listeners: str = setting(
        "listeners",
        ConfigType.STRING,
        "PLAINTEXT://127.0.0.1:9092",
        "Comma-separated NAME://host:port to bind; empty host = all interfaces, port 0 = "
        "ephemeral (Kafka's default binds PLAINTEXT://:9092). Kafka can add listeners at runtime; "
        "Strom cannot yet, so it is read-only (a change is refused, not stored and ignored).",
    )
    advertised_listeners: str | None = setting(
        "advertised.listeners",
        ConfigType.STRING,
        None,
        "Endpoints told to clients; unset or blank = the non-controller listeners. Read-only, as "
        "in Kafka 4 (a broker's endpoints are part of its registration).",
    )
    listener_security_protocol_map: str = setting(
        "listener.security.protocol.map",
        ConfigType.STRING,
        DEFAULT_PROTOCOL_MAP,
        "Listener name to security protocol. Read-only until listeners can change at runtime.",
    )
    controller_listener_names: str | None = setting(
        "controller.listener.names",
        ConfigType.STRING,
        None,
        "Listener names used by the KRaft controller.",
    )
    inter_broker_listener_name: str | None = setting(
        "inter.broker.listener.name", ConfigType.STRING, None, "Listener used between brokers."
    )
    security_inter_broker_protocol: str = setting(
        "security.inter.broker.protocol",
        ConfigType.STRING,
        "PLAINTEXT",
        "Names the inter-broker listener when inter.broker.listener.name is unset.",
        validator=one_of(*SECURITY_PROTOCOLS),
    )

    socket_send_buffer_bytes: int = setting(
        "socket.send.buffer.bytes",
        ConfigType.INT,
        -1,
        "SO_SNDBUF of accepted sockets; -1 = the OS's (autotuned).",
    )
    socket_receive_buffer_bytes: int = setting(
        "socket.receive.buffer.bytes",
        ConfigType.INT,
        -1,
        "SO_RCVBUF of accepted sockets; -1 = the OS's (autotuned).",
    )
    socket_request_max_bytes: int = setting(
        "socket.request.max.bytes",
        ConfigType.INT,
        104857600,
        "Largest request size accepted.",
        validator=at_least(1),
    )
    socket_listen_backlog_size: int = setting(
        "socket.listen.backlog.size",
        ConfigType.INT,
        50,
        "Accepted for compatibility; ignored (listeners take the OS's largest backlog, somaxconn).",
        validator=at_least(1),
    )
    connections_max_idle_ms: int = setting(
        "connections.max.idle.ms",
        ConfigType.LONG,
        600000,
        "Idle connections are closed after this.",
    )
    max_connections_per_ip: int = setting(
        "max.connections.per.ip",
        ConfigType.INT,
        INT_MAX,
        "Connection limit per client address.",
        validator=at_least(0),
        dynamic=True,
    )
    max_connections_per_ip_overrides: str = setting(
        "max.connections.per.ip.overrides",
        ConfigType.STRING,
        "",
        "Per-host limits as host:count,...",
        validator=matches(
            r"(\s*[^,:\s]+\s*:\s*[0-9]+\s*(,|$))*", "host:count pairs separated by commas"
        ),
        dynamic=True,
    )
    max_connections: int = setting(
        "max.connections",
        ConfigType.INT,
        INT_MAX,
        "Connection limit per broker, and per listener as listener.name.<l>.max.connections "
        "(KIP-402); at a limit the listener stops accepting until a connection closes.",
        validator=at_least(0),
        dynamic=True,
    )
    max_connection_creation_rate: int = setting(
        "max.connection.creation.rate",
        ConfigType.INT,
        INT_MAX,
        "New connections accepted per second at most (KIP-612), per listener as "
        "listener.name.<l>.max.connection.creation.rate; beyond it accepting waits.",
        validator=at_least(0),
    )
    queued_max_request_bytes: int = setting(
        "queued.max.request.bytes",
        ConfigType.LONG,
        268435456,
        "Bytes of requests being read before reading from sockets pauses (-1: no bound).",
    )
    queued_max_requests: int = setting(
        "queued.max.requests",
        ConfigType.INT,
        500,
        "Accepted for compatibility; ignored (no request queue: each connection's requests run "
        "in order in its own task, and queued.max.request.bytes bounds their memory).",
        validator=at_least(1),
    )
    fetch_max_bytes: int = setting(
        "fetch.max.bytes",
        ConfigType.INT,
        57671680,
        "Upper bound of bytes returned for one fetch.",
        validator=at_least(1024),
    )
    max_incremental_fetch_session_cache_slots: int = setting(
        "max.incremental.fetch.session.cache.slots",
        ConfigType.INT,
        1000,
        "Incremental fetch sessions (KIP-227) the broker keeps at most.",
        validator=at_least(0),
    )
    num_network_threads: int = setting(
        "num.network.threads",
        ConfigType.INT,
        3,
        "Accepted for compatibility; ignored (trio).",
        validator=at_least(1),
        dynamic=True,
    )
    num_io_threads: int = setting(
        "num.io.threads",
        ConfigType.INT,
        8,
        "Accepted for compatibility; ignored (trio).",
        validator=at_least(1),
        dynamic=True,
    )
    background_threads: int = setting(
        "background.threads",
        ConfigType.INT,
        10,
        "Accepted for compatibility; ignored (trio).",
        validator=at_least(1),
        dynamic=True,
    )
    auto_create_topics_enable: bool = setting(
        "auto.create.topics.enable",
        ConfigType.BOOLEAN,
        True,
        "Create unknown topics on metadata requests.",
    )
    delete_topic_enable: bool = setting(
        "delete.topic.enable", ConfigType.BOOLEAN, True, "Allow DeleteTopics."
    )

    metadata_log_dir: str | None = setting(
        "metadata.log.dir",
        ConfigType.STRING,
        None,
        "Where the cluster metadata log lives; unset = first log dir.",
    )
    metadata_log_segment_bytes: int = setting(
        "metadata.log.segment.bytes",
        ConfigType.INT,
        1073741824,
        "Segment size of the metadata log.",
        validator=at_least(12),
    )
    metadata_log_segment_ms: int = setting(
        "metadata.log.segment.ms",
        ConfigType.LONG,
        604800000,
        "Accepted for compatibility; ignored (metadata log segments roll by size).",
    )
    metadata_max_retention_bytes: int = setting(
        "metadata.max.retention.bytes",
        ConfigType.LONG,
        104857600,
        "Accepted for compatibility; ignored (the metadata log keeps only what follows its newest "
        "snapshot; a replica further behind fetches the snapshot).",
    )
    metadata_max_retention_ms: int = setting(
        "metadata.max.retention.ms",
        ConfigType.LONG,
        604800000,
        "Accepted for compatibility; ignored (as metadata.max.retention.bytes).",
    )

    # --- logs: data dirs, segments, rolling, flushing, retention ---------------------------------
    # Most are the broker-wide defaults behind a topic key (see `strom.config.topic`),
    # which is why Kafka can change them without a restart.
    log_dir: str = setting(
        "log.dir",
        ConfigType.STRING,
        "./data",
        "Data directory when log.dirs is unset (Kafka's default is /tmp/kafka-logs).",
    )
    log_dirs: str | None = setting(
        "log.dirs", ConfigType.STRING, None, "Comma-separated data directories; wins over log.dir."
    )
    num_partitions: int = setting(
        "num.partitions",
        ConfigType.INT,
        1,
        "Partitions of auto-created topics.",
        validator=at_least(1),
    )
    default_replication_factor: int = setting(
        "default.replication.factor",
        ConfigType.INT,
        1,
        "Replication factor of auto-created topics.",
    )
    num_recovery_threads_per_data_dir: int = setting(
        "num.recovery.threads.per.data.dir",
        ConfigType.INT,
        2,
        "Accepted for compatibility; ignored.",
        validator=at_least(1),
        dynamic=True,
    )
    log_segment_bytes: int = setting(
        "log.segment.bytes",
        ConfigType.INT,
        1073741824,
        "Size at which a segment rolls.",
        validator=at_least(MIN_SEGMENT_BYTES),
        dynamic=True,
    )
    log_roll_ms: int | None = setting(
        "log.roll.ms",
        ConfigType.LONG,
        None,
        "Age at which a segment rolls; wins over log.roll.hours.",
        validator=at_least(1),
        dynamic=True,
    )
    log_roll_hours: int = setting(
        "log.roll.hours",
        ConfigType.INT,
        168,
        "Segment roll age in hours.",
        validator=at_least(1),
        dynamic=True,
    )
    log_roll_jitter_ms: int | None = setting(
        "log.roll.jitter.ms",
        ConfigType.LONG,
        None,
        "Random roll jitter; wins over log.roll.jitter.hours.",
        validator=at_least(0),
        dynamic=True,
    )
    log_roll_jitter_hours: int = setting(
        "log.roll.jitter.hours",
        ConfigType.INT,
        0,
        "Random roll jitter in hours.",
        validator=at_least(0),
        dynamic=True,
    )
    log_index_size_max_bytes: int = setting(
        "log.index.size.max.bytes",
        ConfigType.INT,
        10485760,
        "Maximum offset index size.",
        validator=at_least(4),
        dynamic=True,
    )
    log_index_interval_bytes: int = setting(
        "log.index.interval.bytes",
        ConfigType.INT,
        4096,
        "Bytes between offset index entries.",
        validator=at_least(0),
        dynamic=True,
    )
    log_preallocate: bool = setting(
        "log.preallocate",
        ConfigType.BOOLEAN,
        False,
        "Accepted for compatibility; ignored (segment files grow as they are written).",
        dynamic=True,
    )
    log_segment_delete_delay_ms: int = setting(
        "log.segment.delete.delay.ms",
        ConfigType.LONG,
        60000,
        "Delay before deleting a dropped segment.",
        validator=at_least(0),
        dynamic=True,
    )

    log_flush_interval_messages: int = setting(
        "log.flush.interval.messages",
        ConfigType.LONG,
        LONG_MAX,
        "Messages between fsyncs.",
        validator=at_least(1),
        dynamic=True,
    )
    log_flush_interval_ms: int | None = setting(
        "log.flush.interval.ms",
        ConfigType.LONG,
        None,
        "Time between fsyncs; unset = log.flush.scheduler.interval.ms.",
        validator=at_least(0),
        dynamic=True,
    )
    log_flush_scheduler_interval_ms: int = setting(
        "log.flush.scheduler.interval.ms",
        ConfigType.LONG,
        LONG_MAX,
        "How often the flusher checks logs.",
    )
    log_flush_offset_checkpoint_interval_ms: int = setting(
        "log.flush.offset.checkpoint.interval.ms",
        ConfigType.INT,
        60000,
        "How often the recovery point is checkpointed.",
        validator=at_least(0),
    )
    log_flush_start_offset_checkpoint_interval_ms: int = setting(
        "log.flush.start.offset.checkpoint.interval.ms",
        ConfigType.INT,
        60000,
        "Accepted for compatibility; ignored (log start offsets are checkpointed with the "
        "recovery points, every log.flush.offset.checkpoint.interval.ms).",
        validator=at_least(0),
    )

    log_retention_hours: int = setting(
        "log.retention.hours", ConfigType.INT, 168, "Retention in hours; -1 = unlimited."
    )
    log_retention_minutes: int | None = setting(
        "log.retention.minutes", ConfigType.INT, None, "Retention in minutes; wins over hours."
    )
    log_retention_ms: int | None = setting(
        "log.retention.ms",
        ConfigType.LONG,
        None,
        "Retention in ms; wins over minutes; -1 = unlimited.",
        dynamic=True,
    )
    log_retention_bytes: int = setting(
        "log.retention.bytes",
        ConfigType.LONG,
        -1,
        "Partition size kept; -1 = unlimited.",
        dynamic=True,
    )
    log_retention_check_interval_ms: int = setting(
        "log.retention.check.interval.ms",
        ConfigType.LONG,
        300000,
        "How often retention is enforced.",
        validator=at_least(1),
    )
    log_local_retention_ms: int = setting(
        "log.local.retention.ms",
        ConfigType.LONG,
        -2,
        "Tiered storage local retention; -2 = retention.ms.",
        validator=at_least(-2),
        dynamic=True,
    )
    log_local_retention_bytes: int = setting(
        "log.local.retention.bytes",
        ConfigType.LONG,
        -2,
        "Tiered storage local retention; -2 = retention.bytes.",
        validator=at_least(-2),
        dynamic=True,
    )

    # --- records: size limits, compression, compaction, timestamps -------------------------------
    message_max_bytes: int = setting(
        "message.max.bytes",
        ConfigType.INT,
        1048588,
        "Largest record batch accepted.",
        validator=at_least(0),
        dynamic=True,
    )
    min_insync_replicas: int = setting(
        "min.insync.replicas",
        ConfigType.INT,
        1,
        "Replicas that must ack an acks=all write.",
        validator=at_least(1),
        dynamic=True,
    )
    unclean_leader_election_enable: bool = setting(
        "unclean.leader.election.enable",
        ConfigType.BOOLEAN,
        False,
        "Allow out-of-sync replicas to become leader.",
        dynamic=True,
    )
    auto_leader_rebalance_enable: bool = setting(
        "auto.leader.rebalance.enable",
        ConfigType.BOOLEAN,
        True,
        "The active controller periodically moves leadership back to each partition's "
        "preferred (first) replica when it is in sync and active.",
    )
    leader_imbalance_check_interval_seconds: int = setting(
        "leader.imbalance.check.interval.seconds",
        ConfigType.LONG,
        300,
        "How often the active controller checks for partitions not led by their preferred "
        "replica (and for leaderless partitions an unclean election may serve).",
        validator=at_least(1),
    )
    leader_imbalance_per_broker_percentage: int = setting(
        "leader.imbalance.per.broker.percentage",
        ConfigType.INT,
        10,
        "Accepted and validated; like Kafka's KRaft controller, the rebalance does not use it.",
        validator=at_least(0),
    )
    compression_type: str = setting(
        "compression.type",
        ConfigType.STRING,
        "producer",
        "Codec of stored batches; producer = as sent.",
        validator=one_of(*COMPRESSION_TYPES),
        dynamic=True,
    )
    compression_gzip_level: int = setting(
        "compression.gzip.level",
        ConfigType.INT,
        -1,
        "gzip level when recompressing.",
        validator=GZIP_LEVEL,
        dynamic=True,
    )
    compression_lz4_level: int = setting(
        "compression.lz4.level",
        ConfigType.INT,
        9,
        "lz4 level when recompressing.",
        validator=LZ4_LEVEL,
        dynamic=True,
    )
    compression_zstd_level: int = setting(
        "compression.zstd.level",
        ConfigType.INT,
        3,
        "zstd level when recompressing.",
        validator=ZSTD_LEVEL,
        dynamic=True,
    )

    log_cleanup_policy: tuple[str, ...] = setting(
        "log.cleanup.policy",
        ConfigType.LIST,
        ("delete",),
        "delete and/or compact.",
        validator=subset_of(*CLEANUP_POLICIES),
        dynamic=True,
    )
    log_cleaner_enable: bool = setting(
        "log.cleaner.enable",
        ConfigType.BOOLEAN,
        True,
        "Run the log cleaner (needed for compaction).",
    )
    log_cleaner_threads: int = setting(
        "log.cleaner.threads",
        ConfigType.INT,
        1,
        "Cleaner threads.",
        validator=at_least(0),
        dynamic=True,
    )
    log_cleaner_dedupe_buffer_size: int = setting(
        "log.cleaner.dedupe.buffer.size",
        ConfigType.LONG,
        134217728,
        "Memory for key deduplication.",
        dynamic=True,
    )
    log_cleaner_io_buffer_size: int = setting(
        "log.cleaner.io.buffer.size",
        ConfigType.INT,
        524288,
        "Cleaner I/O buffer.",
        validator=at_least(0),
        dynamic=True,
    )
    log_cleaner_io_buffer_load_factor: float = setting(
        "log.cleaner.io.buffer.load.factor",
        ConfigType.DOUBLE,
        0.9,
        "Dedupe buffer load factor.",
        dynamic=True,
    )
    log_cleaner_io_max_bytes_per_second: float = setting(
        "log.cleaner.io.max.bytes.per.second",
        ConfigType.DOUBLE,
        DOUBLE_MAX,
        "Cleaner I/O throttle.",
        dynamic=True,
    )
    log_cleaner_backoff_ms: int = setting(
        "log.cleaner.backoff.ms",
        ConfigType.LONG,
        15000,
        "Sleep when nothing is cleanable.",
        validator=at_least(0),
        dynamic=True,
    )
    log_cleaner_min_cleanable_ratio: float = setting(
        "log.cleaner.min.cleanable.ratio",
        ConfigType.DOUBLE,
        0.5,
        "Dirty ratio that triggers cleaning.",
        validator=between(0, 1),
        dynamic=True,
    )
    log_cleaner_delete_retention_ms: int = setting(
        "log.cleaner.delete.retention.ms",
        ConfigType.LONG,
        86400000,
        "How long tombstones are kept.",
        validator=at_least(0),
        dynamic=True,
    )
    log_cleaner_min_compaction_lag_ms: int = setting(
        "log.cleaner.min.compaction.lag.ms",
        ConfigType.LONG,
        0,
        "Minimum age before compaction.",
        validator=at_least(0),
        dynamic=True,
    )
    log_cleaner_max_compaction_lag_ms: int = setting(
        "log.cleaner.max.compaction.lag.ms",
        ConfigType.LONG,
        LONG_MAX,
        "Maximum age before compaction.",
        validator=at_least(1),
        dynamic=True,
    )

    log_message_timestamp_type: str = setting(
        "log.message.timestamp.type",
        ConfigType.STRING,
        "CreateTime",
        "CreateTime or LogAppendTime.",
        validator=one_of(*TIMESTAMP_TYPES),
        dynamic=True,
    )
    log_message_timestamp_before_max_ms: int = setting(
        "log.message.timestamp.before.max.ms",
        ConfigType.LONG,
        LONG_MAX,
        "How far in the past a CreateTime timestamp may be.",
        validator=at_least(0),
        dynamic=True,
    )
    log_message_timestamp_after_max_ms: int = setting(
        "log.message.timestamp.after.max.ms",
        ConfigType.LONG,
        3600000,
        "How far in the future a CreateTime timestamp may be (Kafka 4.0: 1 hour).",
        validator=at_least(0),
        dynamic=True,
    )

    # --- coordinators: offsets, groups, transactions, producer ids -------------------------------
    # The internal topics' replication defaults are 1, as in Kafka's shipped single-node
    # server.properties, not Kafka's built-in 3 (which would leave one node without a
    # group coordinator).
    offsets_topic_num_partitions: int = setting(
        "offsets.topic.num.partitions",
        ConfigType.INT,
        50,
        "Partitions of __consumer_offsets.",
        validator=at_least(1),
    )
    offsets_topic_replication_factor: int = setting(
        "offsets.topic.replication.factor",
        ConfigType.SHORT,
        1,
        "Replication of __consumer_offsets (Kafka's built-in default is 3).",
        validator=at_least(1),
    )
    offsets_topic_segment_bytes: int = setting(
        "offsets.topic.segment.bytes",
        ConfigType.INT,
        104857600,
        "Segment size of __consumer_offsets.",
        validator=at_least(1),
    )
    offsets_load_buffer_size: int = setting(
        "offsets.load.buffer.size",
        ConfigType.INT,
        5242880,
        "Accepted for compatibility; ignored.",
        validator=at_least(1),
    )
    offsets_retention_minutes: int = setting(
        "offsets.retention.minutes",
        ConfigType.INT,
        10080,
        "How long committed offsets of empty groups are kept.",
        validator=at_least(1),
    )
    offsets_retention_check_interval_ms: int = setting(
        "offsets.retention.check.interval.ms",
        ConfigType.LONG,
        600000,
        "How often stale offsets expire.",
        validator=at_least(1),
    )
    offsets_commit_timeout_ms: int = setting(
        "offsets.commit.timeout.ms",
        ConfigType.INT,
        5000,
        "Wait for an offset commit to be written.",
        validator=at_least(1),
    )
    offset_metadata_max_bytes: int = setting(
        "offset.metadata.max.bytes", ConfigType.INT, 4096, "Largest metadata string of a commit."
    )

    group_initial_rebalance_delay_ms: int = setting(
        "group.initial.rebalance.delay.ms",
        ConfigType.INT,
        3000,
        "Wait for more members before the first rebalance of an empty group.",
    )
    group_min_session_timeout_ms: int = setting(
        "group.min.session.timeout.ms",
        ConfigType.INT,
        6000,
        "Smallest session timeout a member may ask.",
    )
    group_max_session_timeout_ms: int = setting(
        "group.max.session.timeout.ms",
        ConfigType.INT,
        1800000,
        "Largest session timeout a member may ask.",
    )
    group_max_size: int = setting(
        "group.max.size",
        ConfigType.INT,
        INT_MAX,
        "Members allowed in one group.",
        validator=at_least(1),
    )
    group_coordinator_rebalance_protocols: tuple[str, ...] = setting(
        "group.coordinator.rebalance.protocols",
        ConfigType.LIST,
        ("classic", "consumer"),
        "Enabled group protocols.",
        validator=subset_of("classic", "consumer", "share", allow_empty=False),
    )

    # Defaults and bounds of the group configs (ConfigResource GROUP, `strom.config.group`).
    # They configure KIP-848's consumer, share and streams groups; Strom's groups are all
    # classic, which ignore them, as in Kafka.
    group_consumer_session_timeout_ms: int = setting(
        "group.consumer.session.timeout.ms",
        ConfigType.INT,
        45000,
        "Default of a consumer group's consumer.session.timeout.ms (group config).",
        validator=at_least(1),
    )
    group_consumer_min_session_timeout_ms: int = setting(
        "group.consumer.min.session.timeout.ms",
        ConfigType.INT,
        45000,
        "Smallest consumer.session.timeout.ms a group config may set.",
        validator=at_least(1),
    )
    group_consumer_max_session_timeout_ms: int = setting(
        "group.consumer.max.session.timeout.ms",
        ConfigType.INT,
        60000,
        "Largest consumer.session.timeout.ms a group config may set.",
        validator=at_least(1),
    )
    group_consumer_heartbeat_interval_ms: int = setting(
        "group.consumer.heartbeat.interval.ms",
        ConfigType.INT,
        5000,
        "Default of a consumer group's consumer.heartbeat.interval.ms (group config).",
        validator=at_least(1),
    )
    group_consumer_min_heartbeat_interval_ms: int = setting(
        "group.consumer.min.heartbeat.interval.ms",
        ConfigType.INT,
        5000,
        "Smallest consumer.heartbeat.interval.ms a group config may set.",
        validator=at_least(1),
    )
    group_consumer_max_heartbeat_interval_ms: int = setting(
        "group.consumer.max.heartbeat.interval.ms",
        ConfigType.INT,
        15000,
        "Largest consumer.heartbeat.interval.ms a group config may set.",
        validator=at_least(1),
    )
    group_share_session_timeout_ms: int = setting(
        "group.share.session.timeout.ms",
        ConfigType.INT,
        45000,
        "Default of a share group's share.session.timeout.ms (group config).",
        validator=at_least(1),
    )
    group_share_min_session_timeout_ms: int = setting(
        "group.share.min.session.timeout.ms",
        ConfigType.INT,
        45000,
        "Smallest share.session.timeout.ms a group config may set.",
        validator=at_least(1),
    )
    group_share_max_session_timeout_ms: int = setting(
        "group.share.max.session.timeout.ms",
        ConfigType.INT,
        60000,
        "Largest share.session.timeout.ms a group config may set.",
        validator=at_least(1),
    )
    group_share_heartbeat_interval_ms: int = setting(
        "group.share.heartbeat.interval.ms",
        ConfigType.INT,
        5000,
        "Default of a share group's share.heartbeat.interval.ms (group config).",
        validator=at_least(1),
    )
    group_share_min_heartbeat_interval_ms: int = setting(
        "group.share.min.heartbeat.interval.ms",
        ConfigType.INT,
        5000,
        "Smallest share.heartbeat.interval.ms a group config may set.",
        validator=at_least(1),
    )
    group_share_max_heartbeat_interval_ms: int = setting(
        "group.share.max.heartbeat.interval.ms",
        ConfigType.INT,
        15000,
        "Largest share.heartbeat.interval.ms a group config may set.",
        validator=at_least(1),
    )
    group_share_record_lock_duration_ms: int = setting(
        "group.share.record.lock.duration.ms",
        ConfigType.INT,
        30000,
        "Default of a share group's share.record.lock.duration.ms (group config).",
        validator=at_least(1),
    )
    group_share_min_record_lock_duration_ms: int = setting(
        "group.share.min.record.lock.duration.ms",
        ConfigType.INT,
        15000,
        "Smallest share.record.lock.duration.ms a group config may set.",
        validator=at_least(1),
    )
    group_share_max_record_lock_duration_ms: int = setting(
        "group.share.max.record.lock.duration.ms",
        ConfigType.INT,
        60000,
        "Largest share.record.lock.duration.ms a group config may set.",
        validator=at_least(1),
    )
    group_streams_session_timeout_ms: int = setting(
        "group.streams.session.timeout.ms",
        ConfigType.INT,
        45000,
        "Default of a streams group's streams.session.timeout.ms (group config).",
        validator=at_least(1),
    )
    group_streams_min_session_timeout_ms: int = setting(
        "group.streams.min.session.timeout.ms",
        ConfigType.INT,
        45000,
        "Smallest streams.session.timeout.ms a group config may set.",
        validator=at_least(1),
    )
    group_streams_max_session_timeout_ms: int = setting(
        "group.streams.max.session.timeout.ms",
        ConfigType.INT,
        60000,
        "Largest streams.session.timeout.ms a group config may set.",
        validator=at_least(1),
    )
    group_streams_heartbeat_interval_ms: int = setting(
        "group.streams.heartbeat.interval.ms",
        ConfigType.INT,
        5000,
        "Default of a streams group's streams.heartbeat.interval.ms (group config).",
        validator=at_least(1),
    )
    group_streams_min_heartbeat_interval_ms: int = setting(
        "group.streams.min.heartbeat.interval.ms",
        ConfigType.INT,
        5000,
        "Smallest streams.heartbeat.interval.ms a group config may set.",
        validator=at_least(1),
    )
    group_streams_max_heartbeat_interval_ms: int = setting(
        "group.streams.max.heartbeat.interval.ms",
        ConfigType.INT,
        15000,
        "Largest streams.heartbeat.interval.ms a group config may set.",
        validator=at_least(1),
    )
    group_streams_num_standby_replicas: int = setting(
        "group.streams.num.standby.replicas",
        ConfigType.INT,
        0,
        "Default of a streams group's streams.num.standby.replicas (group config).",
        validator=at_least(0),
    )
    group_streams_max_standby_replicas: int = setting(
        "group.streams.max.standby.replicas",
        ConfigType.INT,
        2,
        "Largest streams.num.standby.replicas a group config may set.",
        validator=at_least(0),
    )

    transaction_state_log_num_partitions: int = setting(
        "transaction.state.log.num.partitions",
        ConfigType.INT,
        50,
        "Partitions of __transaction_state.",
        validator=at_least(1),
    )
    transaction_state_log_replication_factor: int = setting(
        "transaction.state.log.replication.factor",
        ConfigType.SHORT,
        1,
        "Replication of __transaction_state (Kafka's built-in default is 3).",
        validator=at_least(1),
    )
    transaction_state_log_min_isr: int = setting(
        "transaction.state.log.min.isr",
        ConfigType.INT,
        1,
        "min.insync.replicas of __transaction_state (Kafka's built-in default is 2).",
        validator=at_least(1),
    )
    transaction_state_log_segment_bytes: int = setting(
        "transaction.state.log.segment.bytes",
        ConfigType.INT,
        104857600,
        "Segment size of __transaction_state.",
        validator=at_least(1),
    )
    transaction_state_log_load_buffer_size: int = setting(
        "transaction.state.log.load.buffer.size",
        ConfigType.INT,
        5242880,
        "Read size when loading transaction state.",
        validator=at_least(1),
    )
    transactional_id_expiration_ms: int = setting(
        "transactional.id.expiration.ms",
        ConfigType.INT,
        604800000,
        "Idle time after which a transactional id expires.",
        validator=at_least(1),
    )
    transaction_max_timeout_ms: int = setting(
        "transaction.max.timeout.ms",
        ConfigType.INT,
        900000,
        "Largest transaction timeout a producer may ask.",
        validator=at_least(1),
    )
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = setting(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        ConfigType.INT,
        10000,
        "How often timed-out transactions are aborted.",
        validator=at_least(1),
    )
    transaction_remove_expired_transaction_cleanup_interval_ms: int = setting(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        ConfigType.INT,
        3600000,
        "How often expired transactional ids are removed.",
        validator=at_least(1),
    )
    transaction_partition_verification_enable: bool = setting(
        "transaction.partition.verification.enable",
        ConfigType.BOOLEAN,
        True,
        "Verify a partition joined the transaction before accepting transactional writes.",
        dynamic=True,
    )
    producer_id_expiration_ms: int = setting(
        "producer.id.expiration.ms",
        ConfigType.INT,
        86400000,
        "Idle time after which a producer id's state is dropped.",
        validator=at_least(1),
        dynamic=True,
    )
    producer_id_expiration_check_interval_ms: int = setting(
        "producer.id.expiration.check.interval.ms",
        ConfigType.INT,
        600000,
        "How often idle producer ids are expired.",
        validator=at_least(1),
    )
    controlled_shutdown_enable: bool = setting(
        "controlled.shutdown.enable", ConfigType.BOOLEAN, True,
        "On SIGTERM a cluster broker first asks the controller to move its leaderships away "
        "and stops only once told it may (at most 5 minutes, Kafka's shutdown bound).",
    )  # fmt: skip
    replica_lag_time_max_ms: int = setting(
        "replica.lag.time.max.ms", ConfigType.LONG, 30000, "Followers lagging longer leave the ISR."
    )
    replica_fetch_max_bytes: int = setting(
        "replica.fetch.max.bytes", ConfigType.INT, 1048576,
        "A follower's fetch size per partition (a larger first batch still comes whole).",
        validator=at_least(0),
    )  # fmt: skip
    replica_fetch_response_max_bytes: int = setting(
        "replica.fetch.response.max.bytes", ConfigType.INT, 10485760,
        "A follower's fetch size for the whole response.",
        validator=at_least(0),
    )  # fmt: skip
    replica_fetch_wait_max_ms: int = setting(
        "replica.fetch.wait.max.ms", ConfigType.INT, 500,
        "How long a follower's fetch may wait at the leader for new data.",
        validator=at_least(0),
    )  # fmt: skip
    replica_fetch_min_bytes: int = setting(
        "replica.fetch.min.bytes", ConfigType.INT, 1,
        "How many bytes a follower's fetch waits for at the leader.",
        validator=at_least(1),
    )  # fmt: skip
    replica_fetch_backoff_ms: int = setting(
        "replica.fetch.backoff.ms", ConfigType.INT, 1000,
        "How long a follower waits after a failed fetch from its leader.",
        validator=at_least(0),
    )  # fmt: skip

    # --- security: TLS (the ssl.* keys, each also per listener as listener.name.<l>.ssl.*) ---------
    # Kafka's names and defaults. The keystore and truststore keys can change at runtime for one
    # broker (a certificate rotation: AlterConfigs reloads them); Strom reads PEM and PKCS12
    # stores (KIP-651 PEM, inline or in files), not JKS. See docs/security.md.
    ssl_protocol: str = setting(
        "ssl.protocol", ConfigType.STRING, "TLSv1.3",
        "The TLS protocol family of the SSL context; ssl.enabled.protocols says which versions "
        "are negotiated.",
        validator=one_of("TLSv1.3", "TLSv1.2", "TLS"),
    )  # fmt: skip
    ssl_enabled_protocols: tuple[str, ...] = setting(
        "ssl.enabled.protocols", ConfigType.LIST, ("TLSv1.2", "TLSv1.3"),
        "TLS versions a listener accepts (TLSv1 and TLSv1.1 are refused: OpenSSL and Java "
        "disable them as insecure).",
        validator=subset_of("TLSv1.2", "TLSv1.3", allow_empty=False),
        dynamic=True,
    )  # fmt: skip
    ssl_cipher_suites: tuple[str, ...] = setting(
        "ssl.cipher.suites", ConfigType.LIST, (),
        "TLS 1.2 cipher suites, by their IANA (Java) or OpenSSL names; empty: OpenSSL's secure "
        "defaults. TLS 1.3 suites are always OpenSSL's (all AEAD).",
        dynamic=True,
    )  # fmt: skip
    ssl_keystore_type: str = setting(
        "ssl.keystore.type", ConfigType.STRING, "JKS",
        "PEM or PKCS12 (JKS, Kafka's default, cannot be read by Strom: convert it with keytool "
        "-importkeystore -deststoretype PKCS12).",
        validator=one_of("JKS", "PKCS12", "PEM", case_sensitive=False),
        dynamic=True,
    )  # fmt: skip
    ssl_keystore_location: str | None = setting(
        "ssl.keystore.location", ConfigType.STRING, None,
        "The key store file: this listener's certificate chain and private key.",
        dynamic=True,
    )  # fmt: skip
    ssl_keystore_password: str | None = setting(
        "ssl.keystore.password", ConfigType.PASSWORD, None,
        "Password of a PKCS12 key store (of a PEM file's key: ssl.key.password).",
        dynamic=True,
    )  # fmt: skip
    ssl_key_password: str | None = setting(
        "ssl.key.password", ConfigType.PASSWORD, None,
        "Password of the private key (an encrypted PEM key).",
        dynamic=True,
    )  # fmt: skip
    ssl_keystore_key: str | None = setting(
        "ssl.keystore.key", ConfigType.PASSWORD, None,
        "The private key itself, in PEM (PKCS#8, possibly encrypted with ssl.key.password); "
        "needs ssl.keystore.type=PEM and ssl.keystore.certificate.chain (KIP-651).",
        dynamic=True,
    )  # fmt: skip
    ssl_keystore_certificate_chain: str | None = setting(
        "ssl.keystore.certificate.chain", ConfigType.PASSWORD, None,
        "The certificate chain itself, in PEM (KIP-651).",
        dynamic=True,
    )  # fmt: skip
    ssl_truststore_type: str = setting(
        "ssl.truststore.type", ConfigType.STRING, "JKS",
        "PEM or PKCS12 (JKS cannot be read by Strom).",
        validator=one_of("JKS", "PKCS12", "PEM", case_sensitive=False),
        dynamic=True,
    )  # fmt: skip
    ssl_truststore_location: str | None = setting(
        "ssl.truststore.location", ConfigType.STRING, None,
        "The trust store file: the CA certificates client certificates (and peers) are checked "
        "against; unset: the system's CA certificates.",
        dynamic=True,
    )  # fmt: skip
    ssl_truststore_password: str | None = setting(
        "ssl.truststore.password", ConfigType.PASSWORD, None, "Password of a PKCS12 trust store.",
        dynamic=True,
    )  # fmt: skip
    ssl_truststore_certificates: str | None = setting(
        "ssl.truststore.certificates", ConfigType.PASSWORD, None,
        "Trusted certificates themselves, in PEM (KIP-651); needs ssl.truststore.type=PEM.",
        dynamic=True,
    )  # fmt: skip
    ssl_client_auth: str = setting(
        "ssl.client.auth", ConfigType.STRING, "none",
        "required: a client must present a certificate its trust store accepts (mTLS); "
        "requested: a certificate is asked for and checked if sent; none: not asked for.",
        validator=one_of("required", "requested", "none"),
        dynamic=True,
    )  # fmt: skip
    ssl_endpoint_identification_algorithm: str | None = setting(
        "ssl.endpoint.identification.algorithm", ConfigType.STRING, "https",
        "https: a node connecting to another over TLS checks the peer certificate's host name; "
        "empty: it does not.",
        validator=one_of("https", ""),
        dynamic=True,
    )  # fmt: skip
    ssl_principal_mapping_rules: str = setting(
        "ssl.principal.mapping.rules", ConfigType.STRING, "DEFAULT",
        "Rules mapping a client certificate's distinguished name to a user name: "
        "RULE:pattern/replacement/[LU], ..., DEFAULT (the whole name).",
    )  # fmt: skip
    ssl_keymanager_algorithm: str = setting(
        "ssl.keymanager.algorithm", ConfigType.STRING, "SunX509",
        "Accepted for compatibility; ignored (a JVM setting).",
        dynamic=True,
    )  # fmt: skip
    ssl_trustmanager_algorithm: str = setting(
        "ssl.trustmanager.algorithm", ConfigType.STRING, "PKIX",
        "Accepted for compatibility; ignored (a JVM setting).",
        dynamic=True,
    )  # fmt: skip
    ssl_secure_random_implementation: str | None = setting(
        "ssl.secure.random.implementation", ConfigType.STRING, None,
        "Accepted for compatibility; ignored (OpenSSL's random generator is used).",
        dynamic=True,
    )  # fmt: skip
    ssl_provider: str | None = setting(
        "ssl.provider", ConfigType.STRING, None, "Accepted for compatibility; ignored (a JVM setting)."
    )
    ssl_engine_factory_class: str | None = setting(
        "ssl.engine.factory.class", ConfigType.CLASS, None,
        "A custom Java SSL engine factory: cannot run in Strom; must be unset.",
        validator=Validator("unset (a Java class cannot run in Strom)", lambda v: not v),
    )  # fmt: skip
    ssl_allow_dn_changes: bool = setting(
        "ssl.allow.dn.changes", ConfigType.BOOLEAN, False,
        "Whether a reloaded key store may carry a certificate with another distinguished name.",
    )  # fmt: skip
    ssl_allow_san_changes: bool = setting(
        "ssl.allow.san.changes", ConfigType.BOOLEAN, False,
        "Whether a reloaded key store may carry a certificate with other subject alternative "
        "names.",
    )  # fmt: skip

    # --- security: SASL (sasl.*, per listener and per mechanism: listener.name.<l>.<mech>.sasl.*) -
    sasl_enabled_mechanisms: tuple[str, ...] = setting(
        "sasl.enabled.mechanisms", ConfigType.LIST, ("GSSAPI",),
        "Mechanisms a SASL listener offers: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER "
        "(GSSAPI, Kafka's default, is Kerberos, which Strom refuses: set this key).",
        validator=subset_of(*SASL_MECHANISMS),
    )  # fmt: skip
    sasl_mechanism_inter_broker_protocol: str = setting(
        "sasl.mechanism.inter.broker.protocol", ConfigType.STRING, "GSSAPI",
        "The mechanism a broker authenticates with to another broker's SASL listener.",
        validator=one_of(*SASL_MECHANISMS),
    )  # fmt: skip
    sasl_mechanism_controller_protocol: str = setting(
        "sasl.mechanism.controller.protocol", ConfigType.STRING, "GSSAPI",
        "The mechanism a node authenticates with to a controller's SASL listener.",
        validator=one_of(*SASL_MECHANISMS),
    )  # fmt: skip
    sasl_jaas_config: str | None = setting(
        "sasl.jaas.config", ConfigType.PASSWORD, None,
        "The JAAS login module of a mechanism on a listener, given as "
        "listener.name.<listener>.<mechanism>.sasl.jaas.config: its users (PLAIN user_<name>), "
        "and the user this node authenticates as to others (username, password).",
    )  # fmt: skip
    sasl_server_callback_handler_class: str | None = setting(
        "sasl.server.callback.handler.class", ConfigType.CLASS, None,
        "OAUTHBEARER only: " + OAUTH_VALIDATOR + " validates signed JWTs against "
        "sasl.oauthbearer.jwks.endpoint.url (KIP-768); unset: unsecured tokens (development). "
        "Other classes are refused.",
        validator=one_of(OAUTH_VALIDATOR, OAUTH_VALIDATOR_3X),
    )  # fmt: skip
    sasl_client_callback_handler_class: str | None = setting(
        "sasl.client.callback.handler.class", ConfigType.CLASS, None,
        "A Java callback class: cannot run in Strom; must be unset.",
        validator=Validator("unset (a Java class cannot run in Strom)", lambda v: not v),
    )  # fmt: skip
    sasl_login_class: str | None = setting(
        "sasl.login.class", ConfigType.CLASS, None,
        "A Java login class: cannot run in Strom; must be unset.",
        validator=Validator("unset (a Java class cannot run in Strom)", lambda v: not v),
    )  # fmt: skip
    sasl_login_callback_handler_class: str | None = setting(
        "sasl.login.callback.handler.class", ConfigType.CLASS, None,
        "A Java login callback class: cannot run in Strom; must be unset.",
        validator=Validator("unset (a Java class cannot run in Strom)", lambda v: not v),
    )  # fmt: skip
    sasl_server_max_receive_size: int = setting(
        "sasl.server.max.receive.size", ConfigType.INT, 524288,
        "Largest frame accepted before a connection has authenticated.",
        validator=at_least(1),
    )  # fmt: skip
    connections_max_reauth_ms: int = setting(
        "connections.max.reauth.ms", ConfigType.LONG, 0,
        "A SASL session's longest life: the client must re-authenticate on the same connection "
        "before it ends or the connection is closed (KIP-368); 0: sessions never expire.",
        validator=at_least(0),
    )  # fmt: skip
    connection_failed_authentication_delay_ms: int = setting(
        "connection.failed.authentication.delay.ms", ConfigType.INT, 100,
        "How long a connection that failed to authenticate is held before it is closed.",
        validator=at_least(0),
    )  # fmt: skip
    sasl_oauthbearer_jwks_endpoint_url: str | None = setting(
        "sasl.oauthbearer.jwks.endpoint.url", ConfigType.STRING, None,
        "Where the keys that sign OAUTHBEARER tokens are: an https:// URL or a file: URL.",
    )  # fmt: skip
    sasl_oauthbearer_jwks_endpoint_refresh_ms: int = setting(
        "sasl.oauthbearer.jwks.endpoint.refresh.ms", ConfigType.LONG, 3600000,
        "How often the JWKS is fetched again.", validator=at_least(1),
    )  # fmt: skip
    sasl_oauthbearer_expected_audience: tuple[str, ...] = setting(
        "sasl.oauthbearer.expected.audience", ConfigType.LIST, (),
        "Audiences a token must name one of (empty: not checked).",
    )  # fmt: skip
    sasl_oauthbearer_expected_issuer: str | None = setting(
        "sasl.oauthbearer.expected.issuer", ConfigType.STRING, None,
        "The issuer a token must name (unset: not checked).",
    )  # fmt: skip
    sasl_oauthbearer_scope_claim_name: str = setting(
        "sasl.oauthbearer.scope.claim.name", ConfigType.STRING, "scope", "The claim holding the scopes."
    )
    sasl_oauthbearer_sub_claim_name: str = setting(
        "sasl.oauthbearer.sub.claim.name", ConfigType.STRING, "sub", "The claim naming the principal."
    )
    sasl_oauthbearer_clock_skew_seconds: int = setting(
        "sasl.oauthbearer.clock.skew.seconds", ConfigType.INT, 30,
        "Clock difference allowed when checking a token's times.", validator=at_least(0),
    )  # fmt: skip
    authorizer_class_name: str = setting(
        "authorizer.class.name", ConfigType.STRING, "",
        "The authorizer: " + STANDARD_AUTHORIZER + " (ACLs in the metadata log, Kafka's "
        "StandardAuthorizer semantics), or empty for none (every request allowed). Other "
        "classes are refused.",
        validator=one_of("", STANDARD_AUTHORIZER),
    )  # fmt: skip
    super_users: str = setting(
        "super.users", ConfigType.STRING, "",
        "Principals allowed everything whatever the ACLs, separated by semicolons "
        "(User:admin;User:broker).",
    )  # fmt: skip
    allow_everyone_if_no_acl_found: bool = setting(
        "allow.everyone.if.no.acl.found", ConfigType.BOOLEAN, False,
        "Whether a resource no ACL mentions is open to everyone (false: only super users).",
    )  # fmt: skip
    principal_builder_class: str | None = setting(
        "principal.builder.class", ConfigType.CLASS, DEFAULT_PRINCIPAL_BUILDER,
        "How a connection's principal is built: only Kafka's default builder "
        "(User:<SASL name>, User:<certificate name> mapped by ssl.principal.mapping.rules, "
        "else User:ANONYMOUS).",
        validator=one_of(DEFAULT_PRINCIPAL_BUILDER),
    )  # fmt: skip

    # --- what the configuration itself records, and what it derives ------------------------------

    explicit_keys: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    """Keys set in the file or overrides (DescribeConfigs reports them as STATIC_BROKER_CONFIG)."""
    ignored_settings: tuple[tuple[str, str], ...] = field(default=(), compare=False, repr=False)
    """Accepted-but-unused Kafka keys, verbatim, in the order given."""
    listener_settings: tuple[tuple[str, ConfigValue], ...] = field(default=(), repr=False)
    """Security keys given for one listener (`listener.name.<listener>.ssl.keystore.location`,
    ...), by full key, parsed with their base key's type (`strom.config.security`)."""

    def __post_init__(self) -> None:
        check_fields(self)
        _check_cross_key_rules(self)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        """Build from string properties, as read from a file plus overrides."""
        values: dict[str, Any] = {}
        ignored: list[tuple[str, str]] = []
        per_listener = parse_listener_settings(
            props, BROKER_KEYS, _listener_names(props.get("listeners"))
        )
        for key, raw in props.items():
            refuse_security_key(key)
            spec = BROKER_KEYS.get(key)
            if spec is not None:
                values[spec.attr] = parse_value(key, spec.type, raw)
            elif key in per_listener:
                continue
            elif is_ignored(key):
                ignored.append((key, raw))
            else:
                raise ConfigError.unknown(key)
        explicit = frozenset(key for key in props if key in BROKER_KEYS)
        return cls(
            **values,
            explicit_keys=explicit,
            ignored_settings=tuple(ignored),
            listener_settings=tuple(sorted(per_listener.items())),
        )

    def get(self, key: str) -> ConfigValue:
        """The configured value of a Kafka key (None if unset and without default)."""
        if key not in BROKER_KEYS:
            raise ConfigError.unknown(key)
        value: ConfigValue = getattr(self, attr_name(key))
        return value

    def is_explicit(self, key: str) -> bool:
        """Whether the key was configured rather than left at its default."""
        return key in self.explicit_keys or self.get(key) != BROKER_KEYS[key].default

    @cached_property
    def roles(self) -> frozenset[str]:
        """process.roles as a set."""
        return frozenset(self.process_roles)

    @cached_property
    def data_dirs(self) -> tuple[str, ...]:
        """The effective data directories: log.dirs if set, else log.dir."""
        if self.log_dirs is not None and self.log_dirs.strip():
            return tuple(split_list(self.log_dirs))
        return (self.log_dir,)

    @cached_property
    def metadata_dir(self) -> str:
        """metadata.log.dir, defaulting to the first data directory as in Kafka."""
        return self.metadata_log_dir or self.data_dirs[0]

    @cached_property
    def connections_per_ip_overrides(self) -> Mapping[str, int]:
        """max.connections.per.ip.overrides as host (an address or a name) -> limit."""
        overrides: dict[str, int] = {}
        for entry in split_list(self.max_connections_per_ip_overrides):
            host, _, count = entry.rpartition(":")
            overrides[host.strip()] = int(count)
        return MappingProxyType(overrides)

    @cached_property
    def retention_ms(self) -> int:
        """Effective log retention: log.retention.ms > minutes > hours; any negative is -1."""
        if self.log_retention_ms is not None:
            millis = self.log_retention_ms
        elif self.log_retention_minutes is not None:
            millis = self.log_retention_minutes * _MINUTE_MS
        else:
            millis = self.log_retention_hours * _HOUR_MS
        return -1 if millis < 0 else millis

    @cached_property
    def roll_ms(self) -> int:
        """Effective segment roll age: log.roll.ms > log.roll.hours."""
        return self.log_roll_ms if self.log_roll_ms is not None else self.log_roll_hours * _HOUR_MS

    @cached_property
    def roll_jitter_ms(self) -> int:
        """Effective roll jitter: log.roll.jitter.ms > log.roll.jitter.hours."""
        if self.log_roll_jitter_ms is not None:
            return self.log_roll_jitter_ms
        return self.log_roll_jitter_hours * _HOUR_MS

    @cached_property
    def flush_interval_ms(self) -> int:
        """Effective flush interval: log.flush.interval.ms > log.flush.scheduler.interval.ms."""
        if self.log_flush_interval_ms is not None:
            return self.log_flush_interval_ms
        return self.log_flush_scheduler_interval_ms

    @cached_property
    def offsets_retention_ms(self) -> int:
        """offsets.retention.minutes in milliseconds."""
        return self.offsets_retention_minutes * _MINUTE_MS

    @cached_property
    def python_log_level(self) -> int:
        """strom.log.level as a `logging` level number (TRACE is 5)."""
        name = self.strom_log_level.upper()
        return _PY_LEVELS.get(name) or logging.getLevelNamesMapping()[name]

    @cached_property
    def metrics_endpoint(self) -> tuple[str, int] | None:
        """metrics.listener as (host, port); None when metrics are off."""
        return parse_metrics_listener(self.metrics_listener)

    @cached_property
    def listener_endpoints(self) -> tuple[Listener, ...]:
        """The listeners to bind, in configured order."""
        return tuple(parse_listeners(self.listeners, "listeners"))

    @cached_property
    def controller_listeners(self) -> tuple[str, ...]:
        """controller.listener.names, upper-cased."""
        names = self.controller_listener_names or ""
        return tuple(parse_listener_names(names, "controller.listener.names"))

    @cached_property
    def advertised_all(self) -> tuple[Listener, ...]:
        """advertised.listeners, else listeners: every advertised endpoint, controller ones too."""
        if self.advertised_listeners is not None and self.advertised_listeners.strip():
            return tuple(parse_listeners(self.advertised_listeners, "advertised.listeners"))
        return self.listener_endpoints

    @cached_property
    def advertised_endpoints(self) -> tuple[Listener, ...]:
        """What clients are told: the advertised endpoints that are not controller listeners.

        An empty host or port 0 here is for the server to fill in (its hostname, the bound port).
        """
        names = set(self.controller_listeners)
        return tuple(e for e in self.advertised_all if e.name not in names)

    @cached_property
    def advertised_controller_endpoints(self) -> tuple[Listener, ...]:
        """What other nodes reach this controller on (KIP-853): advertised controller listeners."""
        names = set(self.controller_listeners)
        return tuple(e for e in self.advertised_all if e.name in names)

    @cached_property
    def protocol_map(self) -> Mapping[str, str]:
        """Listener name -> security protocol; unmapped controller listeners are PLAINTEXT
        when the map is left at its default, as Kafka does in KRaft mode."""
        mapping = parse_protocol_map(self.listener_security_protocol_map)
        if self.listener_security_protocol_map == DEFAULT_PROTOCOL_MAP:
            for name in self.controller_listeners:
                mapping.setdefault(name, "PLAINTEXT")
        return mapping

    @cached_property
    def inter_broker_listener(self) -> str:
        """inter.broker.listener.name, else the listener named after
        security.inter.broker.protocol, else (Strom's leniency) the first advertised one."""
        if self.inter_broker_listener_name is not None:
            return self.inter_broker_listener_name.strip().upper()
        names = [e.name for e in self.advertised_endpoints]
        wanted = self.security_inter_broker_protocol
        return wanted if wanted in names or not names else names[0]

    @cached_property
    def controller_endpoints(self) -> tuple[Listener, ...]:
        """The listeners named in controller.listener.names (this node's quorum ports)."""
        names = set(self.controller_listeners)
        return tuple(e for e in self.listener_endpoints if e.name in names)

    @cached_property
    def quorum_voters(self) -> Mapping[int, Address]:
        """controller.quorum.voters as {node id: (host, port)} (empty: none configured)."""
        return MappingProxyType(parse_voters(self.controller_quorum_voters))

    @cached_property
    def quorum_bootstrap_servers(self) -> tuple[Address, ...]:
        """controller.quorum.bootstrap.servers as (host, port) pairs."""
        return parse_bootstrap_servers(self.controller_quorum_bootstrap_servers)

    @cached_property
    def standalone(self) -> bool:
        """No quorum configured: Strom's combined node is a one-node quorum of itself."""
        return not self.quorum_voters and not self.quorum_bootstrap_servers

    @cached_property
    def runs_quorum(self) -> bool:
        """A member of a multi-node Raft quorum (see `strom.config.quorum.runs_quorum`)."""
        return runs_quorum(roles=self.roles, voters=self.quorum_voters)

    def multi_node_refusal(self) -> str | None:
        """Why this configuration needs what Strom cannot run yet, a dynamic quorum (None: it
        can start). The broker refuses to start with this message."""
        return multi_node_refusal(
            node_id=self.node_id,
            roles=self.roles,
            voters=self.quorum_voters,
            bootstrap_servers=self.quorum_bootstrap_servers,
            controller_listeners=self.controller_endpoints,
        )

    def security_protocol(self, listener_name: str) -> str:
        """The security protocol of a listener (names are case-insensitive)."""
        return self.protocol_map[listener_name.upper()]

    @cached_property
    def listener_settings_map(self) -> Mapping[str, ConfigValue]:
        """`listener_settings` by full key."""
        return MappingProxyType(dict(self.listener_settings))

    def listener_value(self, listener: str, key: str, mechanism: str | None = None) -> ConfigValue:
        """`key` as it applies on `listener` (for SASL `mechanism`): the listener-prefixed
        value if one is set, else the broker-wide one (`strom.config.security`)."""
        return listener_value(
            self.listener_settings_map, self.get(key), listener, key, mechanism
        )

    def ssl_settings(self, listener: str) -> SslSettings:
        """The ssl.* values `listener` runs with (whatever its protocol)."""
        values: dict[str, Any] = {
            field: self.listener_value(listener, key) for field, key in SSL_SETTING_KEYS.items()
        }
        return SslSettings(listener=listener.upper(), **values)

    def uses_tls(self, listener: str) -> bool:
        """Whether `listener`'s security protocol is SSL or SASL_SSL."""
        return self.protocol_map.get(listener.upper(), "PLAINTEXT").endswith("SSL")


# --- rules spanning several keys (each reads derived values; every error names the key) ----------


def _listener_names(listeners: str | None) -> list[str]:
    """The listener names of a `listeners` value (none when it does not parse: the field's own
    check reports that)."""
    try:
        return [e.name for e in parse_listeners(listeners or "")]
    except ConfigError:
        return []


_GROUP_BOUND = re.compile(r"group\.(consumer|share|streams)\.(min|max)(\..+)")
"""A bound of a group config's default: group.<protocol>.min|max.<setting> (Kafka checks
each default against its bounds at start-up; group.streams.max.standby.replicas bounds
group.streams.num.standby.replicas only through `strom.config.group`)."""


def _check_cross_key_rules(cfg: BrokerConfig) -> None:
    """Rules spanning several keys, each error naming the key to change."""
    if cfg.broker_id is not None and cfg.broker_id != cfg.node_id:
        raise ConfigError.invalid(
            "broker.id", cfg.broker_id, f"the same value as node.id ({cfg.node_id})"
        )
    _check_listeners(cfg)
    _check_quorum(cfg)
    for listener in cfg.listener_endpoints:  # the rules of every listener parse
        rules = cfg.listener_value(listener.name, "ssl.principal.mapping.rules")
        key = "ssl.principal.mapping.rules"
        if rules != cfg.ssl_principal_mapping_rules:
            key = f"listener.name.{listener.name.lower()}.{key}"
        parse_principal_mapping_rules(str(rules), key)
        protocol = cfg.protocol_map.get(listener.name, "PLAINTEXT")
        if protocol.startswith("SASL_"):
            check_sasl_listener(listener.name, partial(cfg.listener_value, listener.name))
    _check_node_mechanisms(cfg)
    explicit_pool = "queued.max.request.bytes" in cfg.explicit_keys
    if explicit_pool and 0 < cfg.queued_max_request_bytes < cfg.socket_request_max_bytes:
        raise ConfigError.invalid(
            "queued.max.request.bytes",
            cfg.queued_max_request_bytes,
            f"-1, or at least socket.request.max.bytes ({cfg.socket_request_max_bytes})",
        )
    if not all(d.strip() for d in cfg.data_dirs):
        raise ConfigError.invalid("log.dirs", cfg.log_dirs, "non-empty comma-separated directories")
    if cfg.retention_ms == 0:
        key = next(
            k
            for k in ("log.retention.ms", "log.retention.minutes", "log.retention.hours")
            if cfg.get(k) is not None
        )
        raise ConfigError.invalid(key, 0, "-1 (unlimited) or a positive retention")
    if cfg.log_cleaner_min_compaction_lag_ms > cfg.log_cleaner_max_compaction_lag_ms:
        raise ConfigError.invalid(
            "log.cleaner.min.compaction.lag.ms",
            cfg.log_cleaner_min_compaction_lag_ms,
            "at most log.cleaner.max.compaction.lag.ms",
        )
    if "classic" not in cfg.group_coordinator_rebalance_protocols:
        raise ConfigError.invalid(
            "group.coordinator.rebalance.protocols",
            cfg.group_coordinator_rebalance_protocols,
            "a list including classic",
        )
    for key in BROKER_KEYS:
        bound = _GROUP_BOUND.fullmatch(key)
        if bound is None or ("group." + bound[1] + bound[3]) not in BROKER_KEYS:
            continue
        default_key = "group." + bound[1] + bound[3]
        default: int = getattr(cfg, attr_name(default_key))
        limit: int = getattr(cfg, attr_name(key))
        if (default < limit) if bound[2] == "min" else (default > limit):
            relation = "at least" if bound[2] == "min" else "at most"
            raise ConfigError.invalid(default_key, default, f"{relation} {key} ({limit})")


def _check_node_mechanisms(cfg: BrokerConfig) -> None:
    """The mechanism a node authenticates with to a SASL inter-broker or controller listener
    must be enabled there, with a JAAS entry that names who this node is (Kafka checks the
    inter-broker one at start-up)."""
    wanted = [
        (cfg.inter_broker_listener, "sasl.mechanism.inter.broker.protocol",
         cfg.sasl_mechanism_inter_broker_protocol),
    ]  # fmt: skip
    if cfg.controller_listeners:
        wanted.append((cfg.controller_listeners[0], "sasl.mechanism.controller.protocol",
                       cfg.sasl_mechanism_controller_protocol))  # fmt: skip
    for listener, key, mechanism in wanted:
        if not cfg.protocol_map.get(listener, "PLAINTEXT").startswith("SASL_"):
            continue
        enabled = cfg.listener_value(listener, "sasl.enabled.mechanisms")
        assert isinstance(enabled, tuple)
        if mechanism not in enabled:
            raise ConfigError(
                key,
                f"{key}={mechanism} must be included in sasl.enabled.mechanisms of listener "
                f"{listener} ({','.join(enabled)}), which nodes authenticate to",
            )
        check_client_jaas(listener, mechanism, partial(cfg.listener_value, listener))


def _check_listeners(cfg: BrokerConfig) -> None:
    """Kafka's listener rules, relaxed where a combined single process needs no quorum port."""
    endpoints = cfg.listener_endpoints
    names = {e.name for e in endpoints}
    if not endpoints:
        raise ConfigError.invalid("listeners", cfg.listeners, "at least one listener")
    bound = [(e.host, e.port) for e in endpoints if e.port != 0]
    if len(bound) != len(set(bound)):
        raise ConfigError.invalid("listeners", cfg.listeners, "a distinct host:port per listener")
    for name in names:
        if name not in cfg.protocol_map:
            raise ConfigError.invalid(
                "listener.security.protocol.map",
                cfg.listener_security_protocol_map,
                f"a security protocol for listener {name}",
            )
        refuse_security_protocol("listeners", name, cfg.protocol_map[name])
    if "security.inter.broker.protocol" in cfg.explicit_keys:
        refuse_security_protocol(
            "security.inter.broker.protocol", "(inter-broker)", cfg.security_inter_broker_protocol
        )
    controllers = set(cfg.controller_listeners)
    if controllers and "controller" in cfg.roles and not controllers & names:
        raise ConfigError.invalid(
            "controller.listener.names",
            cfg.controller_listener_names,
            "at least one name that appears in listeners",
        )
    if "controller" not in cfg.roles and controllers & names:
        raise ConfigError.invalid(
            "controller.listener.names",
            cfg.controller_listener_names,
            "no name that appears in listeners when process.roles is broker only",
        )
    _check_advertised(cfg, names, controllers)


def _check_advertised(cfg: BrokerConfig, names: set[str], controllers: set[str]) -> None:
    """Advertised endpoints must be routable, known listeners; the inter-broker one must exist."""
    for endpoint in cfg.advertised_all:
        if endpoint.name not in names:
            raise ConfigError.invalid(
                "advertised.listeners",
                cfg.advertised_listeners,
                f"listener names that appear in listeners ({endpoint.name} does not)",
            )
        if endpoint.host == "0.0.0.0":
            raise ConfigError.invalid(
                "advertised.listeners",
                cfg.advertised_listeners or cfg.listeners,
                "routable addresses, not the meta-address 0.0.0.0 "
                "(when unset it defaults to listeners)",
            )
    advertised_names = {e.name for e in cfg.advertised_endpoints}
    if cfg.inter_broker_listener_name is None:
        wanted = cfg.security_inter_broker_protocol
        explicit = "security.inter.broker.protocol" in cfg.explicit_keys
        if explicit and "broker" in cfg.roles and wanted not in advertised_names:
            raise ConfigError.invalid(
                "security.inter.broker.protocol",
                wanted,
                "the name of a listener in advertised.listeners (or set inter.broker.listener.name)",
            )
        return
    if "security.inter.broker.protocol" in cfg.explicit_keys:
        raise ConfigError.invalid(
            "inter.broker.listener.name",
            cfg.inter_broker_listener_name,
            "to be unset when security.inter.broker.protocol is set (only one of them)",
        )
    name = cfg.inter_broker_listener
    if name in controllers or ("broker" in cfg.roles and name not in advertised_names):
        raise ConfigError.invalid(
            "inter.broker.listener.name",
            cfg.inter_broker_listener_name,
            "a non-controller listener name that appears in advertised.listeners",
        )


def _check_quorum(cfg: BrokerConfig) -> None:
    """Kafka's KRaft rules for roles, voters and controller listeners (KafkaConfig's
    validateKraft*Config), with Strom's one exception: a combined node with neither voters nor
    bootstrap servers is a one-node quorum of itself and needs no controller listener."""
    voters, bootstrap, roles = cfg.quorum_voters, cfg.quorum_bootstrap_servers, cfg.roles
    controllers = set(cfg.controller_listeners)
    names = {e.name for e in cfg.listener_endpoints}
    shown_voters = "{" + ", ".join(map(str, sorted(voters))) + "}"
    roles_text = ",".join(cfg.process_roles)
    if not voters and not bootstrap and roles != {"broker", "controller"}:
        raise ConfigError(
            VOTERS_KEY,
            f"If using process.roles={roles_text}, either {BOOTSTRAP_KEY} must contain the set "
            f"of bootstrap controllers or {VOTERS_KEY} must contain a parseable set of controllers",
        )
    if "controller" in roles:
        if voters and cfg.node_id not in voters:
            raise ConfigError(
                VOTERS_KEY,
                "If process.roles contains the 'controller' role, the node id "
                f"{cfg.node_id} must be included in the set of voters {VOTERS_KEY}={shown_voters}",
            )
        if not cfg.standalone and not controllers & names:
            raise ConfigError(
                "controller.listener.names",
                "controller.listener.names must contain at least one value appearing in the "
                "'listeners' configuration when running the KRaft controller role",
            )
        if controllers & names and not controllers <= names:
            raise ConfigError(
                "controller.listener.names",
                "controller.listener.names must only contain values appearing in the "
                "'listeners' configuration when running the KRaft controller role",
            )
        own = voters.get(cfg.node_id)
        bound = [e for e in cfg.controller_endpoints if e.port != 0]
        if own is not None and bound and not is_own_controller(own, bound, same_node=True):
            raise ConfigError(
                VOTERS_KEY,
                f"{VOTERS_KEY} gives this node ({cfg.node_id}) the address {own}, but none of "
                "its controller listeners (" + ",".join(e.url for e in bound) + ") has that "
                "port; every voter must be reachable on its controller listener",
            )
    if roles == {"controller"}:
        if any(e.name not in controllers for e in cfg.listener_endpoints):
            raise ConfigError(
                "listeners",
                "The listeners config must only contain KRaft controller listeners from "
                "controller.listener.names when process.roles=controller",
            )
        if cfg.advertised_endpoints:
            raise ConfigError(
                "advertised.listeners",
                "The advertised.listeners config must only contain KRaft controller listeners "
                "from controller.listener.names when process.roles=controller",
            )
    if roles == {"broker"}:
        if cfg.node_id in voters:
            raise ConfigError(
                VOTERS_KEY,
                "If process.roles contains just the 'broker' role, the node id "
                f"{cfg.node_id} must not be included in the set of voters "
                f"{VOTERS_KEY}={shown_voters}",
            )
        if not controllers:
            raise ConfigError(
                "controller.listener.names",
                "controller.listener.names must contain at least one value when running KRaft "
                "with just the broker role",
            )
    if "broker" in roles and not cfg.advertised_endpoints:
        raise ConfigError(
            "advertised.listeners",
            "There must be at least one advertised listener. Perhaps all listeners appear "
            "in controller.listener.names?",
        )


BROKER_KEYS = keys_of(BrokerConfig)
"""Every broker key Strom types, by Kafka name."""


def load_config(
    path: str | None = None,
    overrides: Iterable[str] = (),
    extra: Mapping[str, str] | None = None,
) -> BrokerConfig:
    """Load like kafka-server-start: a properties file, then `key=value` overrides on top.

    `extra` (e.g. from tests or embedding code) is applied before the overrides.
    """
    props = read_properties_file(path) if path is not None else {}
    props.update(extra or {})
    return BrokerConfig.from_properties(apply_overrides(props, overrides))
