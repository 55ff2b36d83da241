"""`Controller`: the pure metadata state machine (requests in, records and responses out).

No I/O, no trio, no clock, no randomness of its own: ids come from the
`new_uuid` source it is given, so a test (or a Raft follower replaying the
leader's records) gets exactly the same outcome from the same inputs. Each
command reads the current image and returns a `ControllerResult`; nothing
changes until the caller has made the records durable and hands them back to
`replay`. That split is what lets a later Raft layer append the records to a
replicated log first and replay them on commit, on every controller alike.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from strom.config import LONG_MAX, BrokerConfig, Listener
from strom.coordinator.controller.brokers import (
    BrokerLeases,
    broker_heartbeat_steps,
    fence_stale_broker_steps,
    next_lease_expiry,
    register_broker_steps,
)
from strom.coordinator.controller.liveness import OfflineReplicas, PartitionKey
from strom.coordinator.controller.result import (
    PLAN_SLICE,
    Context,
    ControllerError,
    ControllerResult,
    Planning,
    finish,
)
from strom.coordinator.metadata import replica_index
from strom.coordinator.metadata.delta import MetadataDelta
from strom.coordinator.metadata.image import (
    ELR_VERSION,
    METADATA_VERSION,
    TRANSACTION_VERSION,
    MetadataImage,
    Provenance,
    TopicImage,
)
from strom.wire.errors import ErrorCode
from strom.wire.formats.metadata.feature_level_record import FeatureLevelRecord
from strom.wire.formats.metadata.producer_ids_record import ProducerIdsRecord
from strom.wire.message import Message

if TYPE_CHECKING:
    from strom.wire.messages.alter_client_quotas import (
        AlterClientQuotasRequest,
        AlterClientQuotasResponse,
    )
    from strom.wire.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
    from strom.wire.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
    from strom.wire.messages.alter_partition_reassignments import (
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
    )
    from strom.wire.messages.alter_user_scram_credentials import (
        AlterUserScramCredentialsRequest,
        AlterUserScramCredentialsResponse,
    )
    from strom.wire.messages.broker_heartbeat import (
        BrokerHeartbeatRequest,
        BrokerHeartbeatResponse,
    )
    from strom.wire.messages.broker_registration import (
        BrokerRegistrationRequest,
        BrokerRegistrationResponse,
    )
    from strom.wire.messages.create_acls import CreateAclsRequest, CreateAclsResponse
    from strom.wire.messages.create_partitions import (
        CreatePartitionsRequest,
        CreatePartitionsResponse,
    )
    from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
    from strom.wire.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
    from strom.wire.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
    from strom.wire.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
    from strom.wire.messages.incremental_alter_configs import (
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
    )
    from strom.wire.messages.list_partition_reassignments import (
        ListPartitionReassignmentsRequest,
        ListPartitionReassignmentsResponse,
    )

MIN_METADATA_VERSION = 7
"""3.3-IV3: the oldest metadata.version level Kafka 4.0 supports."""
LATEST_METADATA_VERSION = 25
"""4.0-IV3: Kafka 4.0's latest production level, written at bootstrap."""
ELR_MIN_METADATA_VERSION = 24
"""4.0-IV2: the metadata.version eligible.leader.replicas.version 1 and transaction.version 1-2
depend on (Kafka's rule)."""
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {ELR_VERSION: (0, 1), TRANSACTION_VERSION: (0, 2)}
"""Features other than metadata.version this node supports: name -> (min, max) level.
eligible.leader.replicas.version defaults to 0 on a new cluster: Kafka enables it by default
only from metadata.version 4.1-IV0, and Strom bootstraps 4.0-IV3 (`strom format --feature
eligible.leader.replicas.version=1` enables it). transaction.version: 1 flexible transaction
state records, 2 transactions v2 (KIP-890 part 2); a new cluster finalizes 2, as Kafka 4.0's
format does (`--feature transaction.version=0` keeps transactions v1)."""
PRODUCER_ID_BLOCK_SIZE = 1000
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


