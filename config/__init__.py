"""Strom's broker configuration, keyed, typed and validated like Apache Kafka 4.0's.

Load with `load_config(path, overrides)` (a server.properties file plus
`key=value` overrides, as kafka-server-start does) or `BrokerConfig.from_properties`.
Attributes are Kafka keys with dots as underscores. Topic-level keys, their
broker synonyms and DescribeConfigs resolution live in `topic` and `resolve`.
Strom-only keys: `cluster.id` (cluster id for newly formatted storage) and
`strom.log.level` (root log level); `STROM_DEFAULTS` lists deliberate default changes.

The one config package: imports only `strom.wire`; everything else reads its settings here.
"""

from strom.config.broker import BROKER_KEYS, STROM_DEFAULTS, BrokerConfig, load_config
from strom.config.errors import ConfigError
from strom.config.ignored import IGNORED_KEYS, IGNORED_PREFIXES, is_ignored
from strom.config.keys import ConfigKey, Synonym
from strom.config.listeners import (
    SECURITY_PROTOCOLS,
    Listener,
    parse_listeners,
    parse_protocol_map,
)
from strom.config.properties import (
    apply_overrides,
    parse_override,
    parse_properties,
    read_properties_file,
)
from strom.config.resolve import (
    BROKER_SYNONYMS,
    ConfigEntry,
    ConfigSynonym,
    describe_broker_config,
    effective_topic_config,
    resolve_topic_config,
    validate_topic_overrides,
)
from strom.config.topic import TOPIC_KEYS, TopicConfig
from strom.config.values import INT_MAX, LONG_MAX, ConfigSource, ConfigType, ConfigValue

__all__ = [
    "BROKER_KEYS",
    "BROKER_SYNONYMS",
    "IGNORED_KEYS",
    "IGNORED_PREFIXES",
    "INT_MAX",
    "LONG_MAX",
    "SECURITY_PROTOCOLS",
    "STROM_DEFAULTS",
    "TOPIC_KEYS",
    "BrokerConfig",
    "ConfigEntry",
    "ConfigError",
    "ConfigKey",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "ConfigValue",
    "Listener",
    "Synonym",
    "TopicConfig",
    "apply_overrides",
    "describe_broker_config",
    "effective_topic_config",
    "is_ignored",
    "load_config",
    "parse_listeners",
    "parse_override",
    "parse_properties",
    "parse_protocol_map",
    "read_properties_file",
    "resolve_topic_config",
    "validate_topic_overrides",
]
