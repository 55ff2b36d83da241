"""`MetadataImage`: the cluster metadata as of one log offset, immutable.

Handlers read it on every request, so lookups are plain dict gets. It is
never mutated: a `MetadataDelta` (see `delta`) replays records against an
image and builds the next one, copying only the maps that changed, so an
image a handler holds stays consistent however long it holds it. The mappings
are typed read-only; callers must not cast them back to dicts and mutate.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar, NamedTuple

from strom.config.dynamic import BrokerLayers
from strom.config.values import ConfigResource
from strom.coordinator.metadata.acls import AclBinding
from strom.wire.message import Message

if TYPE_CHECKING:
    from strom.config import BrokerConfig
    from strom.coordinator.metadata.delta import MetadataDelta

TOPIC_RESOURCE = ConfigResource.TOPIC.value
BROKER_RESOURCE = ConfigResource.BROKER.value
GROUP_RESOURCE = ConfigResource.GROUP.value
"""ConfigRecord resource types (Kafka's ConfigResource.Type ids)."""

METADATA_VERSION = "metadata.version"
ELR_VERSION = "eligible.leader.replicas.version"
TRANSACTION_VERSION = "transaction.version"
"""Kafka's transactions feature: 1 flexible transaction state records, 2 transactions v2
(KIP-890 part 2: an epoch bump per transaction, partitions added by the writes themselves)."""
"""Kafka's feature for eligible leader replicas (KIP-966): level 1 enables them."""
NO_LEADER = -1

ConfigKey = tuple[int, str]
"""(resource type, resource name): one ConfigRecord resource."""

_EMPTY: Mapping[str, str] = MappingProxyType({})


class Provenance(NamedTuple):
    """Where in the log an image stands: last offset, its epoch and timestamp (-1: none)."""

    offset: int = -1
    epoch: int = -1
    timestamp: int = -1


@dataclass(frozen=True, slots=True)
class PartitionImage:
    """One partition's replica assignment and leadership, as PartitionRecord carries it."""

    partition_id: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = 0
    elr: tuple[int, ...] = ()
    """Eligible leader replicas (KIP-966): out of the ISR since it fell below
    min.insync.replicas, yet holding every committed record; may lead when the ISR is empty."""
    last_known_elr: tuple[int, ...] = ()
    """The last leader before the ISR emptied (Kafka's lastKnownElr in its last-known-leader
    use): the fallback leader when both the ISR and the ELR are empty."""


@dataclass(frozen=True, slots=True, eq=True)
class TopicImage:
    """A topic: name, id and its partitions by index (0..n-1)."""

    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionImage]

    @property
    def num_partitions(self) -> int:
        return len(self.partitions)

    def partition(self, index: int) -> PartitionImage | None:
        return self.partitions.get(index)


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    name: str
    host: str
    port: int
    security_protocol: int


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A registered broker, as RegisterBrokerRecord and its fence/unfence changes leave it."""

    broker_id: int
    incarnation_id: uuid.UUID
    epoch: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool = False
    features: tuple[tuple[str, int, int], ...] = ()
    """(name, min supported, max supported) as the broker reported them."""
    log_dirs: tuple[uuid.UUID, ...] = ()

    @property
    def active(self) -> bool:
        """May lead and be in ISRs: unfenced and not shutting down."""
        return not self.fenced and not self.in_controlled_shutdown

    def endpoint(self, listener: str) -> BrokerEndpoint | None:
        return next((e for e in self.endpoints if e.name == listener), None)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """A user's SCRAM credential for one mechanism, as UserScramCredentialRecord stores it:
    never the password, only what verifies a client's proof (StoredKey) and proves the
    server's knowledge (ServerKey)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


QuotaEntity = tuple[tuple[str, str | None], ...]
"""A client quota entity: (entity type, name or None for the default) pairs, sorted by type
(`(("client-id", None), ("user", "alice"))`)."""

ScramKey = tuple[str, int]
"""(user name, SCRAM mechanism id: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512)."""


