"""Keys Kafka 4.0 accepts that Strom recognises but does not use.

Rejecting unknown keys catches typos, but a real server.properties carries many
settings that only matter to Kafka's JVM, replication or security machinery;
those are accepted (and kept verbatim) instead of failing startup.
"""

from __future__ import annotations

IGNORED_KEYS = frozenset(
    {
        # KRaft quorum and broker lifecycle settings Strom does not use yet.
        "controller.quorum.auto.join.enable",
        "metadata.log.max.record.bytes.between.snapshots",
        "metadata.log.max.snapshot.interval.ms",
        "metadata.max.idle.interval.ms",
        "early.start.listeners",
        "unstable.api.versions.enable",
        "unstable.feature.versions.enable",
        # Replication tuning Strom has no use for: one fetcher task per leader, the high
        # watermark checkpointed with the other checkpoints (the replica.fetch.* settings
        # that it does use are in `BrokerConfig`).
        "num.replica.fetchers",
        "num.replica.alter.log.dirs.threads",
        "replica.socket.timeout.ms",
        "replica.socket.receive.buffer.bytes",
        "replica.high.watermark.checkpoint.interval.ms",
        "log.dir.failure.timeout.ms",
        "log.initial.task.delay.ms",
        # Purgatories, quotas, metrics and plug-in classes of the JVM broker.
        "fetch.purgatory.purge.interval.requests",
        "producer.purgatory.purge.interval.requests",
        "delete.records.purgatory.purge.interval.requests",
        "max.request.partition.size.limit",
        "quota.window.num",
        "quota.window.size.seconds",
        "replication.quota.window.num",
        "replication.quota.window.size.seconds",
        "alter.log.dirs.replication.quota.window.num",
        "alter.log.dirs.replication.quota.window.size.seconds",
        "controller.quota.window.num",
        "controller.quota.window.size.seconds",
        "client.quota.callback.class",
        "metric.reporters",
        "metrics.num.samples",
        "metrics.recording.level",
        "metrics.sample.window.ms",
        "kafka.metrics.reporters",
        "kafka.metrics.polling.interval.secs",
        "telemetry.max.bytes",
        "create.topic.policy.class.name",
        "alter.config.policy.class.name",
        "offsets.topic.compression.codec",
        "group.coordinator.append.linger.ms",
        "group.coordinator.threads",
        "socket.connection.setup.timeout.ms",
        "socket.connection.setup.timeout.max.ms",
    }
)

IGNORED_PREFIXES = (
    "listener.name.",
    "sasl.kerberos.",  # GSSAPI's; a listener enabling GSSAPI is refused
    "sasl.login.",  # token refresh and login retry tuning (Java login classes are refused)
    "sasl.oauthbearer.",  # JWKS retry tuning and client-side token settings
    "sasl.client.",
    "config.providers",
    "password.encoder.",
    "delegation.token.",
    "remote.log.",
    "group.consumer.",
    "group.share.",
    "share.coordinator.",
)
"""Families of keys (tiered storage, newer group protocols) accepted wholesale; security keys are\nrefused instead (`unsupported`)."""


def is_ignored(key: str) -> bool:
    """Whether Kafka accepts this key and Strom deliberately ignores it."""
    return key in IGNORED_KEYS or key.startswith(IGNORED_PREFIXES)
