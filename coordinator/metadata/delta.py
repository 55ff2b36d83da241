"""`MetadataDelta`: replay records against an image, then build the next image.

Replay is the only place metadata records gain meaning, and it is shared by
the controller (after its own appends), log replay at start-up and, later,
Raft followers: the same records in the same order give the same image.
Copy-on-write: each top-level map is copied at most once per delta, and a
topic's partition map only when one of its partitions changes. Records that
contradict the image (a partition of an unknown topic, a producer id block
that goes backwards) raise MetadataError; record types Strom does not model
(delegation tokens, no-ops) are ignored.

The delta also says what changed, for listeners: created/deleted topics,
changed partitions, config resources, brokers and features.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from strom.coordinator.metadata.acls import AclBinding
from strom.coordinator.metadata.image import (
    TOPIC_RESOURCE,
    BrokerEndpoint,
    BrokerRegistration,
    ConfigKey,
    MetadataImage,
    PartitionImage,
    Provenance,
    QuotaEntity,
    ScramCredential,
    ScramKey,
    TopicImage,
)
from strom.coordinator.metadata.metadata_records import MetadataError
from strom.wire.message import Message

if TYPE_CHECKING:
    from strom.wire.formats.metadata.access_control_entry_record import AccessControlEntryRecord
    from strom.wire.formats.metadata.broker_registration_change_record import (
        BrokerRegistrationChangeRecord,
    )
    from strom.wire.formats.metadata.clear_elr_record import ClearElrRecord
    from strom.wire.formats.metadata.client_quota_record import ClientQuotaRecord
    from strom.wire.formats.metadata.config_record import ConfigRecord
    from strom.wire.formats.metadata.feature_level_record import FeatureLevelRecord
    from strom.wire.formats.metadata.partition_change_record import PartitionChangeRecord
    from strom.wire.formats.metadata.partition_record import PartitionRecord
    from strom.wire.formats.metadata.producer_ids_record import ProducerIdsRecord
    from strom.wire.formats.metadata.register_broker_record import RegisterBrokerRecord
    from strom.wire.formats.metadata.remove_access_control_entry_record import (
        RemoveAccessControlEntryRecord,
    )
    from strom.wire.formats.metadata.remove_topic_record import RemoveTopicRecord
    from strom.wire.formats.metadata.remove_user_scram_credential_record import (
        RemoveUserScramCredentialRecord,
    )
    from strom.wire.formats.metadata.topic_record import TopicRecord
    from strom.wire.formats.metadata.unregister_broker_record import UnregisterBrokerRecord
    from strom.wire.formats.metadata.user_scram_credential_record import UserScramCredentialRecord

NO_LEADER_CHANGE = -2


class MetadataDelta:
    """Changes against `base`; `replay` records in order, then `apply()` once."""

    def __init__(self, base: MetadataImage) -> None:
        self.base = base
        self._topics: dict[uuid.UUID, TopicImage] | None = None
        self._names: dict[str, uuid.UUID] = {}  # topic names added by this delta
        self._gone: set[str] = set()  # topic names removed by this delta
        self._parts: dict[uuid.UUID, dict[int, PartitionImage]] = {}
        self._configs: dict[ConfigKey, Mapping[str, str]] | None = None
        self._owned_configs: dict[ConfigKey, dict[str, str]] = {}
        self._brokers: dict[int, BrokerRegistration] | None = None
        self._features: dict[str, int] | None = None
        self._next_producer_id = base.next_producer_id
        self._scram: dict[ScramKey, ScramCredential] | None = None
        self._acls: dict[uuid.UUID, AclBinding] | None = None
        self._quotas: dict[QuotaEntity, Mapping[str, float]] | None = None
        self.created_topics: set[uuid.UUID] = set()
        self.deleted_topics: dict[uuid.UUID, TopicImage] = {}
        """Topics that existed in `base` and are gone (a topic created then deleted
        within this delta appears in neither set)."""
        self.changed_partitions: set[tuple[uuid.UUID, int]] = set()
        self.changed_configs: set[ConfigKey] = set()
        self.changed_brokers: set[int] = set()
        self.changed_features: set[str] = set()
        self.changed_scram: set[ScramKey] = set()
        self.changed_acls = False
        self.changed_quotas = False
        self._result: MetadataImage | None = None

    # --- copy-on-write accessors --------------------------------------------

    def _topic_map(self) -> dict[uuid.UUID, TopicImage]:
        if self._topics is None:
            self._topics = dict(self.base.topics_by_id)
        return self._topics

    def _partitions(self, topic_id: uuid.UUID) -> dict[int, PartitionImage]:
        parts = self._parts.get(topic_id)
        if parts is None:
            topic = self._topic_map().get(topic_id)
            if topic is None:
                raise MetadataError(f"partition record for unknown topic id {topic_id}")
            parts = self._parts[topic_id] = dict(topic.partitions)
        return parts

    def _config_map(self, key: ConfigKey) -> dict[str, str]:
        if self._configs is None:
            self._configs = dict(self.base.configs)
        values = self._owned_configs.get(key)
        if values is None:
            values = self._owned_configs[key] = dict(self._configs.get(key, {}))
            self._configs[key] = values
        return values

    def _broker_map(self) -> dict[int, BrokerRegistration]:
        if self._brokers is None:
            self._brokers = dict(self.base.brokers_by_id)
        return self._brokers

    # --- replay ---------------------------------------------------------------

    def replay(self, record: Message) -> None:
        """Apply one record to this delta (see the module docstring for errors)."""
        if self._result is not None:
            raise RuntimeError("this delta has already been applied")
        handler = _HANDLERS.get(record.NAME)
        if handler is not None:
            handler(self, record)

    def _topic(self, r: TopicRecord) -> None:
        topics = self._topic_map()
        if r.topic_id in topics:
            raise MetadataError(f"topic id {r.topic_id} already exists")
        if r.name in self._names or (
            r.name in self.base.topics_by_name and r.name not in self._gone
        ):
            raise MetadataError(f"topic {r.name!r} already exists")
        topics[r.topic_id] = TopicImage(r.name, r.topic_id, {})
        self._names[r.name] = r.topic_id
        self._parts[r.topic_id] = {}
        self.created_topics.add(r.topic_id)

    def _partition(self, r: PartitionRecord) -> None:
        self._partitions(r.topic_id)[r.partition_id] = PartitionImage(
            r.partition_id, tuple(r.replicas), tuple(r.isr), r.leader, r.leader_epoch,
            r.partition_epoch, tuple(r.removing_replicas), tuple(r.adding_replicas),
            r.leader_recovery_state, tuple(r.eligible_leader_replicas or ()),
            tuple(r.last_known_elr or ()),
        )  # fmt: skip
        self.changed_partitions.add((r.topic_id, r.partition_id))

    def replay_partitions(self, topic_id: uuid.UUID, partitions: list[PartitionImage]) -> None:
        """What replaying a PartitionRecord for each of `partitions` (of one topic, in order)
        does, from their decoded fields: a snapshot's load (`raft_entries.decode_snapshot`)."""
        if self._result is not None:
            raise RuntimeError("this delta has already been applied")
        parts = self._partitions(topic_id)
        for partition in partitions:
            parts[partition.partition_id] = partition
        self.changed_partitions.update([(topic_id, p.partition_id) for p in partitions])

    def _partition_change(self, r: PartitionChangeRecord) -> None:
        parts = self._partitions(r.topic_id)
        old = parts.get(r.partition_id)
        if old is None:
            raise MetadataError(f"change to unknown partition {r.topic_id}:{r.partition_id}")
        leader, leader_epoch = old.leader, old.leader_epoch
        if r.leader != NO_LEADER_CHANGE:
            leader, leader_epoch = r.leader, old.leader_epoch + 1
        parts[r.partition_id] = PartitionImage(
            r.partition_id,
            old.replicas if r.replicas is None else tuple(r.replicas),
            old.isr if r.isr is None else tuple(r.isr),
            leader,
            leader_epoch,
            old.partition_epoch + 1,
            old.removing_replicas if r.removing_replicas is None else tuple(r.removing_replicas),
            old.adding_replicas if r.adding_replicas is None else tuple(r.adding_replicas),
            old.leader_recovery_state if r.leader_recovery_state < 0 else r.leader_recovery_state,
            old.elr if r.eligible_leader_replicas is None else tuple(r.eligible_leader_replicas),
            old.last_known_elr if r.last_known_elr is None else tuple(r.last_known_elr),
        )
        self.changed_partitions.add((r.topic_id, r.partition_id))

    def _clear_elr(self, r: ClearElrRecord) -> None:
        """Empty the ELR and last known ELR of one topic's partitions (every topic's when the
        name is empty), as a min.insync.replicas change does; each cleared partition's epoch
        is bumped, as a PartitionChangeRecord would."""
        if r.topic_name:
            topic_id = self._names.get(r.topic_name)
            if topic_id is None and r.topic_name not in self._gone:
                found = self.base.topics_by_name.get(r.topic_name)
                topic_id = None if found is None else found.topic_id
            if topic_id is None:
                return  # nothing to clear (Kafka writes one per min.insync.replicas change)
            topic_ids = [topic_id]
        else:
            topic_ids = list(self._topic_map())
        for topic_id in topic_ids:
            parts = self._partitions(topic_id)
            for index, p in list(parts.items()):
                if p.elr or p.last_known_elr:
                    parts[index] = dataclasses.replace(
                        p, elr=(), last_known_elr=(), partition_epoch=p.partition_epoch + 1
                    )
                    self.changed_partitions.add((topic_id, index))

    def _remove_topic(self, r: RemoveTopicRecord) -> None:
        topics = self._topic_map()
        topic = topics.pop(r.topic_id, None)
        if topic is None:
            raise MetadataError(f"cannot remove unknown topic id {r.topic_id}")
        self._parts.pop(r.topic_id, None)
        self._names.pop(topic.name, None)
        self._gone.add(topic.name)
        self.changed_partitions = {p for p in self.changed_partitions if p[0] != r.topic_id}
        if r.topic_id in self.created_topics:
            self.created_topics.discard(r.topic_id)
        else:
            self.deleted_topics[r.topic_id] = topic
        key = (TOPIC_RESOURCE, topic.name)
        if key in self.base.configs or (self._configs is not None and key in self._configs):
            self._config_map(key).clear()
            self.changed_configs.add(key)

    def _config(self, r: ConfigRecord) -> None:
        key = (r.resource_type, r.resource_name)
        values = self._config_map(key)
        if r.value is None:
            values.pop(r.name, None)
        else:
            values[r.name] = r.value
        self.changed_configs.add(key)

    def _register_broker(self, r: RegisterBrokerRecord) -> None:
        self._broker_map()[r.broker_id] = BrokerRegistration(
            broker_id=r.broker_id,
            incarnation_id=r.incarnation_id,
            epoch=r.broker_epoch,
            endpoints=tuple(
                BrokerEndpoint(e.name, e.host, e.port, e.security_protocol) for e in r.end_points
            ),
            rack=r.rack,
            fenced=r.fenced,
            in_controlled_shutdown=r.in_controlled_shutdown,
            features=tuple(
                (f.name, f.min_supported_version, f.max_supported_version) for f in r.features
            ),
            log_dirs=tuple(r.log_dirs),
        )
        self.changed_brokers.add(r.broker_id)

    def _change_broker(self, broker_id: int, epoch: int, **changes: Any) -> None:
        brokers = self._broker_map()
        old = brokers.get(broker_id)
        if old is None or old.epoch != epoch:
            raise MetadataError(f"no broker {broker_id} registered with epoch {epoch}")
        brokers[broker_id] = dataclasses.replace(old, **changes)
        self.changed_brokers.add(broker_id)

    def _unregister_broker(self, r: UnregisterBrokerRecord) -> None:
        brokers = self._broker_map()
        old = brokers.get(r.broker_id)
        if old is None or old.epoch != r.broker_epoch:
            raise MetadataError(f"no broker {r.broker_id} registered with epoch {r.broker_epoch}")
        del brokers[r.broker_id]
        self.changed_brokers.add(r.broker_id)

    def _registration_change(self, r: BrokerRegistrationChangeRecord) -> None:
        changes: dict[str, Any] = {}
        if r.fenced:
            changes["fenced"] = r.fenced > 0
        if r.in_controlled_shutdown:
            changes["in_controlled_shutdown"] = r.in_controlled_shutdown > 0
        if r.log_dirs:
            changes["log_dirs"] = tuple(r.log_dirs)
        self._change_broker(r.broker_id, r.broker_epoch, **changes)

    def _feature(self, r: FeatureLevelRecord) -> None:
        if self._features is None:
            self._features = dict(self.base.features)
        if r.feature_level == 0:
            self._features.pop(r.name, None)
        else:
            self._features[r.name] = r.feature_level
        self.changed_features.add(r.name)

    def _producer_ids(self, r: ProducerIdsRecord) -> None:
        if r.next_producer_id <= self._next_producer_id:
            raise MetadataError(
                f"producer id block goes backwards: {r.next_producer_id} "
                f"after {self._next_producer_id}"
            )
        self._next_producer_id = r.next_producer_id

    # --- result ---------------------------------------------------------------

    def _scram_map(self) -> dict[ScramKey, ScramCredential]:
        if self._scram is None:
            self._scram = dict(self.base.scram_credentials)
        return self._scram

    def _scram_credential(self, r: UserScramCredentialRecord) -> None:
        key = (r.name, r.mechanism)
        self._scram_map()[key] = ScramCredential(r.salt, r.stored_key, r.server_key, r.iterations)
        self.changed_scram.add(key)

    def _remove_scram_credential(self, r: RemoveUserScramCredentialRecord) -> None:
        key = (r.name, r.mechanism)
        self._scram_map().pop(key, None)
        self.changed_scram.add(key)

    def _acl_map(self) -> dict[uuid.UUID, AclBinding]:
        if self._acls is None:
            self._acls = dict(self.base.acls)
        return self._acls

    def _acl(self, r: AccessControlEntryRecord) -> None:
        self._acl_map()[r.id] = AclBinding(
            r.resource_type, r.resource_name, r.pattern_type, r.principal, r.host, r.operation,
            r.permission_type,
        )  # fmt: skip
        self.changed_acls = True

    def _remove_acl(self, r: RemoveAccessControlEntryRecord) -> None:
        if self._acl_map().pop(r.id, None) is None:
            raise MetadataError(f"removal of unknown ACL {r.id}")
        self.changed_acls = True

    def _client_quota(self, r: ClientQuotaRecord) -> None:
        if self._quotas is None:
            self._quotas = dict(self.base.client_quotas)
        entity: QuotaEntity = tuple(sorted((e.entity_type, e.entity_name) for e in r.entity))
        values = dict(self._quotas.get(entity, {}))
        if r.remove:
            values.pop(r.key, None)
        else:
            values[r.key] = r.value
        if values:
            self._quotas[entity] = values
        else:
            self._quotas.pop(entity, None)
        self.changed_quotas = True

    def apply(self, provenance: Provenance | None = None) -> MetadataImage:
        """The image with every replayed change; `base` is left untouched.

        The first call builds the image; later calls return that same image
        (their `provenance` is ignored), and no record may be replayed after.
        """
        if self._result is not None:
            return self._result
        base = self.base
        by_id, by_name = base.topics_by_id, base.topics_by_name
        if self._topics is not None:
            topics = self._topics
            for topic_id, parts in self._parts.items():
                topic = topics[topic_id]
                topics[topic_id] = TopicImage(topic.name, topic_id, parts)
            by_id = topics
            by_name = {t.name: t for t in topics.values()}
        configs = base.configs
        if self._configs is not None:
            configs = {k: v for k, v in self._configs.items() if v}
        self._result = MetadataImage(
            topics_by_name=by_name,
            topics_by_id=by_id,
            configs=configs,
            brokers_by_id=base.brokers_by_id if self._brokers is None else self._brokers,
            features=base.features if self._features is None else self._features,
            next_producer_id=self._next_producer_id,
            scram_credentials=base.scram_credentials if self._scram is None else self._scram,
            acls=base.acls if self._acls is None else self._acls,
            client_quotas=base.client_quotas if self._quotas is None else self._quotas,
            provenance=base.provenance if provenance is None else provenance,
        )
        return self._result


