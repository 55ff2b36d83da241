"""Strom's configuration, keyed, typed and validated like Apache Kafka 4.0's.

The one config package: everything Strom knows about config keys lives here,
and the rest of Strom asks it. What is where:

- `broker`: `BrokerConfig`, every broker key (type, default, validator, dynamic
  or not) and the effective values derived from them; `load_config(path,
  overrides)` reads a server.properties file plus `key=value` overrides, as
  kafka-server-start does. Attributes are Kafka keys with dots as underscores.
- `topic`: `TopicConfig`, every topic key and the broker keys it falls back to.
- `group`: `GroupConfig`, the group configs (ConfigResource GROUP) over the broker's
  group.consumer/share/streams.* defaults and bounds: validation and DescribeConfigs entries.
- `dynamic`: dynamic broker configs (stored in the metadata log) over the static
  file: which apply, which a change may name, the effective configuration.
- `resolve`: a topic's effective config, and DescribeConfigs entries (value,
  source, synonym chain) for topics and brokers.
- `alter`: IncrementalAlterConfigs' operations and what they do to a value.
- `quorum`: controller.quorum.voters / bootstrap.servers parsed into addresses, and why a
  configuration needs other nodes (refused until the Raft driver exists).
- `values`, `validators`, `keys`, `listeners`, `properties`, `ignored`,
  `errors`: value types and rendering, validators, the field declaration,
  listener URLs, properties-file parsing, accepted-but-unused Kafka keys.

Strom-only keys: `cluster.id` (cluster id for newly formatted storage) and
`strom.log.level` (root log level); `STROM_DEFAULTS` lists deliberate default changes.
Imports only `strom.wire`; the coordinators, storage and broker import it.
"""

from strom.config.alter_ops import AlterOp
from strom.config.broker import BROKER_KEYS, STROM_DEFAULTS, BrokerConfig, load_config
from strom.config.config_error import ConfigError
from strom.config.dynamic import BrokerLayers
from strom.config.group import (
    GROUP_KEYS,
    GroupConfig,
    describe_group_config,
    validate_group_overrides,
)
from strom.config.ignored import IGNORED_KEYS, IGNORED_PREFIXES, is_ignored
from strom.config.keys import ConfigKey, Synonym
from strom.config.listeners import (
    SECURITY_PROTOCOLS,
    Listener,
    parse_listeners,
    parse_protocol_map,
)
from strom.config.properties_file import (
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
    describe_cluster_defaults,
    effective_topic_config,
    resolve_topic_config,
    topic_min_insync_replicas,
    validate_topic_overrides,
)
from strom.config.topic import TOPIC_KEYS, TopicConfig
from strom.config.values import (
    INT_MAX,
    LONG_MAX,
    ConfigResource,
    ConfigSource,
    ConfigType,
    ConfigValue,
)

__all__ = [
    "BROKER_KEYS",
    "BROKER_SYNONYMS",
    "GROUP_KEYS",
    "IGNORED_KEYS",
    "IGNORED_PREFIXES",
    "INT_MAX",
    "LONG_MAX",
    "SECURITY_PROTOCOLS",
    "STROM_DEFAULTS",
    "TOPIC_KEYS",
    "AlterOp",
    "BrokerConfig",
    "BrokerLayers",
    "ConfigEntry",
    "ConfigError",
    "ConfigKey",
    "ConfigResource",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "ConfigValue",
    "GroupConfig",
    "Listener",
    "Synonym",
    "TopicConfig",
    "apply_overrides",
    "describe_broker_config",
    "describe_cluster_defaults",
    "describe_group_config",
    "effective_topic_config",
    "is_ignored",
    "load_config",
    "parse_listeners",
    "parse_override",
    "parse_properties",
    "parse_protocol_map",
    "read_properties_file",
    "resolve_topic_config",
    "topic_min_insync_replicas",
    "validate_group_overrides",
    "validate_topic_overrides",
]
