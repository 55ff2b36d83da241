"""Metadata (key 3).

Behavior:
- Topics null (v1+) means all topics; an empty list means none; in v0 an
  empty list means all. Topics may be named or (v10+) given by topic id.
- A missing topic is created with the broker defaults when the request allows
  it (always in v0-v3, `allow_auto_topic_creation` from v4) and
  `auto.create.topics.enable` is on; creation goes through the controller like
  CreateTopics, and the new topic is returned at once.
- Brokers: every registered, unfenced broker with an endpoint on the listener
  the request came in on (others are left out), with its rack; `controller_id`
  is an unfenced broker, as a Kafka KRaft broker answers (clients cannot reach
  the controller quorum; see `strom.broker.admin.broker_nodes`).
- A partition whose leader's replica is offline -- its broker reported it (a
  failed log dir, a log that cannot be opened; see
  `strom.coordinator.controller.liveness`) or the broker is fenced, gone or not
  on this listener -- has leader -1 and LEADER_NOT_AVAILABLE, and such replicas
  are listed in `offline_replicas`, as Kafka's KRaft metadata cache answers. So
  clients wait for a leader instead of producing to one that cannot append.
- An auto-creation the controller refuses (e.g. its metadata log is on a full
  disk) answers the topic with the controller's error; the connection stays open.
- With an authorizer (docs/security.md): all topics lists only those the principal may
  DESCRIBE; a named topic it may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED whether or not it
  exists (nothing tells it apart); a missing topic is auto-created only with CREATE on the
  cluster or the topic (else TOPIC_AUTHORIZATION_FAILED). The authorized_operations fields
  are the ACLs' answer for the principal.

Version notes: v1 controller id and is_internal; v2 cluster id; v5 offline
replicas; v7 leader epoch; v8-v10 authorized operations; v9 flexible; v10
topic ids; v11 drops cluster authorized operations.
"""

from __future__ import annotations

import contextlib
import gc
from typing import TYPE_CHECKING, NamedTuple

from strom.broker.admin.authz import authorized
from strom.broker.admin.broker_nodes import broker_nodes, controller_id
from strom.broker.admin.partition_leadership import Leaderships
from strom.broker.drivers.topics import auto_create_topics, is_internal_topic
from strom.broker.security.authorization import allowed
from strom.coordinator.controller.names import invalid_topic_name
from strom.coordinator.metadata.acls import CLUSTER_NAME, AclOperation, ResourceType
from strom.wire.errors import ErrorCode
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse
from strom.wire.primitives import ZERO_UUID

if TYPE_CHECKING:
    from collections.abc import Collection, Iterator, Mapping

    from strom.broker.admin.broker_nodes import BrokerNode
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState
    from strom.coordinator.metadata.image import MetadataImage, PartitionImage, TopicImage

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 13

NULLABLE_NAME_VERSION = 12
"""Response topic names may be null from v12; before, an unknown id gets an empty name."""

Topic = MetadataResponse.MetadataResponseTopic
Partition = MetadataResponse.MetadataResponsePartition