class Controller:
    """Kafka's controller semantics over a `MetadataImage` it owns."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        new_uuid: Callable[[], uuid.UUID],
        image: MetadataImage = MetadataImage.EMPTY,
        cluster_id: str = "",
    ) -> None:
        self._config = config
        self._new_uuid = new_uuid
        self._image = image
        self._context: Context | None = None
        self.cluster_id = cluster_id
        """The cluster id brokers must register with."""
        self.leases = BrokerLeases(
            config.broker_session_timeout_ms,
            silent_after_ms=min(
                2 * config.broker_heartbeat_interval_ms, config.broker_session_timeout_ms
            ),
        )
        """Broker liveness, the active controller's soft state (never in the log)."""
        self._offline = OfflineReplicas()

    @property
    def image(self) -> MetadataImage:
        """The image every command reads (as of the last `replay`)."""
        return self._image

    @property
    def node_id(self) -> int:
        return self._config.node_id

    def context(self) -> Context:
        """The inputs of a command; rebuilt only when the image changes."""
        if self._context is None or self._context.image is not self._image:
            layers = self._image.broker_config_layers(self._config)
            self._context = Context(
                image=self._image,
                config=layers.effective(),
                layers=layers,
                node_id=self.node_id,
                new_uuid=self._new_uuid,
            )
        return self._context

    def replay(
        self, records: Sequence[Message], provenance: Provenance | None = None
    ) -> MetadataDelta:
        """Apply durable records; returns the delta (its `base` is the previous image)."""
        delta = self.stage(records, provenance)
        self.adopt(delta)
        return delta

    def stage(
        self, records: Sequence[Message], provenance: Provenance | None = None
    ) -> MetadataDelta:
        """Replay `records` onto the current image without adopting the result.

        Raises MetadataError for records that would not apply, so a caller can
        refuse them before making them durable; `adopt` the delta afterwards.
        """
        return finish(self.stage_steps(records, provenance))

    def stage_steps(
        self, records: Sequence[Message], provenance: Provenance | None = None
    ) -> Generator[None, None, MetadataDelta]:
        """`stage` in steps: it yields every PLAN_SLICE records (`result.Planning`)."""
        delta = self._image.delta()
        for start in range(0, len(records), PLAN_SLICE):
            if start:
                yield
            for record in records[start : start + PLAN_SLICE]:
                delta.replay(record)
        delta.apply(provenance)
        return delta

    def adopt(self, delta: MetadataDelta) -> None:
        """Make a staged delta's image current; it must be based on the current image."""
        if delta.base is not self._image:
            raise ValueError("the delta was staged against an older image")
        self._image = delta.apply()
        replica_index.carry(delta, self._image)

    def reset(self, image: MetadataImage) -> None:
        """Adopt a whole image (loaded from a snapshot)."""
        self._image = image

    # --- cluster life cycle ---------------------------------------------------

    def bootstrap(
        self,
        metadata_version: int = LATEST_METADATA_VERSION,
        features: Mapping[str, int] | None = None,
        scram: Sequence[Message] = (),
    ) -> list[Message]:
        """Records that finalize feature levels on a new cluster, and the SCRAM credentials
        `strom format --add-scram` gave (none once bootstrapped); a feature `features` does
        not name takes its default for `metadata_version` (`default_features`), as Kafka's
        format does."""
        if self._image.metadata_version:
            return []
        if not MIN_METADATA_VERSION <= metadata_version <= LATEST_METADATA_VERSION:
            raise ValueError(f"unsupported metadata.version level {metadata_version}")
        features = {**default_features(metadata_version), **(features or {})}
        check_features(metadata_version, features, known_only=True)
        records: list[Message] = [FeatureLevelRecord(METADATA_VERSION, metadata_version)]
        for name in sorted(features or {}):
            if name != METADATA_VERSION and (features or {})[name] > 0:
                records.append(FeatureLevelRecord(name, (features or {})[name]))
        return records + list(scram)

    def local_registration(
        self,
        endpoints: Sequence[Listener],
        incarnation_id: uuid.UUID,
        *,
        log_dirs: Sequence[uuid.UUID] = (),
    ) -> BrokerRegistrationRequest:
        """The BrokerRegistration request this node's broker sends: its endpoints (with their
        security protocols), rack, log directory ids, and the metadata.version range it
        supports."""
        from strom.wire.messages.broker_registration import BrokerRegistrationRequest

        protocols = self._config.protocol_map
        return BrokerRegistrationRequest(
            broker_id=self.node_id,
            cluster_id=self.cluster_id,
            incarnation_id=incarnation_id,
            listeners=[
                BrokerRegistrationRequest.Listener(
                    e.name,
                    e.host,
                    e.port,
                    SECURITY_PROTOCOL_IDS[protocols.get(e.name, "PLAINTEXT")],
                )
                for e in endpoints
            ],
            features=[
                BrokerRegistrationRequest.Feature(
                    METADATA_VERSION, MIN_METADATA_VERSION, LATEST_METADATA_VERSION
                ),
                *(
                    BrokerRegistrationRequest.Feature(name, low, high)
                    for name, (low, high) in sorted(SUPPORTED_FEATURES.items())
                ),
            ],
            rack=self._config.broker_rack,
            log_dirs=list(log_dirs),
        )

    # --- brokers: registration, heartbeats, leases (see `brokers`) -------------------------------

    def activate(self, now_ms: int, *, except_broker: int | None = None) -> None:
        """Become the active controller: every registered broker gets a fresh lease."""
        self.leases.activate(self._image, now_ms, except_broker=except_broker)

    def broker_registration(
        self, request: BrokerRegistrationRequest, *, broker_epoch: int, now_ms: int
    ) -> ControllerResult[BrokerRegistrationResponse]:
        """BrokerRegistration; `broker_epoch` is the offset its record will be appended at."""
        return finish(
            self.broker_registration_steps(request, broker_epoch=broker_epoch, now_ms=now_ms)
        )

    def broker_registration_steps(
        self, request: BrokerRegistrationRequest, *, broker_epoch: int, now_ms: int
    ) -> Planning[BrokerRegistrationResponse]:
        """`broker_registration` planned in steps (`result.Planning`)."""
        level = self._image.metadata_version
        if not MIN_METADATA_VERSION <= level <= LATEST_METADATA_VERSION:
            raise ControllerError(
                ErrorCode.UNSUPPORTED_VERSION,
                f"metadata.version {level} is not supported by this node",
            )
        return register_broker_steps(
            self._image,
            self.leases,
            request,
            cluster_id=self.cluster_id,
            broker_epoch=broker_epoch,
            now_ms=now_ms,
            unclean=self._unclean,
            elr=self._elr,
        )

    def broker_heartbeat(
        self, request: BrokerHeartbeatRequest, *, next_offset: int, now_ms: int
    ) -> ControllerResult[BrokerHeartbeatResponse]:
        """BrokerHeartbeat; `next_offset` is where this command's records would be appended."""
        return finish(
            self.broker_heartbeat_steps(request, next_offset=next_offset, now_ms=now_ms)
        )

    def broker_heartbeat_steps(
        self, request: BrokerHeartbeatRequest, *, next_offset: int, now_ms: int
    ) -> Planning[BrokerHeartbeatResponse]:
        """`broker_heartbeat` planned in steps (`result.Planning`)."""
        return broker_heartbeat_steps(
            self._image,
            self.leases,
            request,
            next_offset=next_offset,
            now_ms=now_ms,
            unclean=self._unclean,
            elr=self._elr,
        )

    def touch_lease(self, broker_id: int, broker_epoch: int, now_ms: int) -> None:
        """A heartbeat arrived: renew the broker's lease now (see `BrokerLeases.touch`)."""
        self.leases.touch(self._image, broker_id, broker_epoch, now_ms)

    def fence_stale_broker(self, now_ms: int) -> ControllerResult[int | None]:
        """Fence one broker whose lease has expired (response: its id, or None)."""
        return finish(self.fence_stale_broker_steps(now_ms))

    def fence_stale_broker_steps(self, now_ms: int) -> Planning[int | None]:
        """`fence_stale_broker` planned in steps (`result.Planning`)."""
        return fence_stale_broker_steps(self._image, self.leases, now_ms, self._unclean, self._elr)

    def next_lease_expiry(self) -> int | None:
        """When the earliest lease of an unfenced broker runs out (None: none to watch)."""
        return next_lease_expiry(self._image, self.leases)

    def allocate_producer_ids(
        self, broker_id: int, broker_epoch: int
    ) -> ControllerResult[tuple[int, int]]:
        """The next block of producer ids for a broker: (first id, length)."""
        self._check_broker_epoch(broker_id, broker_epoch)
        start = self._image.next_producer_id
        if start > LONG_MAX - PRODUCER_ID_BLOCK_SIZE:
            raise ControllerError(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                "Exhausted all producerIds as the next block's end producerId "
                "has exceeded the int64 type limit",
            )
        record = ProducerIdsRecord(broker_id, broker_epoch, start + PRODUCER_ID_BLOCK_SIZE)
        return ControllerResult((start, PRODUCER_ID_BLOCK_SIZE), [record])

    def _check_broker_epoch(self, broker_id: int, broker_epoch: int) -> None:
        registration = self._image.broker(broker_id)
        if registration is None:
            raise ControllerError(
                ErrorCode.STALE_BROKER_EPOCH, f"No broker registration found for broker {broker_id}"
            )
        if registration.epoch != broker_epoch:
            raise ControllerError(
                ErrorCode.STALE_BROKER_EPOCH,
                f"Expected broker epoch {registration.epoch}, but got broker epoch {broker_epoch}",
            )

    def alter_partition(
        self, request: AlterPartitionRequest, version: int
    ) -> ControllerResult[AlterPartitionResponse]:
        """AlterPartition: a partition leader's ISR change, fenced by both epochs (see isr.py)."""
        from strom.coordinator.controller.isr import alter_partition

        _check_version(request, version)
        config = self.context().config
        return alter_partition(
            self._image,
            request,
            version,
            unclean_default=config.unclean_leader_election_enable,
            min_isr_default=config.min_insync_replicas,
        )

    def _unclean(self, topic: TopicImage) -> bool:
        """The topic's effective unclean.leader.election.enable."""
        from strom.coordinator.controller.election import unclean_enabled

        default = self.context().config.unclean_leader_election_enable
        return unclean_enabled(self._image, default, topic.name)

    def _elr(self, topic: TopicImage) -> int | None:
        """The topic's min.insync.replicas with eligible leader replicas enabled, else None."""
        from strom.coordinator.controller.election import elr_min_isr

        default = self.context().config.min_insync_replicas
        return elr_min_isr(self._image, default, topic.name)

    # --- leadership and reassignment (see leadership.py, reassignment.py) ------------

    def elect_leaders(
        self, request: ElectLeadersRequest, version: int
    ) -> ControllerResult[ElectLeadersResponse]:
        """ElectLeaders (API 43): preferred or unclean elections an operator asks for."""
        from strom.coordinator.controller.leadership import elect_leaders

        _check_version(request, version)
        return elect_leaders(self.context(), request, version)

    def balance_leaders(self) -> ControllerResult[bool]:
        """auto.leader.rebalance.enable's pass: leadership back to preferred replicas (the
        response: True if capped, run again)."""
        from strom.coordinator.controller.leadership import balance_leaders

        return balance_leaders(
            self._image, min_isr_default=self.context().config.min_insync_replicas
        )

    def leaders_imbalanced(self) -> bool:
        """Some partition is not led by its preferred replica."""
        from strom.coordinator.controller.leadership import imbalanced

        return imbalanced(self._image)

    def elect_unclean_leaders(self) -> ControllerResult[int]:
        """Leaderless partitions of topics that allow it get a leader outside the ISR."""
        from strom.coordinator.controller.leadership import elect_unclean_leaders

        config = self.context().config
        return elect_unclean_leaders(
            self._image, config.unclean_leader_election_enable, config.min_insync_replicas
        )

    def alter_partition_reassignments(
        self, request: AlterPartitionReassignmentsRequest, version: int
    ) -> ControllerResult[AlterPartitionReassignmentsResponse]:
        from strom.coordinator.controller.reassignment import alter_partition_reassignments

        _check_version(request, version)
        return alter_partition_reassignments(self.context(), request, version)

    def list_partition_reassignments(
        self, request: ListPartitionReassignmentsRequest, version: int
    ) -> ControllerResult[ListPartitionReassignmentsResponse]:
        """ListPartitionReassignments (API 46): a read, no records."""
        from strom.coordinator.controller.reassignment import list_partition_reassignments

        _check_version(request, version)
        return ControllerResult(list_partition_reassignments(self._image, request, version))

    # --- liveness (see liveness.py) -----------------------------------------------

    @property
    def offline_replicas(self) -> OfflineReplicas:
        """The replicas brokers last reported unable to serve."""
        return self._offline

    def heartbeat(self, broker_id: int, broker_epoch: int, offline: Iterable[PartitionKey]) -> bool:
        """A broker's report of the replicas it cannot serve (Kafka's BrokerHeartbeat with
        offlineLogDirs); replaces its previous report. True if anything changed."""
        self._check_broker_epoch(broker_id, broker_epoch)
        reported = self._offline.report(broker_id, offline)
        changed, self._offline = reported is not self._offline, reported
        return changed

    # --- admin requests ---------------------------------------------------------
    # Each imports its module (and the API's generated messages) on first use:
    # start-up needs none of them, and together they are a large import.

    def create_topics(
        self, request: CreateTopicsRequest, version: int
    ) -> ControllerResult[CreateTopicsResponse]:
        from strom.coordinator.controller.topic_creation import create_topics

        _check_version(request, version)
        return create_topics(self.context(), request, version)

    def create_topics_steps(
        self, request: CreateTopicsRequest, version: int
    ) -> Planning[CreateTopicsResponse]:
        """`create_topics` planned in steps (`result.Planning`), against the image as it is
        now."""
        from strom.coordinator.controller.topic_creation import create_topics_steps

        _check_version(request, version)
        return create_topics_steps(self.context(), request, version)

    def delete_topics(
        self, request: DeleteTopicsRequest, version: int
    ) -> ControllerResult[DeleteTopicsResponse]:
        from strom.coordinator.controller.deletion import delete_topics

        _check_version(request, version)
        return delete_topics(self.context(), request, version)

    def create_partitions(
        self, request: CreatePartitionsRequest, version: int
    ) -> ControllerResult[CreatePartitionsResponse]:
        from strom.coordinator.controller.partition_creation import create_partitions

        _check_version(request, version)
        return create_partitions(self.context(), request, version)

    def create_partitions_steps(
        self, request: CreatePartitionsRequest, version: int
    ) -> Planning[CreatePartitionsResponse]:
        """`create_partitions` planned in steps (`result.Planning`)."""
        from strom.coordinator.controller.partition_creation import create_partitions_steps

        _check_version(request, version)
        return create_partitions_steps(self.context(), request, version)

    def incremental_alter_configs(
        self, request: IncrementalAlterConfigsRequest, version: int
    ) -> ControllerResult[IncrementalAlterConfigsResponse]:
        from strom.coordinator.controller.configs import incremental_alter_configs

        _check_version(request, version)
        return incremental_alter_configs(self.context(), request, version)

    def alter_configs(
        self, request: AlterConfigsRequest, version: int
    ) -> ControllerResult[AlterConfigsResponse]:
        from strom.coordinator.controller.configs import alter_configs

        _check_version(request, version)
        return alter_configs(self.context(), request, version)

    def alter_client_quotas(
        self, request: AlterClientQuotasRequest, version: int
    ) -> ControllerResult[AlterClientQuotasResponse]:
        from strom.coordinator.controller.quota_commands import alter_client_quotas

        _check_version(request, version)
        return alter_client_quotas(self.context(), request)

    def create_acls(
        self, request: CreateAclsRequest, version: int
    ) -> ControllerResult[CreateAclsResponse]:
        from strom.coordinator.controller.acl_commands import create_acls

        _check_version(request, version)
        return create_acls(self.context(), request)

    def delete_acls(
        self, request: DeleteAclsRequest, version: int
    ) -> ControllerResult[DeleteAclsResponse]:
        from strom.coordinator.controller.acl_commands import delete_acls

        _check_version(request, version)
        return delete_acls(self.context(), request)

    def alter_user_scram_credentials(
        self, request: AlterUserScramCredentialsRequest, version: int
    ) -> ControllerResult[AlterUserScramCredentialsResponse]:
        from strom.coordinator.controller.scram import alter_user_scram_credentials

        _check_version(request, version)
        return alter_user_scram_credentials(self.context(), request)