_HANDLERS: dict[str, Any] = {
    "TopicRecord": MetadataDelta._topic,
    "PartitionRecord": MetadataDelta._partition,
    "PartitionChangeRecord": MetadataDelta._partition_change,
    "ClearElrRecord": MetadataDelta._clear_elr,
    "RemoveTopicRecord": MetadataDelta._remove_topic,
    "ConfigRecord": MetadataDelta._config,
    "RegisterBrokerRecord": MetadataDelta._register_broker,
    "UnregisterBrokerRecord": MetadataDelta._unregister_broker,
    "FenceBrokerRecord": lambda d, r: d._change_broker(r.id, r.epoch, fenced=True),
    "UnfenceBrokerRecord": lambda d, r: d._change_broker(r.id, r.epoch, fenced=False),
    "BrokerRegistrationChangeRecord": MetadataDelta._registration_change,
    "FeatureLevelRecord": MetadataDelta._feature,
    "ProducerIdsRecord": MetadataDelta._producer_ids,
    "UserScramCredentialRecord": MetadataDelta._scram_credential,
    "RemoveUserScramCredentialRecord": MetadataDelta._remove_scram_credential,
    "AccessControlEntryRecord": MetadataDelta._acl,
    "ClientQuotaRecord": MetadataDelta._client_quota,
    "RemoveAccessControlEntryRecord": MetadataDelta._remove_acl,
}
"""Record class name -> its replay. Keyed by name, so replay need not import the record
classes: a start-up that replays a few record types loads only those."""