@dataclass(frozen=True, slots=True)
class MetadataImage:
    """Immutable cluster metadata. Build with `MetadataImage.EMPTY.apply_all(records)`."""

    topics_by_name: Mapping[str, TopicImage] = field(default_factory=dict)
    topics_by_id: Mapping[uuid.UUID, TopicImage] = field(default_factory=dict)
    configs: Mapping[ConfigKey, Mapping[str, str]] = field(default_factory=dict)
    """Overrides per resource; only non-empty resources appear."""
    brokers_by_id: Mapping[int, BrokerRegistration] = field(default_factory=dict)
    features: Mapping[str, int] = field(default_factory=dict)
    """Finalized feature levels (a level of 0 removes the feature)."""
    next_producer_id: int = 0
    """First producer id of the next block the controller hands out."""
    scram_credentials: Mapping[ScramKey, ScramCredential] = field(default_factory=dict)
    """SCRAM credentials by (user, mechanism id)."""
    acls: Mapping[uuid.UUID, AclBinding] = field(default_factory=dict)
    """ACLs (AccessControlEntryRecord) by id."""
    client_quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=dict)
    """Client quotas (ClientQuotaRecord) by entity; only entities with a value appear."""
    provenance: Provenance = field(default_factory=Provenance)
    replica_index_cache: object = field(default=None, init=False, repr=False, compare=False)
    """The controller's index of partitions by broker for this image, once built or carried
    over (`strom.coordinator.metadata.replica_index`); not part of the metadata."""

    EMPTY: ClassVar[MetadataImage]
    """The image before any record (set after the class body)."""

    # --- topics ---------------------------------------------------------------

    def topic(self, name: str) -> TopicImage | None:
        return self.topics_by_name.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        return self.topics_by_id.get(topic_id)

    def partition(self, topic: str, index: int) -> PartitionImage | None:
        image = self.topics_by_name.get(topic)
        return None if image is None else image.partitions.get(index)

    def topic_names(self) -> list[str]:
        """Every topic name, sorted."""
        return sorted(self.topics_by_name)

    # --- configs --------------------------------------------------------------

    def config_overrides(self, resource_type: int, resource_name: str) -> Mapping[str, str]:
        """The stored overrides of one resource (read-only; empty if none)."""
        return self.configs.get((resource_type, resource_name), _EMPTY)

    def topic_config_overrides(self, name: str) -> dict[str, str]:
        """A topic's config overrides (a fresh dict the caller may keep)."""
        return dict(self.configs.get((TOPIC_RESOURCE, name), _EMPTY))

    def broker_config_overrides(self, broker_id: int | None = None) -> dict[str, str]:
        """Dynamic broker configs: the cluster-wide defaults (resource name ""), or
        with `broker_id` those defaults overlaid with that broker's own overrides."""
        merged = dict(self.configs.get((BROKER_RESOURCE, ""), _EMPTY))
        if broker_id is not None:
            merged.update(self.configs.get((BROKER_RESOURCE, str(broker_id)), _EMPTY))
        return merged

    def broker_config_layers(self, static: BrokerConfig) -> BrokerLayers:
        """The configuration of node `static.node_id` as layers: its static config and the
        dynamic overrides stored for it and for the cluster (`.effective()` combines them)."""
        return BrokerLayers(
            static,
            self.configs.get((BROKER_RESOURCE, str(static.node_id)), _EMPTY),
            self.configs.get((BROKER_RESOURCE, ""), _EMPTY),
        )

    # --- brokers, features, producer ids -------------------------------------

    def brokers(self) -> list[BrokerRegistration]:
        """Registered brokers by id."""
        return [self.brokers_by_id[i] for i in sorted(self.brokers_by_id)]

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        return self.brokers_by_id.get(broker_id)

    @property
    def metadata_version(self) -> int:
        """The finalized metadata.version level (0 before bootstrap)."""
        return self.features.get(METADATA_VERSION, 0)

    @property
    def elr_enabled(self) -> bool:
        """eligible.leader.replicas.version is finalized at 1 or more (KIP-966)."""
        return self.features.get(ELR_VERSION, 0) >= 1

    # --- security ---------------------------------------------------------------

    def scram_credential(self, user: str, mechanism: int) -> ScramCredential | None:
        return self.scram_credentials.get((user, mechanism))

    # --- building -------------------------------------------------------------

    def delta(self) -> MetadataDelta:
        """A delta to replay records against this image."""
        from strom.coordinator.metadata.delta import MetadataDelta

        return MetadataDelta(self)

    def apply(self, record: Message) -> MetadataImage:
        """The image after one more record (for batches prefer `apply_all`)."""
        return self.apply_all((record,))

    def apply_all(
        self, records: Iterable[Message], provenance: Provenance | None = None
    ) -> MetadataImage:
        """The image after `records`, in order; each changed map is copied once."""
        delta = self.delta()
        for record in records:
            delta.replay(record)
        return delta.apply(provenance)


MetadataImage.EMPTY = MetadataImage()