def default_features(metadata_version: int) -> dict[str, int]:
    """The levels a new cluster finalizes unless told otherwise, Kafka 4.0's: transactions v2
    (transaction.version 2) from metadata.version 4.0-IV2; eligible.leader.replicas.version
    stays 0 (Kafka's default only from 4.1-IV0)."""
    if metadata_version >= ELR_MIN_METADATA_VERSION:
        return {TRANSACTION_VERSION: 2}
    return {}


def check_features(
    metadata_version: int, features: Mapping[str, int], *, known_only: bool = False
) -> None:
    """ValueError (one line) unless every feature level is supported and its dependencies on
    metadata.version hold; `known_only`: let features this node does not know pass (a
    bootstrap checkpoint Kafka's tool wrote may finalize them; they are recorded, unused)."""
    for name, level in sorted(features.items()):
        if name == METADATA_VERSION:
            continue
        supported = SUPPORTED_FEATURES.get(name)
        if supported is None:
            if known_only:
                continue
            raise ValueError(f"unsupported feature: {name}")
        low, high = supported
        if not low <= level <= high:
            raise ValueError(f"unsupported {name} level {level} (supported: {low}-{high})")
        needs_4_0_iv2 = name in (ELR_VERSION, TRANSACTION_VERSION) and level >= 1
        if needs_4_0_iv2 and metadata_version < ELR_MIN_METADATA_VERSION:
            raise ValueError(
                f"{name}={level} requires metadata.version {ELR_MIN_METADATA_VERSION} "
                f"(4.0-IV2) or later, not {metadata_version}"
            )


def _check_version(request: Message, version: int) -> None:
    if not request.MIN_VERSION <= version <= request.MAX_VERSION:
        raise ValueError(f"{request.NAME} has no version {version}")