async def handle(
    broker: BrokerState, request: RequestContext, body: MetadataRequest
) -> MetadataResponse:
    version = request.api_version
    wanted = body.topics
    if wanted is not None and not wanted and version == 0:
        wanted = None
    topics: list[Topic] = []
    if wanted is None:
        image = broker.image
        nodes = broker_nodes(broker, image, request.listener)
        ctx = _Context(broker, image, body, request, _leaderships(broker, nodes))
        with _collector_paused():
            topics = [
                _topic(ctx, image.topics_by_name[n])
                for n in image.topic_names()
                if allowed(broker, request, AclOperation.DESCRIBE, ResourceType.TOPIC, n)
            ]
    else:
        missing = [
            t.name
            for t in wanted
            if t.name and t.topic_id == ZERO_UUID and broker.image.topic(t.name) is None
            and allowed(broker, request, AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
        ]  # fmt: skip
        allow = body.allow_auto_topic_creation
        created: dict[str, ErrorCode] = {}
        if missing and allow and broker.config.auto_create_topics_enable:
            if not allowed(broker, request, AclOperation.CREATE, ResourceType.CLUSTER):
                refused = [
                    n for n in missing
                    if not allowed(broker, request, AclOperation.CREATE, ResourceType.TOPIC, n)
                ]  # fmt: skip
                created = dict.fromkeys(refused, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                missing = [n for n in missing if n not in created]
            if missing:
                created.update(await auto_create_topics(broker.topics, missing))
        image = broker.image
        nodes = broker_nodes(broker, image, request.listener)
        ctx = _Context(broker, image, body, request, _leaderships(broker, nodes))
        with _collector_paused():
            topics = [_requested(ctx, t, created, version) for t in wanted]
    return MetadataResponse(
        brokers=[MetadataResponse.MetadataResponseBroker(*n[:4]) for n in nodes],
        cluster_id=broker.cluster_id,
        controller_id=controller_id(broker, nodes),
        topics=topics,
        cluster_authorized_operations=authorized(
            body.include_cluster_authorized_operations, broker, request, ResourceType.CLUSTER,
            CLUSTER_NAME,
        ),
    )


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off while an answer is built (no await inside): the four
    objects a partition takes hold no cycles and are freed by their counts once sent, but a
    million of them set off collections that walk the whole heap, the image's partitions too
    (4-8 s of a 1,000,000-partition answer). They are still looked at once, by the first
    young collection after."""
    if not gc.isenabled():  # someone else's pause: theirs to end
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _leaderships(broker: BrokerState, nodes: list[BrokerNode]) -> Leaderships:
    """The listed brokers are the reachable ones (registered, unfenced, on this listener)."""
    return Leaderships(frozenset(n.broker_id for n in nodes), broker.offline_replicas)


class _Context(NamedTuple):
    broker: BrokerState
    image: MetadataImage
    body: MetadataRequest
    request: RequestContext
    leaderships: Leaderships

    def may_describe(self, topic: str) -> bool:
        return allowed(self.broker, self.request, AclOperation.DESCRIBE, ResourceType.TOPIC, topic)


def _requested(
    ctx: _Context,
    wanted: MetadataRequest.MetadataRequestTopic,
    created: dict[str, ErrorCode],
    version: int,
) -> Topic:
    image = ctx.image
    if wanted.topic_id != ZERO_UUID:  # by id: the Java client sends name "" alongside
        topic = image.topic_by_id(wanted.topic_id)
        if topic is None:
            name = None if version >= NULLABLE_NAME_VERSION else ""
            return Topic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=name, topic_id=wanted.topic_id)
        if not ctx.may_describe(topic.name):
            name = None if version >= NULLABLE_NAME_VERSION else ""
            return Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name,
                         topic_id=wanted.topic_id)  # fmt: skip
        return _topic(ctx, topic)
    if not wanted.name:
        return Topic(error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, name=wanted.name, topic_id=ZERO_UUID)
    if not ctx.may_describe(wanted.name):  # exists or not: the answer does not tell
        return Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=wanted.name,
                     topic_id=ZERO_UUID)  # fmt: skip
    topic = image.topic(wanted.name)
    if topic is None:
        # Kafka validates the name of a topic it does not create: an illegal one is
        # INVALID_TOPIC_EXCEPTION, a legal one that does not exist UNKNOWN_TOPIC_OR_PARTITION.
        unknown = (
            ErrorCode.INVALID_TOPIC_EXCEPTION
            if invalid_topic_name(wanted.name)
            else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
        error = created.get(wanted.name, unknown)
        if error == ErrorCode.NONE:
            error = ErrorCode.LEADER_NOT_AVAILABLE  # created, but not yet in this image
        return Topic(error_code=error, name=wanted.name, topic_id=ZERO_UUID)
    return _topic(ctx, topic)


def _topic(ctx: _Context, topic: TopicImage) -> Topic:
    # the hot loop of an answer for every topic (a million partitions): names bound once,
    # fields given by position (the generated class's order)
    leadership, topic_id = ctx.leaderships.of, topic.topic_id
    none, not_available = ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE
    partitions: list[Partition] = []
    append = partitions.append
    for p in _by_index(topic.partitions):
        leader, offline = leadership(topic_id, p)
        append(
            Partition(
                none if leader >= 0 else not_available,  # error_code
                p.partition_id,  # partition_index
                leader,  # leader_id
                p.leader_epoch,  # leader_epoch
                list(p.replicas),  # replica_nodes
                list(p.isr),  # isr_nodes
                offline,  # offline_replicas
            )
        )
    return Topic(
        error_code=ErrorCode.NONE,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=is_internal_topic(topic.name),
        partitions=partitions,
        topic_authorized_operations=authorized(
            ctx.body.include_topic_authorized_operations, ctx.broker, ctx.request,
            ResourceType.TOPIC, topic.name,
        ),
    )


def _by_index(partitions: Mapping[int, PartitionImage]) -> Collection[PartitionImage]:
    """The partitions by index: the map's own order when it is that already, as the
    controller's records leave it, without sorting a million of them by a key function."""
    indexes = list(partitions)
    if indexes == sorted(indexes):
        return partitions.values()
    return [partitions[i] for i in sorted(indexes)]
