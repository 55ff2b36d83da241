"""Node identity, listeners, sockets, connection limits and KRaft metadata settings.

A mixin of `BrokerConfig`; defaults are Kafka 4.0's except where noted as
Strom's embedded single-node choice (see `STROM_DEFAULTS`).
"""

from __future__ import annotations

from dataclasses import dataclass

from strom.config.keys import setting
from strom.config.listeners import SECURITY_PROTOCOLS
from strom.config.validators import at_least, matches, one_of, subset_of
from strom.config.values import INT_MAX, ConfigType

C = ConfigType

LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "WARNING", "ERROR", "FATAL", "CRITICAL")
DEFAULT_PROTOCOL_MAP = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"


@dataclass(frozen=True, init=False, repr=False, eq=False)  # fields only: see BrokerConfig
class ServerSettings:
    """Who this node is and how clients reach it."""

    node_id: int = setting(
        "node.id",
        C.INT,
        1,
        "This node's id (Kafka requires it; Strom's single node defaults to 1).",
        validator=at_least(0),
    )
    broker_id: int | None = setting(
        "broker.id",
        C.INT,
        None,
        "Legacy alias of node.id; if set it must equal node.id.",
        validator=at_least(0),
    )
    process_roles: tuple[str, ...] = setting(
        "process.roles",
        C.LIST,
        ("broker", "controller"),
        "Roles of this node; Strom always runs both in one process.",
        validator=subset_of("broker", "controller", allow_empty=False),
    )
    cluster_id: str | None = setting(
        "cluster.id",
        C.STRING,
        None,
        "Strom's own: the cluster id to format new storage with (Kafka keeps it in "
        "meta.properties); unset means generate one.",
        validator=matches(r"[A-Za-z0-9_\-]{1,64}", "1-64 characters of A-Z a-z 0-9 _ -"),
    )
    broker_rack: str | None = setting("broker.rack", C.STRING, None, "Rack of this broker.")
    strom_log_level: str = setting(
        "strom.log.level",
        C.STRING,
        "INFO",
        "Strom's own: root log level (case-insensitive).",
        validator=one_of(*LOG_LEVELS, case_sensitive=False),
        dynamic=True,
    )

    listeners: str = setting(
        "listeners",
        C.STRING,
        "PLAINTEXT://127.0.0.1:9092",
        "Comma-separated NAME://host:port to bind; empty host = all interfaces, port 0 = "
        "ephemeral (Kafka's default binds PLAINTEXT://:9092).",
        dynamic=True,
    )
    advertised_listeners: str | None = setting(
        "advertised.listeners",
        C.STRING,
        None,
        "Endpoints told to clients; unset or blank = the non-controller listeners.",
        dynamic=True,
    )
    listener_security_protocol_map: str = setting(
        "listener.security.protocol.map",
        C.STRING,
        DEFAULT_PROTOCOL_MAP,
        "Listener name to security protocol.",
        dynamic=True,
    )
    controller_listener_names: str | None = setting(
        "controller.listener.names", C.STRING, None, "Listener names used by the KRaft controller."
    )
    inter_broker_listener_name: str | None = setting(
        "inter.broker.listener.name", C.STRING, None, "Listener used between brokers."
    )
    security_inter_broker_protocol: str = setting(
        "security.inter.broker.protocol",
        C.STRING,
        "PLAINTEXT",
        "Names the inter-broker listener when inter.broker.listener.name is unset.",
        validator=one_of(*SECURITY_PROTOCOLS),
    )

    socket_send_buffer_bytes: int = setting(
        "socket.send.buffer.bytes", C.INT, 102400, "SO_SNDBUF of client sockets; -1 = OS default."
    )
    socket_receive_buffer_bytes: int = setting(
        "socket.receive.buffer.bytes",
        C.INT,
        102400,
        "SO_RCVBUF of client sockets; -1 = OS default.",
    )
    socket_request_max_bytes: int = setting(
        "socket.request.max.bytes",
        C.INT,
        104857600,
        "Largest request size accepted.",
        validator=at_least(1),
    )
    socket_listen_backlog_size: int = setting(
        "socket.listen.backlog.size",
        C.INT,
        50,
        "Listen backlog of server sockets.",
        validator=at_least(1),
    )
    connections_max_idle_ms: int = setting(
        "connections.max.idle.ms", C.LONG, 600000, "Idle connections are closed after this."
    )
    max_connections_per_ip: int = setting(
        "max.connections.per.ip",
        C.INT,
        INT_MAX,
        "Connection limit per client address.",
        validator=at_least(0),
        dynamic=True,
    )
    max_connections_per_ip_overrides: str = setting(
        "max.connections.per.ip.overrides",
        C.STRING,
        "",
        "Per-host limits as host:count,...",
        validator=matches(
            r"(\s*[^,:\s]+\s*:\s*[0-9]+\s*(,|$))*", "host:count pairs separated by commas"
        ),
        dynamic=True,
    )
    max_connections: int = setting(
        "max.connections",
        C.INT,
        INT_MAX,
        "Connection limit per broker.",
        validator=at_least(0),
        dynamic=True,
    )
    queued_max_requests: int = setting(
        "queued.max.requests",
        C.INT,
        500,
        "Requests queued before reading from sockets pauses.",
        validator=at_least(1),
    )
    fetch_max_bytes: int = setting(
        "fetch.max.bytes",
        C.INT,
        57671680,
        "Upper bound of bytes returned for one fetch.",
        validator=at_least(1024),
    )
    max_incremental_fetch_session_cache_slots: int = setting(
        "max.incremental.fetch.session.cache.slots",
        C.INT,
        1000,
        "Incremental fetch sessions (KIP-227) the broker keeps at most.",
        validator=at_least(0),
    )
    num_network_threads: int = setting(
        "num.network.threads",
        C.INT,
        3,
        "Accepted for compatibility; ignored (trio).",
        validator=at_least(1),
        dynamic=True,
    )
    num_io_threads: int = setting(
        "num.io.threads",
        C.INT,
        8,
        "Accepted for compatibility; ignored (trio).",
        validator=at_least(1),
        dynamic=True,
    )
    background_threads: int = setting(
        "background.threads",
        C.INT,
        10,
        "Accepted for compatibility; ignored (trio).",
        validator=at_least(1),
        dynamic=True,
    )
    auto_create_topics_enable: bool = setting(
        "auto.create.topics.enable", C.BOOLEAN, True, "Create unknown topics on metadata requests."
    )
    delete_topic_enable: bool = setting(
        "delete.topic.enable", C.BOOLEAN, True, "Allow DeleteTopics."
    )

    metadata_log_dir: str | None = setting(
        "metadata.log.dir",
        C.STRING,
        None,
        "Where the cluster metadata log lives; unset = first log dir.",
    )
    metadata_log_segment_bytes: int = setting(
        "metadata.log.segment.bytes",
        C.INT,
        1073741824,
        "Segment size of the metadata log.",
        validator=at_least(12),
    )
    metadata_log_segment_ms: int = setting(
        "metadata.log.segment.ms", C.LONG, 604800000, "Roll time of metadata log segments."
    )
    metadata_max_retention_bytes: int = setting(
        "metadata.max.retention.bytes",
        C.LONG,
        104857600,
        "Metadata log size kept before snapshots allow deleting; -1 = unlimited.",
    )
    metadata_max_retention_ms: int = setting(
        "metadata.max.retention.ms",
        C.LONG,
        604800000,
        "Metadata log age kept before snapshots allow deleting; -1 = unlimited.",
    )
