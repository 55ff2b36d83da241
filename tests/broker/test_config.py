"""Tests of strom.config: Kafka keys, defaults, properties syntax, validation, DescribeConfigs."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from strom.config import (
    BROKER_KEYS,
    LONG_MAX,
    STROM_DEFAULTS,
    TOPIC_KEYS,
    BrokerConfig,
    ConfigError,
    ConfigSource,
    ConfigType,
    Listener,
    TopicConfig,
    describe_broker_config,
    effective_topic_config,
    load_config,
    parse_listeners,
    parse_override,
    parse_properties,
    parse_protocol_map,
    read_properties_file,
    resolve_topic_config,
    validate_topic_overrides,
)
from strom.config.resolve import ConfigEntry, ConfigSynonym
from strom.config.values import parse_value, to_string


def cfg(**props: str) -> BrokerConfig:
    """A config from keyword properties; underscores stand for dots."""
    return BrokerConfig.from_properties({k.replace("_", "."): v for k, v in props.items()})


def props_cfg(props: dict[str, str]) -> BrokerConfig:
    return BrokerConfig.from_properties(props)


# --- defaults -------------------------------------------------------------------------------

KAFKA_DEFAULTS: dict[str, object] = {
    "node.id": 1,
    "process.roles": ("broker", "controller"),
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "advertised.listeners": None,
    "listener.security.protocol.map": (
        "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
    ),
    "controller.listener.names": None,
    "inter.broker.listener.name": None,
    "log.dir": "./data",
    "log.dirs": None,
    "num.partitions": 1,
    "default.replication.factor": 1,
    "auto.create.topics.enable": True,
    "delete.topic.enable": True,
    "message.max.bytes": 1048588,
    "socket.request.max.bytes": 104857600,
    "socket.send.buffer.bytes": -1,  # Strom's: the OS's autotuned buffers (Kafka: 102400)
    "socket.receive.buffer.bytes": -1,
    "log.segment.bytes": 1073741824,
    "log.roll.ms": None,
    "log.roll.hours": 168,
    "log.roll.jitter.ms": None,
    "log.roll.jitter.hours": 0,
    "log.index.size.max.bytes": 10485760,
    "log.index.interval.bytes": 4096,
    "log.flush.interval.messages": LONG_MAX,
    "log.flush.interval.ms": None,
    "log.flush.scheduler.interval.ms": LONG_MAX,
    "log.retention.hours": 168,
    "log.retention.minutes": None,
    "log.retention.ms": None,
    "log.retention.bytes": -1,
    "log.retention.check.interval.ms": 300000,
    "log.cleanup.policy": ("delete",),
    "log.cleaner.enable": True,
    "log.cleaner.dedupe.buffer.size": 134217728,
    "log.cleaner.delete.retention.ms": 86400000,
    "log.cleaner.min.cleanable.ratio": 0.5,
    "log.cleaner.min.compaction.lag.ms": 0,
    "log.cleaner.max.compaction.lag.ms": LONG_MAX,
    "log.cleaner.threads": 1,
    "log.cleaner.backoff.ms": 15000,
    "log.message.timestamp.type": "CreateTime",
    "log.message.timestamp.before.max.ms": LONG_MAX,
    "log.message.timestamp.after.max.ms": 3600000,
    "compression.type": "producer",
    "connections.max.idle.ms": 600000,
    "max.connections.per.ip": 2147483647,
    "max.connections": 2147483647,
    "offsets.topic.num.partitions": 50,
    "offsets.topic.replication.factor": 1,
    "offsets.retention.minutes": 10080,
    "offsets.retention.check.interval.ms": 600000,
    "offsets.commit.timeout.ms": 5000,
    "group.initial.rebalance.delay.ms": 3000,
    "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1800000,
    "group.max.size": 2147483647,
    "transaction.state.log.num.partitions": 50,
    "transactional.id.expiration.ms": 604800000,
    "transaction.max.timeout.ms": 900000,
    "producer.id.expiration.ms": 86400000,
    "min.insync.replicas": 1,
    "unclean.leader.election.enable": False,
    "replica.lag.time.max.ms": 30000,
    "replica.fetch.max.bytes": 1048576,
    "replica.fetch.response.max.bytes": 10485760,
    "replica.fetch.wait.max.ms": 500,
    "replica.fetch.min.bytes": 1,
    "replica.fetch.backoff.ms": 1000,
    "num.network.threads": 3,
    "num.io.threads": 8,
    "cluster.id": None,
    "metadata.log.dir": None,
    "metadata.log.segment.bytes": 1073741824,
    "metadata.max.retention.bytes": 104857600,
    "broker.rack": None,
    "replica.selector.class": None,
    "strom.log.level": "INFO",
    "controller.quorum.voters": (),
    "controller.quorum.bootstrap.servers": (),
    "controller.quorum.election.timeout.ms": 1000,
    "controller.quorum.fetch.timeout.ms": 2000,
    "controller.quorum.election.backoff.max.ms": 1000,
    "controller.quorum.request.timeout.ms": 2000,
    "controller.quorum.retry.backoff.ms": 20,
    "controller.quorum.append.linger.ms": 25,
    "broker.heartbeat.interval.ms": 2000,
    "broker.session.timeout.ms": 9000,
    "initial.broker.registration.timeout.ms": 60000,
}


@pytest.mark.parametrize(("key", "expected"), sorted(KAFKA_DEFAULTS.items()))
def test_defaults(key: str, expected: object) -> None:
    assert BrokerConfig().get(key) == expected
    assert BROKER_KEYS[key].default == expected


def test_every_key_maps_to_an_attribute() -> None:
    config = BrokerConfig()
    for key, spec in BROKER_KEYS.items():
        assert getattr(config, spec.attr) == spec.default, key
    assert config.num_partitions == 1
    assert config.log_retention_hours == 168
    assert config.strom_log_level == "INFO"


def test_strom_deviations_are_documented_keys() -> None:
    assert set(STROM_DEFAULTS) <= set(BROKER_KEYS)


def test_derived_defaults() -> None:
    config = BrokerConfig()
    assert config.data_dirs == ("./data",)
    assert config.metadata_dir == "./data"
    assert config.retention_ms == 7 * 24 * 3600 * 1000
    assert config.roll_ms == 7 * 24 * 3600 * 1000
    assert config.roll_jitter_ms == 0
    assert config.flush_interval_ms == LONG_MAX
    assert config.offsets_retention_ms == 10080 * 60000
    assert config.listener_endpoints == (("PLAINTEXT", "127.0.0.1", 9092),)
    assert config.advertised_endpoints == config.listener_endpoints
    assert config.inter_broker_listener == "PLAINTEXT"
    assert config.controller_listeners == ()
    assert config.security_protocol("plaintext") == "PLAINTEXT"
    assert config.python_log_level == logging.INFO
    assert config.roles == {"broker", "controller"}
    assert config.explicit_keys == frozenset()


def test_config_is_frozen_and_comparable() -> None:
    config = BrokerConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.num_partitions = 3  # type: ignore[misc]
    assert config == cfg(num_partitions="1")
    assert hash(config) == hash(BrokerConfig())
    assert dataclasses.replace(config, num_partitions=3).num_partitions == 3
    with pytest.raises(ConfigError, match=r"num\.partitions"):
        dataclasses.replace(config, num_partitions=0)


def test_replica_selector_class_takes_kafkas_two_selectors() -> None:
    for name in (
        "org.apache.kafka.common.replica.LeaderSelector",
        "org.apache.kafka.common.replica.RackAwareReplicaSelector",
    ):
        assert props_cfg({"replica.selector.class": name}).replica_selector_class == name
    assert BrokerConfig().replica_selector_class is None
    with pytest.raises(ConfigError, match=r"replica\.selector\.class.*RackAwareReplicaSelector"):
        props_cfg({"replica.selector.class": "com.example.Mine"})


# --- properties syntax ------------------------------------------------------------------------


def test_properties_comments_and_separators() -> None:
    text = (
        "# a comment\n"
        "! another comment\n"
        "\n"
        "   \t\n"
        "a=1\n"
        "b: 2\n"
        "c 3\n"
        "  d   =   4\n"
        "e\t:\tfive six\n"
        "f\n"
        "g=x=y:z\n"
        "h = = v\n"
        "   # indented comment\n"
        "url: PLAINTEXT://host:9092\n"
    )
    assert parse_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "4",
        "e": "five six",
        "f": "",
        "g": "x=y:z",
        "h": "= v",
        "url": "PLAINTEXT://host:9092",
    }


def test_properties_keep_trailing_whitespace_and_last_duplicate() -> None:
    assert parse_properties("k=v  \nk=w \n") == {"k": "w "}


def test_properties_line_endings() -> None:
    assert parse_properties("a=1\r\nb=2\rc=3\n") == {"a": "1", "b": "2", "c": "3"}


def test_properties_continuations() -> None:
    text = (
        "listeners=PLAINTEXT://:9092,\\\n"
        "          CONTROLLER://:9093\n"
        "even=ends with two\\\\\n"
        "next=1\n"
        "# comment ends with backslash \\\n"
        "after.comment=2\n"
        "blank.after=x\\\n"
        "\n"
        "hash=a\\\n"
        "   #not a comment\n"
        "eof=last\\"
    )
    assert parse_properties(text) == {
        "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
        "even": "ends with two\\",
        "next": "1",
        "after.comment": "2",
        "blank.after": "x",
        "hash": "a#not a comment",
        "eof": "last",
    }


def test_properties_escapes() -> None:
    text = (
        "tabs=a\\tb\\nc\\rd\\fe\n"
        "uni=\\u0041\\u00e9\n"
        "pair=\\uD83D\\uDE00\n"
        "key\\=with\\:seps\\ and\\ space=v\n"
        "other=\\q\\\\\n"
        "\\#not.comment=1\n"
    )
    assert parse_properties(text) == {
        "tabs": "a\tb\nc\rd\fe",
        "uni": "A\u00e9",
        "pair": "\U0001f600",
        "key=with:seps and space": "v",
        "other": "q\\",
        "#not.comment": "1",
    }


@pytest.mark.parametrize("bad", ["k=\\u12", "k=\\u12zz", "k=\\u"])
def test_properties_malformed_unicode_escape(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"malformed \\uxxxx"):
        parse_properties(bad, source="server.properties")


def test_read_properties_file(tmp_path: Path) -> None:
    utf8 = tmp_path / "utf8.properties"
    utf8.write_text("broker.rack=z\u00fcrich\n", encoding="utf-8")
    assert read_properties_file(utf8) == {"broker.rack": "z\u00fcrich"}
    latin1 = tmp_path / "latin1.properties"
    latin1.write_bytes("broker.rack=z\u00fcrich\n".encode("iso-8859-1"))
    assert read_properties_file(latin1) == {"broker.rack": "z\u00fcrich"}
    with pytest.raises(ConfigError, match=r"cannot read config file"):
        read_properties_file(tmp_path / "missing.properties")


# --- overrides and loading --------------------------------------------------------------------


def test_parse_override() -> None:
    assert parse_override("num.partitions=3") == ("num.partitions", "3")
    assert parse_override(" a.b =x=y") == ("a.b", "x=y")
    assert parse_override("a=") == ("a", "")
    for bad in ("novalue", "=3", ""):
        with pytest.raises(ConfigError, match=r"expected key=value"):
            parse_override(bad)


def test_load_config_file_then_overrides(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=3\nlog.dirs=/a, /b\nnum.io.threads=4\n")
    config = load_config(
        str(path),
        overrides=["num.partitions=5", "listeners=PLAINTEXT://:0"],
        extra={"node.id": "7"},
    )
    assert config.num_partitions == 5
    assert config.node_id == 7
    assert config.data_dirs == ("/a", "/b")
    assert config.listener_endpoints == (Listener("PLAINTEXT", "", 0),)
    assert config.explicit_keys == {
        "num.partitions",
        "log.dirs",
        "num.io.threads",
        "listeners",
        "node.id",
    }
    assert load_config() == BrokerConfig()
    with pytest.raises(ConfigError, match=r"unknown config key 'nope'"):
        load_config(str(path), overrides=["nope=1"])


def test_kafka_style_server_properties(tmp_path: Path) -> None:
    """A KRaft combined-mode file in the shape Kafka ships loads unchanged."""
    path = tmp_path / "server.properties"
    path.write_text(
        "process.roles=broker,controller\n"
        "node.id=1\n"
        "controller.quorum.bootstrap.servers=localhost:9093\n"
        "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\n"
        "inter.broker.listener.name=PLAINTEXT\n"
        "advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093\n"
        "controller.listener.names=CONTROLLER\n"
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,"
        "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL\n"
        "num.network.threads=3\n"
        "num.io.threads=8\n"
        "socket.send.buffer.bytes=102400\n"
        "socket.receive.buffer.bytes=102400\n"
        "socket.request.max.bytes=104857600\n"
        "log.dirs=/tmp/kraft-combined-logs\n"
        "num.partitions=1\n"
        "num.recovery.threads.per.data.dir=1\n"
        "offsets.topic.replication.factor=1\n"
        "share.coordinator.state.topic.replication.factor=1\n"
        "share.coordinator.state.topic.min.isr=1\n"
        "transaction.state.log.replication.factor=1\n"
        "transaction.state.log.min.isr=1\n"
        "log.retention.hours=168\n"
        "log.segment.bytes=1073741824\n"
        "log.retention.check.interval.ms=300000\n"
    )
    config = load_config(str(path))
    assert config.listener_endpoints == (
        ("PLAINTEXT", "", 9092),
        ("CONTROLLER", "", 9093),
    )
    assert config.controller_listeners == ("CONTROLLER",)
    assert config.inter_broker_listener == "PLAINTEXT"
    assert config.security_protocol("CONTROLLER") == "PLAINTEXT"
    assert config.quorum_bootstrap_servers == (("localhost", 9093),)
    assert config.advertised_endpoints == (("PLAINTEXT", "localhost", 9092),)
    assert config.advertised_controller_endpoints == (("CONTROLLER", "localhost", 9093),)
    assert config.data_dirs == ("/tmp/kraft-combined-logs",)


# --- precedence -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({}, 168 * 3_600_000),
        ({"log.retention.hours": "24"}, 24 * 3_600_000),
        ({"log.retention.hours": "24", "log.retention.minutes": "30"}, 30 * 60_000),
        (
            {
                "log.retention.hours": "24",
                "log.retention.minutes": "30",
                "log.retention.ms": "1234",
            },
            1234,
        ),
        ({"log.retention.ms": "-1"}, -1),
        ({"log.retention.hours": "-1"}, -1),
        ({"log.retention.minutes": "-5"}, -1),
        ({"log.retention.ms": "-1", "log.retention.hours": "1"}, -1),
    ],
)
def test_retention_precedence(props: dict[str, str], expected: int) -> None:
    config = props_cfg(props)
    assert config.retention_ms == expected
    assert effective_topic_config(config, {}).retention_ms == expected


@pytest.mark.parametrize(
    ("key", "props"),
    [
        ("log.retention.ms", {"log.retention.ms": "0"}),
        ("log.retention.minutes", {"log.retention.minutes": "0", "log.retention.hours": "5"}),
        ("log.retention.hours", {"log.retention.hours": "0"}),
    ],
)
def test_zero_retention_is_rejected(key: str, props: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match=f"'{key}'") as info:
        props_cfg(props)
    assert info.value.key == key


def test_log_dirs_win_over_log_dir() -> None:
    assert cfg(log_dir="/x").data_dirs == ("/x",)
    assert props_cfg({"log.dir": "/x", "log.dirs": "/y,/z"}).data_dirs == ("/y", "/z")
    assert props_cfg({"log.dir": "/x", "log.dirs": "  "}).data_dirs == ("/x",)
    assert props_cfg({"log.dirs": "/y", "metadata.log.dir": "/m"}).metadata_dir == "/m"
    with pytest.raises(ConfigError, match=r"log\.dirs"):
        props_cfg({"log.dirs": "/a,,/b"})


def test_roll_jitter_and_flush_precedence() -> None:
    config = props_cfg({"log.roll.hours": "2", "log.roll.jitter.hours": "1"})
    assert (config.roll_ms, config.roll_jitter_ms) == (7_200_000, 3_600_000)
    config = props_cfg({"log.roll.ms": "5", "log.roll.hours": "2", "log.roll.jitter.ms": "3"})
    assert (config.roll_ms, config.roll_jitter_ms) == (5, 3)
    assert props_cfg({"log.flush.scheduler.interval.ms": "9"}).flush_interval_ms == 9
    config = props_cfg({"log.flush.scheduler.interval.ms": "9", "log.flush.interval.ms": "4"})
    assert config.flush_interval_ms == 4


# --- validation errors ------------------------------------------------------------------------


def test_unknown_key() -> None:
    with pytest.raises(ConfigError) as info:
        cfg(num_partition="3")
    assert str(info.value) == "unknown config key 'num.partition'"
    assert info.value.key == "num.partition"
    with pytest.raises(ConfigError, match=r"unknown config key"):
        BrokerConfig().get("nope")


@pytest.mark.parametrize(
    "key",
    [
        "controller.quorum.auto.join.enable",
        "metadata.max.idle.interval.ms",
        "early.start.listeners",
        "remote.log.storage.system.enable",
        "group.consumer.assignors",
    ],
)
def test_accepted_and_ignored_keys(key: str) -> None:
    config = props_cfg({key: "whatever"})
    assert config.ignored_settings == ((key, "whatever"),)
    assert config == BrokerConfig()


@pytest.mark.parametrize(
    "key",
    ["delegation.token.secret.key", "security.providers", "listener.name.external.security.providers"],
)
def test_security_keys_fail_closed(key: str) -> None:
    """Accepting them would do less than they ask (tokens that authenticate no one)."""
    with pytest.raises(ConfigError, match=rf"config key '{key}' is refused: Strom does not "
                       "implement delegation tokens or Java security providers") as info:
        props_cfg({key: "whatever"})
    assert info.value.key == key


def test_only_the_standard_authorizer_is_accepted() -> None:
    with pytest.raises(ConfigError, match="StandardAuthorizer") as info:
        props_cfg({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    assert info.value.key == "authorizer.class.name"
    config = props_cfg({
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:broker",
        "allow.everyone.if.no.acl.found": "true",
    })  # fmt: skip
    assert config.allow_everyone_if_no_acl_found


PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="a" password="p" user_a="p";')  # fmt: skip


@pytest.mark.parametrize(
    ("props", "key", "message"),
    [
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0"},
         "listener.name.sasl_plaintext.sasl.enabled.mechanisms", "enables GSSAPI"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN"},
         "listener.name.sasl_plaintext.plain.sasl.jaas.config", "has no login module"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
          "listener.name.sasl_plaintext.plain.sasl.jaas.config":
              "org.apache.kafka.common.security.scram.ScramLoginModule required;"},
         "listener.name.sasl_plaintext.plain.sasl.jaas.config", "PLAIN takes"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
          "listener.name.sasl_plaintext.plain.sasl.jaas.config": "not jaas"},
         "listener.name.sasl_plaintext.plain.sasl.jaas.config", "invalid value"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
          "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS},
         "sasl.mechanism.inter.broker.protocol", "must be included in sasl.enabled.mechanisms"),
        ({"sasl.login.class": "com.example.Login"}, "sasl.login.class", "unset"),
        ({"principal.builder.class": "com.example.Builder"}, "principal.builder.class",
         "DefaultKafkaPrincipalBuilder"),
    ],
)  # fmt: skip
def test_sasl_listeners_need_what_kafka_needs(props: dict[str, str], key: str, message: str) -> None:
    """Each refusal names the key to set; a JAAS value (it holds passwords) is never shown."""
    with pytest.raises(ConfigError, match=message) as info:
        props_cfg(props)
    assert info.value.key == key
    assert '"p"' not in str(info.value)


def test_a_sasl_listener_with_plain() -> None:
    config = props_cfg({
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "60000",
        "sasl.kerberos.service.name": "kafka",  # GSSAPI's: accepted, unused
    })  # fmt: skip
    assert config.listener_value("SASL_PLAINTEXT", "connections.max.reauth.ms", "PLAIN") == 60000
    assert config.listener_value("SASL_PLAINTEXT", "connections.max.reauth.ms") == 0
    assert "user_a" not in repr(config)


def test_ssl_keys_are_typed_per_listener_and_hidden() -> None:
    """ssl.* keys are Kafka's, also per listener (listener.name.<l>.ssl.*), the prefixed value
    winning on its listener; passwords never print."""
    config = props_cfg({
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.client.auth": "requested",
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.ssl.ssl.keystore.location": "/etc/strom/broker.pem",
        "listener.name.ssl.ssl.key.password": "s3cret",
    })  # fmt: skip
    ssl = config.ssl_settings("SSL")
    assert (ssl.keystore_type, ssl.client_auth, ssl.keystore_location) == (
        "PEM", "required", "/etc/strom/broker.pem")  # fmt: skip
    assert config.ssl_settings("PLAINTEXT").client_auth == "requested"
    assert ssl.key_password is not None
    assert ssl.key_password.reveal() == "s3cret"
    assert "s3cret" not in repr(ssl)
    assert "s3cret" not in repr(config)
    assert config.uses_tls("SSL")
    assert not config.uses_tls("PLAINTEXT")


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("listener.name.ssl.ssl.client.auth", "always", "one of required, requested, none"),
        ("ssl.enabled.protocols", "TLSv1.1", "TLSv1.2, TLSv1.3"),
        ("ssl.keystore.type", "BKS", "one of JKS, PKCS12, PEM"),
        ("ssl.engine.factory.class", "com.example.Factory", "unset"),
        ("listener.name.ssl.ssl.no.such.key", "x", "unknown config key"),
    ],
)
def test_bad_ssl_values_name_the_key(key: str, value: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected) as info:
        props_cfg({"listeners": "SSL://127.0.0.1:0", key: value})
    assert info.value.key == key


def test_plaintext_listeners_beside_the_default_protocol_map_are_fine() -> None:
    """The default map names SSL and SASL protocols; only listeners that use them are refused."""
    config = props_cfg({"listeners": "PLAINTEXT://127.0.0.1:0"})
    assert config.security_protocol("PLAINTEXT") == "PLAINTEXT"


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("num.partitions", "abc", "a 32-bit integer"),
        ("num.partitions", "1.5", "a 32-bit integer"),
        ("num.partitions", "1_000", "a 32-bit integer"),
        ("num.partitions", "2147483648", "a 32-bit integer"),
        ("num.partitions", "0", "a value at least 1"),
        ("log.retention.ms", "9223372036854775808", "a 64-bit integer"),
        ("offsets.topic.replication.factor", "40000", "a 16-bit integer"),
        ("offsets.topic.replication.factor", "0", "a value at least 1"),
        ("auto.create.topics.enable", "yes", "true or false"),
        ("log.cleaner.min.cleanable.ratio", "1.5", "a value between 0 and 1"),
        ("log.cleaner.min.cleanable.ratio", "half", "a floating point number"),
        ("log.cleanup.policy", "remove", "list of distinct values from: compact, delete"),
        ("log.cleanup.policy", "delete,delete", "distinct values"),
        ("log.message.timestamp.type", "createtime", "one of CreateTime, LogAppendTime"),
        ("compression.type", "brotli", "one of uncompressed, zstd, lz4, snappy, gzip, producer"),
        ("compression.gzip.level", "10", "between 1 and 9, or exactly -1"),
        ("log.segment.bytes", "13", "a value at least 14"),
        ("socket.request.max.bytes", "0", "a value at least 1"),
        ("process.roles", "", "non-empty"),
        ("process.roles", "broker,zookeeper", "broker, controller"),
        ("strom.log.level", "LOUD", "one of TRACE"),
        ("cluster.id", "has space", "1-64 characters"),
        ("node.id", "-1", "a value at least 0"),
        ("listeners", "PLAINTEXT://localhost", "NAME://host:port"),
        ("security.inter.broker.protocol", "TLS", "one of PLAINTEXT"),
        ("max.connections.per.ip.overrides", "hostA:x", "host:count"),
    ],
)
def test_invalid_values_name_key_value_and_expectation(key: str, value: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        props_cfg({key: value})
    message = str(info.value)
    assert info.value.key == key
    assert f"config key '{key}'" in message
    assert expected in message
    assert message.startswith("invalid value '")


def test_error_message_format() -> None:
    with pytest.raises(ConfigError) as info:
        cfg(num_partitions=" abc ")
    assert str(info.value) == (
        "invalid value ' abc ' for config key 'num.partitions': expected a 32-bit integer"
    )


def test_values_are_trimmed_and_case_insensitive_booleans() -> None:
    config = props_cfg(
        {
            "num.partitions": " 3 ",
            "delete.topic.enable": "FALSE",
            "log.cleanup.policy": "compact , delete",
        }
    )
    assert config.num_partitions == 3
    assert config.delete_topic_enable is False
    assert config.log_cleanup_policy == ("compact", "delete")
    assert props_cfg({"num.partitions": "+2"}).num_partitions == 2
    assert props_cfg({"log.cleanup.policy": ""}).log_cleanup_policy == ()


def test_direct_construction_checks_python_types() -> None:
    with pytest.raises(ConfigError, match=r"'num\.partitions': expected a 32-bit integer"):
        BrokerConfig(num_partitions="3")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"'delete\.topic\.enable': expected a boolean"):
        BrokerConfig(delete_topic_enable=1)  # type: ignore[arg-type]
    assert BrokerConfig(log_cleaner_min_cleanable_ratio=1).log_cleaner_min_cleanable_ratio == 1


def test_log_level_names() -> None:
    assert cfg(strom_log_level="debug").python_log_level == logging.DEBUG
    assert cfg(strom_log_level="WARN").python_log_level == logging.WARNING
    assert cfg(strom_log_level="trace").python_log_level == 5
    assert cfg(strom_log_level="fatal").python_log_level == logging.CRITICAL


def test_broker_id_must_match_node_id() -> None:
    assert props_cfg({"node.id": "4", "broker.id": "4"}).node_id == 4
    with pytest.raises(ConfigError, match=r"'broker\.id'.*same value as node\.id"):
        props_cfg({"node.id": "4", "broker.id": "5"})


def test_compaction_lag_order_and_classic_protocol() -> None:
    with pytest.raises(ConfigError, match=r"log\.cleaner\.min\.compaction\.lag\.ms"):
        props_cfg(
            {"log.cleaner.min.compaction.lag.ms": "10", "log.cleaner.max.compaction.lag.ms": "5"}
        )
    with pytest.raises(ConfigError, match=r"including classic"):
        props_cfg({"group.coordinator.rebalance.protocols": "consumer"})


# --- listeners --------------------------------------------------------------------------------


def test_parse_listeners() -> None:
    assert parse_listeners("PLAINTEXT://127.0.0.1:9092,CONTROLLER://:9093") == [
        ("PLAINTEXT", "127.0.0.1", 9092),
        ("CONTROLLER", "", 9093),
    ]
    assert parse_listeners(" plaintext://host-1.example.com:0 , SSL://[::1]:9093 ") == [
        Listener("PLAINTEXT", "host-1.example.com", 0),
        Listener("SSL", "::1", 9093),
    ]
    assert parse_listeners("INTERNAL://::1:9094") == [("INTERNAL", "::1", 9094)]
    assert parse_listeners("") == []


def test_listener_url_round_trip() -> None:
    for url in ("PLAINTEXT://127.0.0.1:9092", "CONTROLLER://:0", "SSL://[::1]:9093"):
        assert parse_listeners(url)[0].url == url


@pytest.mark.parametrize(
    "bad",
    [
        "PLAINTEXT://localhost",
        "PLAINTEXT://localhost:65536",
        "PLAINTEXT://localhost:-1",
        "PLAINTEXT:/localhost:9092",
        "://localhost:9092",
        "PLAINTEXT://local host:9092",
        "PLAINTEXT://:9092,,SSL://:9093",
        "PLAINTEXT://:9092,plaintext://:9093",
        "localhost:9092",
    ],
)
def test_parse_listeners_rejects(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"'listeners'"):
        parse_listeners(bad)


def test_parse_protocol_map() -> None:
    assert parse_protocol_map("internal:plaintext, EXTERNAL:SSL") == {
        "INTERNAL": "PLAINTEXT",
        "EXTERNAL": "SSL",
    }
    for bad in ("INTERNAL", "INTERNAL:TLS", "A:SSL,a:PLAINTEXT"):
        with pytest.raises(ConfigError, match=r"listener\.security\.protocol\.map"):
            parse_protocol_map(bad)


def test_controller_listener_defaults_to_plaintext_and_is_not_advertised() -> None:
    config = props_cfg(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
            "controller.listener.names": "controller",
        }
    )
    assert config.security_protocol("CONTROLLER") == "PLAINTEXT"
    assert config.advertised_endpoints == (("PLAINTEXT", "127.0.0.1", 0),)
    assert config.inter_broker_listener == "PLAINTEXT"


def test_inter_broker_listener_falls_back_to_first_advertised() -> None:
    config = props_cfg(
        {"listeners": "INTERNAL://:9092", "listener.security.protocol.map": "INTERNAL:PLAINTEXT"}
    )
    assert config.inter_broker_listener == "INTERNAL"


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"listeners": ""}, "listeners"),
        ({"listeners": "PLAINTEXT://:9092,SSL://:9092"}, "listeners"),
        ({"listeners": "INTERNAL://:9092"}, "listener.security.protocol.map"),
        (
            {
                "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT",
                "controller.listener.names": "CONTROLLER",
            },
            "listener.security.protocol.map",
        ),
        ({"controller.listener.names": "CONTROLLER"}, "controller.listener.names"),
        (
            {
                "process.roles": "broker",
                "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
                "controller.listener.names": "CONTROLLER",
            },
            "controller.listener.names",
        ),
        ({"advertised.listeners": "SSL://host:9093"}, "advertised.listeners"),
        ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners"),
        ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners"),
        ({"inter.broker.listener.name": "INTERNAL"}, "inter.broker.listener.name"),
        (
            {
                "inter.broker.listener.name": "PLAINTEXT",
                "security.inter.broker.protocol": "PLAINTEXT",
            },
            "inter.broker.listener.name",
        ),
        ({"security.inter.broker.protocol": "SSL"}, "security.inter.broker.protocol"),
    ],
)
def test_listener_rules(props: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        props_cfg(props)
    assert info.value.key == key


def test_listener_rules_accept() -> None:
    config = props_cfg(
        {
            "listeners": "PLAINTEXT://0.0.0.0:9092,EXTERNAL://:0,OTHER://:0",
            "advertised.listeners": "PLAINTEXT://broker1:9092,EXTERNAL://public:19092",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT,OTHER:PLAINTEXT",
            "inter.broker.listener.name": "plaintext",
        }
    )
    assert config.inter_broker_listener == "PLAINTEXT"
    assert [e.url for e in config.advertised_endpoints] == [
        "PLAINTEXT://broker1:9092",
        "EXTERNAL://public:19092",
    ]
    assert config.security_protocol("other") == "PLAINTEXT"


# --- topic configs ----------------------------------------------------------------------------

TOPIC_KEY_TYPES = {
    "cleanup.policy": ConfigType.LIST,
    "compression.type": ConfigType.STRING,
    "delete.retention.ms": ConfigType.LONG,
    "file.delete.delay.ms": ConfigType.LONG,
    "flush.messages": ConfigType.LONG,
    "flush.ms": ConfigType.LONG,
    "index.interval.bytes": ConfigType.INT,
    "max.compaction.lag.ms": ConfigType.LONG,
    "max.message.bytes": ConfigType.INT,
    "message.timestamp.type": ConfigType.STRING,
    "message.timestamp.before.max.ms": ConfigType.LONG,
    "message.timestamp.after.max.ms": ConfigType.LONG,
    "min.cleanable.dirty.ratio": ConfigType.DOUBLE,
    "min.compaction.lag.ms": ConfigType.LONG,
    "min.insync.replicas": ConfigType.INT,
    "preallocate": ConfigType.BOOLEAN,
    "retention.bytes": ConfigType.LONG,
    "retention.ms": ConfigType.LONG,
    "segment.bytes": ConfigType.INT,
    "segment.index.bytes": ConfigType.INT,
    "segment.jitter.ms": ConfigType.LONG,
    "segment.ms": ConfigType.LONG,
    "unclean.leader.election.enable": ConfigType.BOOLEAN,
    "local.retention.ms": ConfigType.LONG,
    "local.retention.bytes": ConfigType.LONG,
    "remote.storage.enable": ConfigType.BOOLEAN,
}


def test_topic_keys_and_types() -> None:
    for key, type_ in TOPIC_KEY_TYPES.items():
        assert TOPIC_KEYS[key].type is type_, key


def test_keys_kafka_4_removed_are_gone() -> None:
    """KIP-724: Kafka 4.0 dropped down-conversion and its configs (differential testing)."""
    assert "message.downconversion.enable" not in TOPIC_KEYS
    assert "log.message.downconversion.enable" not in BROKER_KEYS


def test_topic_synonyms_are_broker_keys_of_compatible_type() -> None:
    for spec in TOPIC_KEYS.values():
        for synonym in spec.synonyms:
            assert synonym.name in BROKER_KEYS, (spec.name, synonym.name)
    names = {k: [s.name for s in v.synonyms] for k, v in TOPIC_KEYS.items()}
    assert names["retention.ms"] == [
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
    ]
    assert names["segment.bytes"] == ["log.segment.bytes"]
    assert names["max.message.bytes"] == ["message.max.bytes"]
    assert names["flush.messages"] == ["log.flush.interval.messages"]
    assert names["flush.ms"] == ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"]
    assert names["segment.ms"] == ["log.roll.ms", "log.roll.hours"]
    assert names["min.cleanable.dirty.ratio"] == ["log.cleaner.min.cleanable.ratio"]
    assert names["remote.storage.enable"] == []


def test_broker_defaults_give_kafka_topic_defaults() -> None:
    assert effective_topic_config(BrokerConfig(), {}) == TopicConfig()
    with pytest.raises(ConfigError, match=r"'segment\.bytes'"):
        TopicConfig(segment_bytes=1)


def test_effective_topic_config() -> None:
    broker = props_cfg(
        {"log.roll.hours": "1", "message.max.bytes": "2000", "log.flush.interval.ms": "77"}
    )
    topic = effective_topic_config(broker, {"cleanup.policy": "compact", "retention.ms": "-1"})
    assert topic.cleanup_policy == ("compact",)
    assert topic.retention_ms == -1
    assert topic.segment_ms == 3_600_000
    assert topic.max_message_bytes == 2000
    assert topic.flush_ms == 77
    assert topic.segment_bytes == 1073741824


def _entry(entries: list[ConfigEntry], name: str) -> ConfigEntry:
    (entry,) = [e for e in entries if e.name == name]
    return entry


def test_resolve_defaults_reports_default_source_and_synonyms() -> None:
    entries = resolve_topic_config(BrokerConfig(), {})
    assert [e.name for e in entries] == sorted(TOPIC_KEYS)
    retention = _entry(entries, "retention.ms")
    assert retention.value == "604800000"
    assert retention.source is ConfigSource.DEFAULT_CONFIG
    assert retention.is_default
    assert retention.synonyms == (
        ConfigSynonym("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    )
    assert retention.config_type is ConfigType.LONG
    assert not retention.read_only
    assert not retention.is_sensitive
    remote = _entry(entries, "remote.storage.enable")
    assert (remote.value, remote.source, remote.synonyms) == (
        "false",
        ConfigSource.DEFAULT_CONFIG,
        (),
    )
    assert _entry(entries, "cleanup.policy").value == "delete"
    assert _entry(entries, "min.cleanable.dirty.ratio").value == "0.5"
    assert _entry(entries, "flush.ms").synonyms == (
        ConfigSynonym(
            "log.flush.scheduler.interval.ms", str(LONG_MAX), ConfigSource.DEFAULT_CONFIG
        ),
    )


def test_resolve_static_broker_config() -> None:
    broker = props_cfg({"log.retention.ms": "1000", "log.segment.bytes": "1048576"})
    entries = resolve_topic_config(broker, {})
    retention = _entry(entries, "retention.ms")
    assert retention.value == "1000"
    assert retention.source is ConfigSource.STATIC_BROKER_CONFIG
    assert retention.synonyms == (
        ConfigSynonym("log.retention.ms", "1000", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    )
    segment = _entry(entries, "segment.bytes")
    assert (segment.value, segment.source) == ("1048576", ConfigSource.STATIC_BROKER_CONFIG)


def test_resolve_static_config_equal_to_default_is_still_static() -> None:
    entry = _entry(resolve_topic_config(cfg(log_retention_hours="168"), {}), "retention.ms")
    assert entry.source is ConfigSource.STATIC_BROKER_CONFIG


def test_resolve_topic_override() -> None:
    broker = props_cfg({"log.retention.hours": "24"})
    entries = resolve_topic_config(
        broker, {"retention.ms": " 5000 ", "cleanup.policy": "compact,delete"}
    )
    retention = _entry(entries, "retention.ms")
    assert retention.value == "5000"
    assert retention.source is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert retention.synonyms == (
        ConfigSynonym("retention.ms", "5000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ConfigSynonym("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG),
    )
    assert _entry(entries, "cleanup.policy").value == "compact,delete"


def test_resolve_filters_keys_and_synonyms() -> None:
    entries = resolve_topic_config(
        BrokerConfig(), {}, keys=["segment.jitter.ms", "nope", "segment.ms"], include_synonyms=False
    )
    assert [e.name for e in entries] == ["segment.jitter.ms", "segment.ms"]
    assert all(e.synonyms == () for e in entries)
    assert entries[1].source is ConfigSource.DEFAULT_CONFIG
    jitter = resolve_topic_config(cfg(log_roll_jitter_hours="2"), {}, keys=["segment.jitter.ms"])
    assert jitter[0].value == "7200000"
    assert jitter[0].source is ConfigSource.STATIC_BROKER_CONFIG


def test_validate_topic_overrides() -> None:
    parsed = validate_topic_overrides(
        {"retention.ms": "100", "cleanup.policy": "compact", "preallocate": "true"}
    )
    assert parsed == {"retention.ms": 100, "cleanup.policy": ("compact",), "preallocate": True}


@pytest.mark.parametrize(
    ("overrides", "key", "text"),
    [
        ({"retention.msx": "1"}, "retention.msx", "unknown config key 'retention.msx'"),
        ({"retention.ms": "-2"}, "retention.ms", "at least -1"),
        ({"retention.ms": "soon"}, "retention.ms", "64-bit integer"),
        ({"segment.bytes": "10"}, "segment.bytes", "at least 14"),
        ({"cleanup.policy": "compact,archive"}, "cleanup.policy", "compact, delete"),
        ({"min.cleanable.dirty.ratio": "2"}, "min.cleanable.dirty.ratio", "between 0 and 1"),
        ({"message.timestamp.type": "Now"}, "message.timestamp.type", "CreateTime"),
        ({"unclean.leader.election.enable": "maybe"}, "unclean.leader.election.enable", "true"),
        ({"min.insync.replicas": "0"}, "min.insync.replicas", "at least 1"),
        ({"segment.ms": "0"}, "segment.ms", "at least 1"),
        ({"flush.messages": "0"}, "flush.messages", "at least 1"),
        ({"compression.zstd.level": "23"}, "compression.zstd.level", "between"),
        (
            {"leader.replication.throttled.replicas": "0:x"},
            "leader.replication.throttled.replicas",
            "partition:brokerId",
        ),
        ({"remote.storage.enable": "true"}, "remote.storage.enable", "tiered storage"),
        ({"max.message.bytes": None}, "max.message.bytes", "null value"),
        (
            {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
            "min.compaction.lag.ms",
            "at most max.compaction.lag.ms",
        ),
    ],
)
def test_validate_topic_overrides_rejects(
    overrides: dict[str, str | None], key: str, text: str
) -> None:
    with pytest.raises(ConfigError) as info:
        validate_topic_overrides(overrides)
    assert info.value.key == key
    assert text in str(info.value)


def test_validate_topic_overrides_checks_against_broker_defaults() -> None:
    broker = cfg(log_cleaner_max_compaction_lag_ms="100")
    with pytest.raises(ConfigError, match=r"min\.compaction\.lag\.ms"):
        validate_topic_overrides({"min.compaction.lag.ms": "200"}, broker)
    assert validate_topic_overrides({"leader.replication.throttled.replicas": "*"}) == {
        "leader.replication.throttled.replicas": ("*",)
    }
    assert validate_topic_overrides({"follower.replication.throttled.replicas": "0:1,1:2"})


def test_describe_broker_config() -> None:
    broker = props_cfg({"num.partitions": "3", "log.retention.minutes": "10"})
    entries = describe_broker_config(broker)
    assert [e.name for e in entries] == sorted(BROKER_KEYS)
    partitions = _entry(entries, "num.partitions")
    assert (partitions.value, partitions.source) == ("3", ConfigSource.STATIC_BROKER_CONFIG)
    assert partitions.read_only
    assert partitions.synonyms == (
        ConfigSynonym("num.partitions", "3", ConfigSource.STATIC_BROKER_CONFIG),
    )
    retention = _entry(entries, "log.retention.ms")
    assert retention.value is None
    assert not retention.read_only
    assert retention.source is ConfigSource.STATIC_BROKER_CONFIG
    assert retention.synonyms == (
        ConfigSynonym("log.retention.minutes", "10", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    )
    rack = _entry(entries, "broker.rack")
    assert (rack.value, rack.source, rack.synonyms) == (None, ConfigSource.DEFAULT_CONFIG, ())
    cleaner = _entry(entries, "log.cleaner.io.max.bytes.per.second")
    assert cleaner.value == "1.7976931348623157E308"
    assert cleaner.config_type is ConfigType.DOUBLE
    only = describe_broker_config(broker, keys=["node.id", "bogus"], include_synonyms=False)
    assert [(e.name, e.value, e.synonyms) for e in only] == [("node.id", "1", ())]


# --- wire numbers and value helpers --------------------------------------------------------------


def test_wire_enum_numbers() -> None:
    assert [int(t) for t in ConfigType][1:] == list(range(1, 10))
    assert (int(ConfigType.BOOLEAN), int(ConfigType.LIST), int(ConfigType.PASSWORD)) == (1, 7, 9)
    sources = {s.name: int(s) for s in ConfigSource}
    assert sources["DYNAMIC_TOPIC_CONFIG"] == 1
    assert sources["STATIC_BROKER_CONFIG"] == 4
    assert sources["DEFAULT_CONFIG"] == 5


def test_value_helpers() -> None:
    assert parse_value("k", ConfigType.PASSWORD, " secret ") == " secret "
    assert parse_value("k", ConfigType.STRING, " s ") == "s"
    assert parse_value("k", ConfigType.DOUBLE, "1e3") == 1000.0
    assert parse_value("k", ConfigType.LIST, "a,,b") == ("a", "", "b")
    assert to_string(None) is None
    assert to_string(True) == "true"
    assert to_string(("a", "b")) == "a,b"
    assert to_string(1.0e7) == "1.0E7"
    assert to_string(0.25) == "0.25"
    assert to_string(LONG_MAX) == "9223372036854775807"


# --- roles and the controller quorum ------------------------------------------------------------

COMBINED = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "controller.listener.names": "CONTROLLER",
}


def test_voters_parse_into_one_typed_map() -> None:
    config = props_cfg(
        {**COMBINED, "controller.quorum.voters": "1@127.0.0.1:9093, 2@[::1]:9095,3@kafka-3:9097"}
    )
    assert dict(config.quorum_voters) == {
        1: ("127.0.0.1", 9093),
        2: ("::1", 9095),
        3: ("kafka-3", 9097),
    }
    assert str(config.quorum_voters[2]) == "[::1]:9095"
    assert not config.standalone
    assert config.controller_endpoints == (("CONTROLLER", "127.0.0.1", 9093),)


@pytest.mark.parametrize(
    ("voters", "expected"),
    [
        ("1:localhost:9093", "id@host:port"),
        ("1@localhost", "id@host:port"),
        ("-1@localhost:9093", "id@host:port"),
        ("1@127.0.0.1:9093,1@127.0.0.1:9094", "each voter id once (1 repeats)"),
    ],
)
def test_malformed_voters_are_refused_by_name(voters: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=r"controller\.quorum\.voters") as info:
        props_cfg({**COMBINED, "controller.quorum.voters": voters})
    assert expected in str(info.value)


def test_bootstrap_servers_parse() -> None:
    config = props_cfg({**COMBINED, "controller.quorum.bootstrap.servers": "a:9093,[::1]:9094"})
    assert config.quorum_bootstrap_servers == (("a", 9093), ("::1", 9094))
    with pytest.raises(ConfigError, match=r"controller\.quorum\.bootstrap\.servers"):
        props_cfg({**COMBINED, "controller.quorum.bootstrap.servers": "a"})


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"controller.quorum.voters": "2@127.0.0.1:9093"},
            "If process.roles contains the 'controller' role, the node id 1 must be included "
            "in the set of voters controller.quorum.voters={2}",
        ),
        (
            {"process.roles": "broker", "controller.quorum.voters": "1@127.0.0.1:9093",
             "listeners": "PLAINTEXT://127.0.0.1:9092"},
            "If process.roles contains just the 'broker' role, the node id 1 must not be "
            "included in the set of voters",
        ),
        (
            {"process.roles": "broker", "controller.quorum.voters": "2@127.0.0.1:9093",
             "listeners": "PLAINTEXT://127.0.0.1:9092", "controller.listener.names": ""},
            "controller.listener.names must contain at least one value when running KRaft "
            "with just the broker role",
        ),
        (
            {"process.roles": "broker", "listeners": "PLAINTEXT://127.0.0.1:9092"},
            "either controller.quorum.bootstrap.servers must contain the set of bootstrap "
            "controllers or controller.quorum.voters must contain a parseable set",
        ),
        (
            {"process.roles": "controller", "controller.quorum.voters": "1@127.0.0.1:9093"},
            "The listeners config must only contain KRaft controller listeners from "
            "controller.listener.names when process.roles=controller",
        ),
        (
            {"controller.quorum.voters": "1@127.0.0.1:9093", "controller.listener.names": "",
             "listeners": "PLAINTEXT://127.0.0.1:9092"},
            "controller.listener.names must contain at least one value appearing in the "
            "'listeners' configuration when running the KRaft controller role",
        ),
        (
            {"controller.quorum.voters": "1@127.0.0.1:9999"},
            "gives this node (1) the address 127.0.0.1:9999, but none of its controller "
            "listeners (CONTROLLER://127.0.0.1:9093) has that port",
        ),
        (
            {"controller.quorum.voters": "1@127.0.0.1:9093",
             "listeners": "CONTROLLER://127.0.0.1:9093"},
            "There must be at least one advertised listener. Perhaps all listeners appear in "
            "controller.listener.names?",
        ),
    ],
)  # fmt: skip
def test_kafka_quorum_rules(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        props_cfg({**COMBINED, **props})
    assert message in str(info.value)


def test_a_controller_only_node_may_advertise_its_controller_listener() -> None:
    config = props_cfg(
        {
            "process.roles": "controller",
            "node.id": "3",
            "controller.quorum.voters": "3@localhost:9093",
            "listeners": "CONTROLLER://:9093",
            "advertised.listeners": "CONTROLLER://localhost:9093",
            "controller.listener.names": "CONTROLLER",
        }
    )
    assert config.advertised_endpoints == ()
    assert config.advertised_controller_endpoints == (("CONTROLLER", "localhost", 9093),)


def test_the_embedded_default_is_a_one_node_quorum() -> None:
    config = BrokerConfig()
    assert config.standalone
    assert config.quorum_voters == {}
    assert config.multi_node_refusal() is None


@pytest.mark.parametrize(
    "props",
    [
        {},
        {"controller.quorum.voters": "1@127.0.0.1:9093"},
        {"controller.quorum.voters": "1@localhost:9093"},  # the own id: only the port must agree
        {"controller.quorum.bootstrap.servers": "localhost:9093"},
    ],
)
def test_one_node_alone_may_start(props: dict[str, str]) -> None:
    assert props_cfg({**COMBINED, **props}).multi_node_refusal() is None


@pytest.mark.parametrize(
    ("props", "names"),
    [
        ({"controller.quorum.bootstrap.servers": "10.0.0.2:9093"},
         "controller.quorum.bootstrap.servers names 10.0.0.2:9093"),
        ({"process.roles": "broker", "controller.quorum.voters": "",
          "controller.quorum.bootstrap.servers": "10.0.0.2:9093",
          "listeners": "PLAINTEXT://127.0.0.1:9092"},
         "controller.quorum.bootstrap.servers names 10.0.0.2:9093"),
    ],
)  # fmt: skip
def test_dynamic_quorums_are_refused(props: dict[str, str], names: str) -> None:
    refusal = props_cfg({**COMBINED, **props}).multi_node_refusal()
    assert refusal is not None
    assert names in refusal
    assert "dynamic controller quorums (KIP-853) are not implemented yet" in refusal
    assert "controller.quorum.voters" in refusal


@pytest.mark.parametrize(
    ("props", "quorum"),
    [
        ({}, False),
        ({"controller.quorum.voters": "1@127.0.0.1:9093"}, False),
        ({"controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097"},
         True),
        ({"process.roles": "broker", "controller.quorum.voters": "2@10.0.0.2:9093",
          "listeners": "PLAINTEXT://127.0.0.1:9092"}, True),
        ({"process.roles": "controller", "controller.quorum.voters": "1@127.0.0.1:9093",
          "listeners": "CONTROLLER://127.0.0.1:9093"}, True),
    ],
)  # fmt: skip
def test_static_voters_run_the_quorum(props: dict[str, str], quorum: bool) -> None:
    """More than one voter, or a single role, runs the Raft quorum; one combined node alone
    runs the single-node controller. Neither is refused."""
    config = props_cfg({**COMBINED, **props})
    assert config.multi_node_refusal() is None
    assert config.runs_quorum is quorum
