"""The requests a differential sequence is made of, and hypothesis strategies that draw them.

Topics and groups are named by slot (`ctx.topic(1)`, `ctx.group(0)`); a slot can also be a
literal bad name (`BAD_TOPICS`), so the error paths get drawn as often as the good ones.
Members are tracked per side: a JoinGroup learns the member id and generation the broker
handed out, later requests use them (or a wrong generation / unknown member on purpose).
Groups only ever have one member at a time: a second member would make the first one's broker
wait for a rejoin, and the sequence is sequential.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from compat_tests.differential.harness import Context, Plain, Side
from strom.wire.errors import ErrorCode
from strom.wire.formats.protocol.consumer_protocol_assignment import ConsumerProtocolAssignment
from strom.wire.formats.protocol.consumer_protocol_subscription import ConsumerProtocolSubscription
from strom.wire.message import Message
from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from strom.wire.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from strom.wire.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from strom.wire.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResponse
from strom.wire.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from strom.wire.messages.fetch import FetchRequest, FetchResponse
from strom.wire.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from strom.wire.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from strom.wire.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from strom.wire.messages.join_group import JoinGroupRequest, JoinGroupResponse
from strom.wire.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from strom.wire.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from strom.wire.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse
from strom.wire.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from strom.wire.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from strom.wire.messages.produce import ProduceRequest, ProduceResponse
from strom.wire.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from strom.wire.records import Record, build_batch

TopicRef = int | str
"""A topic slot of the sequence, or a literal (bad) name."""

BAD_TOPICS = ("bad name!", "", "a" * 250, "..", "with/slash")
UNKNOWN_MEMBER = "consumer-unknown-0000"


def topic_name(ctx: Context, ref: TopicRef) -> str:
    return ctx.topic(ref) if isinstance(ref, int) else ref


async def _send(side: Side, body: Message, version: int, kind: type[Any]) -> Any:
    return await side.client.request(body, version, kind)


# ---------------------------------------------------------------- topics and data


@dataclass(frozen=True)
class CreateTopic:
    version: int
    topic: TopicRef
    partitions: int
    replication: int
    configs: tuple[tuple[str, str | None], ...]
    validate_only: bool
    api = "CreateTopics"

    async def run(self, side: Side, ctx: Context) -> Plain:
        Config = CreateTopicsRequest.CreatableTopicConfig
        request = CreateTopicsRequest(
            topics=[
                CreateTopicsRequest.CreatableTopic(
                    name=topic_name(ctx, self.topic),
                    num_partitions=self.partitions,
                    replication_factor=self.replication,
                    configs=[Config(name=k, value=v) for k, v in self.configs],
                )
            ],
            timeout_ms=30_000,
            validate_only=self.validate_only,
        )
        response = await _send(side, request, self.version, CreateTopicsResponse)
        if not self.validate_only and response.topics[0].error_code == ErrorCode.NONE:
            await side.barrier(ctx.prefix)
        return response


@dataclass(frozen=True)
class DeleteTopic:
    version: int
    topic: TopicRef
    api = "DeleteTopics"

    async def run(self, side: Side, ctx: Context) -> Plain:
        name = topic_name(ctx, self.topic)
        if self.version >= 6:
            request = DeleteTopicsRequest(
                topics=[DeleteTopicsRequest.DeleteTopicState(name=name)], timeout_ms=30_000
            )
        else:
            request = DeleteTopicsRequest(topic_names=[name], timeout_ms=30_000)
        response = await _send(side, request, self.version, DeleteTopicsResponse)
        if response.responses[0].error_code == ErrorCode.NONE:
            await side.barrier(ctx.prefix)
        return response


@dataclass(frozen=True)
class Produce:
    version: int
    topic: TopicRef
    partition: int
    count: int
    acks: int
    api = "Produce"

    async def run(self, side: Side, ctx: Context) -> Plain:
        records = [
            Record(f"k{i}".encode(), f"value {i} of {self.count}".encode(),
                   (("h", f"{i}".encode()),) if i % 2 else (), ctx.ts0 + i)
            for i in range(self.count)
        ]  # fmt: skip
        request = ProduceRequest(
            acks=self.acks,
            timeout_ms=10_000,
            topic_data=[
                ProduceRequest.TopicProduceData(
                    name=topic_name(ctx, self.topic),
                    partition_data=[
                        ProduceRequest.PartitionProduceData(
                            index=self.partition, records=bytes(build_batch(records))
                        )
                    ],
                )
            ],
        )
        return await _send(side, request, self.version, ProduceResponse)


@dataclass(frozen=True)
class Fetch:
    version: int
    topic: TopicRef
    partition: int
    offset: int
    api = "Fetch"

    async def run(self, side: Side, ctx: Context) -> Plain:
        name = topic_name(ctx, self.topic)
        topic_id = await side.topic_id(name) if self.version >= 13 else None
        topic = FetchRequest.FetchTopic(
            topic=name if topic_id is None else "",
            partitions=[
                FetchRequest.FetchPartition(
                    partition=self.partition,
                    fetch_offset=self.offset,
                    log_start_offset=-1,
                    partition_max_bytes=1 << 20,
                )
            ],
        )
        if topic_id is not None:
            topic.topic_id = topic_id
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[topic],
        )
        return await _send(side, request, self.version, FetchResponse)


@dataclass(frozen=True)
class ListOffsets:
    version: int
    topic: TopicRef
    partition: int
    timestamp: int
    """-1 latest, -2 earliest, -3 max timestamp, or ts0 + this (>= 0)."""
    api = "ListOffsets"

    async def run(self, side: Side, ctx: Context) -> Plain:
        ts = self.timestamp if self.timestamp < 0 else ctx.ts0 + self.timestamp
        request = ListOffsetsRequest(
            replica_id=-1,
            topics=[
                ListOffsetsRequest.ListOffsetsTopic(
                    name=topic_name(ctx, self.topic),
                    partitions=[
                        ListOffsetsRequest.ListOffsetsPartition(
                            partition_index=self.partition, timestamp=ts
                        )
                    ],
                )
            ],
        )
        return await _send(side, request, self.version, ListOffsetsResponse)


@dataclass(frozen=True)
class Metadata:
    version: int
    topics: tuple[TopicRef, ...]
    api = "Metadata"

    async def run(self, side: Side, ctx: Context) -> Plain:
        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=topic_name(ctx, t))
                    for t in self.topics],
            allow_auto_topic_creation=self.version < 4,
        )  # fmt: skip
        response: MetadataResponse = await _send(side, request, self.version, MetadataResponse)
        # Kafka lists missing topics and partitions in hash order: the order is not compared
        response.topics.sort(key=lambda t: t.name or "")
        for topic in response.topics:
            topic.partitions.sort(key=lambda p: p.partition_index)
        return response


# ---------------------------------------------------------------- configs

TOPIC_KEYS = ("retention.ms", "cleanup.policy", "max.message.bytes", "segment.bytes",
              "min.insync.replicas", "compression.type", "no.such.config")  # fmt: skip
VALUES: dict[str, tuple[str | None, ...]] = {
    "retention.ms": ("3600000", "-1", "abc", "-2"),
    "cleanup.policy": ("compact", "delete,compact", "shred", ""),
    "max.message.bytes": ("2000000", "-5", "x"),
    "segment.bytes": ("1048576", "10", "big"),  # not 14..1048575: a known departure
    "min.insync.replicas": ("1", "0"),
    "compression.type": ("zstd", "producer", "rar"),
    "no.such.config": ("1",),
}


@dataclass(frozen=True)
class DescribeConfigs:
    version: int
    topic: TopicRef
    keys: tuple[str, ...] | None
    synonyms: bool
    api = "DescribeConfigs"

    async def run(self, side: Side, ctx: Context) -> Plain:
        request = DescribeConfigsRequest(
            resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=2,
                    resource_name=topic_name(ctx, self.topic),
                    configuration_keys=None if self.keys is None else list(self.keys),
                )
            ],
            include_synonyms=self.synonyms,
        )
        return await _send(side, request, self.version, DescribeConfigsResponse)


@dataclass(frozen=True)
class AlterConfigs:
    version: int
    topic: TopicRef
    changes: tuple[tuple[str, int, str | None], ...]
    """(key, operation 0 SET / 1 DELETE / 2 APPEND / 3 SUBTRACT, value)."""
    validate_only: bool
    api = "IncrementalAlterConfigs"

    async def run(self, side: Side, ctx: Context) -> Plain:
        request = IncrementalAlterConfigsRequest(
            resources=[
                IncrementalAlterConfigsRequest.AlterConfigsResource(
                    resource_type=2,
                    resource_name=topic_name(ctx, self.topic),
                    configs=[
                        IncrementalAlterConfigsRequest.AlterableConfig(
                            name=k, config_operation=op, value=v
                        )
                        for k, op, v in self.changes
                    ],
                )
            ],
            validate_only=self.validate_only,
        )  # fmt: skip
        response = await _send(side, request, self.version, IncrementalAlterConfigsResponse)
        if not self.validate_only and response.responses[0].error_code == ErrorCode.NONE:
            await side.barrier(ctx.prefix)
        return response


@dataclass(frozen=True)
class DescribeGroupConfigs:
    """DescribeConfigs of a GROUP resource (KIP-848 group configs); entries sorted by name
    (Kafka lists them in hash order)."""

    version: int
    group: int | str
    keys: tuple[str, ...] | None
    synonyms: bool
    api = "DescribeConfigs"

    async def run(self, side: Side, ctx: Context) -> Plain:
        name = ctx.group(self.group) if isinstance(self.group, int) else self.group
        request = DescribeConfigsRequest(
            resources=[DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=32, resource_name=name,
                configuration_keys=None if self.keys is None else list(self.keys))],
            include_synonyms=self.synonyms,
        )  # fmt: skip
        response = await _send(side, request, self.version, DescribeConfigsResponse)
        for result in response.results:
            result.configs.sort(key=lambda c: c.name)
        return response


@dataclass(frozen=True)
class AlterGroupConfigs:
    """IncrementalAlterConfigs of a GROUP resource."""

    version: int
    group: int | str
    changes: tuple[tuple[str, int, str | None], ...]
    validate_only: bool = False
    api = "IncrementalAlterConfigs"

    async def run(self, side: Side, ctx: Context) -> Plain:
        name = ctx.group(self.group) if isinstance(self.group, int) else self.group
        request = IncrementalAlterConfigsRequest(
            resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
                resource_type=32, resource_name=name,
                configs=[IncrementalAlterConfigsRequest.AlterableConfig(k, op, v)
                         for k, op, v in self.changes])],
            validate_only=self.validate_only,
        )  # fmt: skip
        response = await _send(side, request, self.version, IncrementalAlterConfigsResponse)
        if not self.validate_only and response.responses[0].error_code == ErrorCode.NONE:
            await side.barrier(ctx.prefix)
        return response


GROUP_CONFIG_SEQUENCE: tuple[DescribeGroupConfigs | AlterGroupConfigs, ...] = (
    DescribeGroupConfigs(4, 0, None, True),
    DescribeGroupConfigs(1, 0, ("consumer.session.timeout.ms", "nope"), False),
    DescribeGroupConfigs(4, "", None, True),
    AlterGroupConfigs(1, 0, (("consumer.session.timeout.ms", 0, "50000"),
                             ("share.isolation.level", 0, "read_committed"))),
    AlterGroupConfigs(0, 0, (("consumer.session.timeout.ms", 0, "5"),)),
    AlterGroupConfigs(1, 0, (("consumer.heartbeat.interval.ms", 0, "45000"),)),
    AlterGroupConfigs(1, 0, (("streams.num.standby.replicas", 0, "3"),)),
    AlterGroupConfigs(1, 0, (("no.such.key", 0, "1"),)),
    AlterGroupConfigs(1, 0, (("consumer.session.timeout.ms", 2, "1"),)),
    AlterGroupConfigs(1, 0, (("consumer.session.timeout.ms", 0, None),)),
    AlterGroupConfigs(1, "", (("consumer.session.timeout.ms", 0, "50000"),)),
    AlterGroupConfigs(1, 1, (("share.session.timeout.ms", 0, "50000"),), validate_only=True),
    DescribeGroupConfigs(4, 0, None, True),
    DescribeGroupConfigs(4, 1, None, False),
    AlterGroupConfigs(1, 0, (("consumer.session.timeout.ms", 1, None),
                             ("streams.num.standby.replicas", 1, None))),
    DescribeGroupConfigs(3, 0, None, True),
)  # fmt: skip
"""One fixed sequence over group configs: defaults, sets, every kind of refusal, deletes."""


# ---------------------------------------------------------------- groups

# Kafka's group coordinator parses "consumer" metadata and assignments: they must be valid
SUBSCRIPTION = b"\x00\x00" + ConsumerProtocolSubscription(topics=["subscribed"]).encode(0)
ASSIGNMENT = b"\x00\x00" + ConsumerProtocolAssignment(
    assigned_partitions=[ConsumerProtocolAssignment.TopicPartition("subscribed", [0])]
).encode(0)
PROTOCOL = JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=SUBSCRIPTION)


def _member(side: Side, group: int, known: bool) -> str:
    return side.members.get((group, 0), "") if known else UNKNOWN_MEMBER


def _generation(side: Side, group: int, delta: int) -> int:
    return side.generations.get(group, -1) + delta


@dataclass(frozen=True)
class FindCoordinator:
    version: int
    group: int
    api = "FindCoordinator"

    async def run(self, side: Side, ctx: Context) -> Plain:
        name = ctx.group(self.group)
        if self.version >= 4:
            request = FindCoordinatorRequest(key_type=0, coordinator_keys=[name])
        else:
            request = FindCoordinatorRequest(key=name, key_type=0)
        return await _send(side, request, self.version, FindCoordinatorResponse)


@dataclass(frozen=True)
class JoinGroup:
    version: int
    group: int
    session_timeout_ms: int
    api = "JoinGroup"

    async def run(self, side: Side, ctx: Context) -> Plain:
        request = JoinGroupRequest(
            group_id=ctx.group(self.group),
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=30_000,
            member_id=side.members.get((self.group, 0), ""),
            protocol_type="consumer",
            protocols=[PROTOCOL],
        )
        response = await _send(side, request, self.version, JoinGroupResponse)
        if response.member_id:
            side.members[(self.group, 0)] = response.member_id
        if response.error_code == ErrorCode.NONE:
            side.generations[self.group] = response.generation_id
        return response


@dataclass(frozen=True)
class SyncGroup:
    version: int
    group: int
    known_member: bool
    generation_delta: int
    assign: bool
    api = "SyncGroup"

    async def run(self, side: Side, ctx: Context) -> Plain:
        member = _member(side, self.group, self.known_member)
        request = SyncGroupRequest(
            group_id=ctx.group(self.group),
            generation_id=_generation(side, self.group, self.generation_delta),
            member_id=member,
            protocol_type="consumer" if self.version >= 5 else None,
            protocol_name="range" if self.version >= 5 else None,
            assignments=[
                SyncGroupRequest.SyncGroupRequestAssignment(
                    member_id=member, assignment=ASSIGNMENT
                )
            ]
            if self.assign
            else [],
        )
        return await _send(side, request, self.version, SyncGroupResponse)


@dataclass(frozen=True)
class Heartbeat:
    version: int
    group: int
    known_member: bool
    generation_delta: int
    api = "Heartbeat"

    async def run(self, side: Side, ctx: Context) -> Plain:
        request = HeartbeatRequest(
            group_id=ctx.group(self.group),
            generation_id=_generation(side, self.group, self.generation_delta),
            member_id=_member(side, self.group, self.known_member),
        )
        return await _send(side, request, self.version, HeartbeatResponse)


@dataclass(frozen=True)
class LeaveGroup:
    version: int
    group: int
    known_member: bool
    api = "LeaveGroup"

    async def run(self, side: Side, ctx: Context) -> Plain:
        member = _member(side, self.group, self.known_member)
        if self.version >= 3:
            request = LeaveGroupRequest(
                group_id=ctx.group(self.group),
                members=[LeaveGroupRequest.MemberIdentity(member_id=member)],
            )
        else:
            request = LeaveGroupRequest(group_id=ctx.group(self.group), member_id=member)
        response = await _send(side, request, self.version, LeaveGroupResponse)
        if response.error_code == ErrorCode.NONE and self.known_member:
            side.members.pop((self.group, 0), None)
            side.generations.pop(self.group, None)
        return response


@dataclass(frozen=True)
class OffsetCommit:
    version: int
    group: int
    mode: str
    """"simple" (generation -1, no member), "member" (the known member), "unknown"."""
    generation_delta: int
    topic: TopicRef
    partition: int
    offset: int
    api = "OffsetCommit"

    async def run(self, side: Side, ctx: Context) -> Plain:
        if self.mode == "simple":
            generation, member = -1, ""
        else:
            generation = _generation(side, self.group, self.generation_delta)
            member = _member(side, self.group, self.mode == "member")
        request = OffsetCommitRequest(
            group_id=ctx.group(self.group),
            generation_id_or_member_epoch=generation,
            member_id=member,
            topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(
                    name=topic_name(ctx, self.topic),
                    partitions=[
                        OffsetCommitRequest.OffsetCommitRequestPartition(
                            partition_index=self.partition,
                            committed_offset=self.offset,
                            committed_metadata=f"m{self.offset}",
                        )
                    ],
                )
            ],
        )
        return await _send(side, request, self.version, OffsetCommitResponse)


@dataclass(frozen=True)
class OffsetFetch:
    version: int
    group: int
    topics: tuple[tuple[TopicRef, tuple[int, ...]], ...] | None
    api = "OffsetFetch"

    async def run(self, side: Side, ctx: Context) -> Plain:
        if self.version >= 8:
            topics8 = None if self.topics is None else [
                OffsetFetchRequest.OffsetFetchRequestTopics(
                    name=topic_name(ctx, t), partition_indexes=list(ps)
                )
                for t, ps in self.topics
            ]  # fmt: skip
            group = OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id=ctx.group(self.group), topics=topics8
            )
            request = OffsetFetchRequest(groups=[group])
        else:
            topics = None if self.topics is None else [
                OffsetFetchRequest.OffsetFetchRequestTopic(
                    name=topic_name(ctx, t), partition_indexes=list(ps)
                )
                for t, ps in self.topics
            ]  # fmt: skip
            request = OffsetFetchRequest(group_id=ctx.group(self.group), topics=topics)
        return await _send(side, request, self.version, OffsetFetchResponse)


@dataclass(frozen=True)
class ListGroups:
    version: int
    states: tuple[str, ...]
    api = "ListGroups"

    async def run(self, side: Side, ctx: Context) -> Plain:
        request = ListGroupsRequest(states_filter=list(self.states) if self.version >= 4 else [])
        response: ListGroupsResponse = await _send(side, request, self.version, ListGroupsResponse)
        # other sequences' groups are on the same brokers: keep this sequence's, in name order
        response.groups = sorted(
            (g for g in response.groups if g.group_id.startswith(ctx.prefix)),
            key=lambda g: g.group_id,
        )
        return response


@dataclass(frozen=True)
class DescribeGroups:
    version: int
    groups: tuple[int, ...]
    api = "DescribeGroups"

    async def run(self, side: Side, ctx: Context) -> Plain:
        request = DescribeGroupsRequest(groups=[ctx.group(g) for g in self.groups])
        return await _send(side, request, self.version, DescribeGroupsResponse)


@dataclass(frozen=True)
class DeleteGroups:
    version: int
    groups: tuple[int, ...]
    api = "DeleteGroups"

    async def run(self, side: Side, ctx: Context) -> Plain:
        request = DeleteGroupsRequest(groups_names=[ctx.group(g) for g in self.groups])
        response: DeleteGroupsResponse = await _send(
            side, request, self.version, DeleteGroupsResponse
        )
        response.results.sort(key=lambda r: r.group_id)  # Kafka answers in hash order
        for result in response.results:
            if result.error_code == ErrorCode.NONE:
                slot = int(result.group_id.rsplit("g", 1)[1])
                side.members.pop((slot, 0), None)
                side.generations.pop(slot, None)
        return response


# ---------------------------------------------------------------- strategies

TOPIC_SLOTS = 3
GROUP_SLOTS = 2


def versions(low: int, high: int) -> st.SearchStrategy[int]:
    return st.integers(low, high)


topic_refs: st.SearchStrategy[TopicRef] = st.one_of(
    st.integers(0, TOPIC_SLOTS - 1), st.integers(0, TOPIC_SLOTS - 1), st.sampled_from(BAD_TOPICS)
)
good_topics: st.SearchStrategy[TopicRef] = st.integers(0, TOPIC_SLOTS - 1)
partitions = st.sampled_from((0, 0, 0, 1, 2, -1))
groups = st.integers(0, GROUP_SLOTS - 1)

config_pairs = st.sampled_from(TOPIC_KEYS).flatmap(
    lambda k: st.tuples(st.just(k), st.sampled_from(VALUES[k]))
)

create_topic = st.builds(
    CreateTopic,
    version=versions(2, 7),
    topic=topic_refs,
    partitions=st.sampled_from((1, 1, 2, -1, 0, -3)),
    replication=st.sampled_from((1, 1, -1, 2, 0)),
    configs=st.lists(config_pairs, max_size=2, unique_by=lambda kv: kv[0]).map(tuple),
    validate_only=st.booleans(),
)
good_create = st.builds(
    CreateTopic,
    version=versions(2, 7),
    topic=good_topics,
    partitions=st.sampled_from((1, 2)),
    replication=st.just(1),
    configs=st.just(()),
    validate_only=st.just(False),
)
delete_topic = st.builds(DeleteTopic, version=versions(1, 6), topic=topic_refs)
produce = st.builds(
    Produce,
    version=versions(3, 12),
    topic=topic_refs,
    partition=partitions,
    count=st.integers(1, 4),
    acks=st.sampled_from((1, -1, -1, 2)),
)
fetch = st.builds(
    Fetch,
    version=versions(4, 17),
    topic=topic_refs,
    partition=partitions,
    offset=st.sampled_from((0, 0, 1, 3, 100, -1)),
)
list_offsets = st.builds(
    ListOffsets,
    version=versions(1, 10),
    topic=topic_refs,
    partition=partitions,
    timestamp=st.sampled_from((-1, -2, -3, 0, 1, 2, 10_000)),
)
metadata = st.builds(
    Metadata,
    version=versions(1, 12),
    topics=st.lists(topic_refs, min_size=1, max_size=3, unique=True).map(tuple),
)
describe_configs = st.builds(
    DescribeConfigs,
    version=versions(1, 4),
    topic=topic_refs,
    keys=st.one_of(
        st.none(),
        st.lists(st.sampled_from(TOPIC_KEYS), min_size=1, max_size=3, unique=True).map(tuple),
    ),
    synonyms=st.booleans(),
)
alter_change = st.sampled_from(TOPIC_KEYS).flatmap(
    lambda k: st.tuples(st.just(k), st.sampled_from((0, 0, 1, 2, 3)), st.sampled_from(VALUES[k]))
)
alter_configs = st.builds(
    AlterConfigs,
    version=versions(0, 1),
    topic=topic_refs,
    changes=st.lists(alter_change, min_size=1, max_size=2, unique_by=lambda c: c[0]).map(tuple),
    validate_only=st.booleans(),
)

generation_deltas = st.sampled_from((0, 0, 0, 1))
find_coordinator = st.builds(FindCoordinator, version=versions(0, 6), group=groups)
join_group = st.builds(
    JoinGroup,
    version=versions(2, 9),
    group=groups,
    session_timeout_ms=st.sampled_from((30_000, 30_000, 30_000, 1_000)),
)
sync_group = st.builds(
    SyncGroup,
    version=versions(0, 5),
    group=groups,
    known_member=st.sampled_from((True, True, False)),
    generation_delta=generation_deltas,
    assign=st.sampled_from((True, True, False)),
)
heartbeat = st.builds(
    Heartbeat,
    version=versions(0, 4),
    group=groups,
    known_member=st.sampled_from((True, True, False)),
    generation_delta=generation_deltas,
)
leave_group = st.builds(
    LeaveGroup,
    version=versions(0, 5),
    group=groups,
    known_member=st.sampled_from((True, True, False)),
)
offset_commit = st.builds(
    OffsetCommit,
    version=versions(2, 9),
    group=groups,
    mode=st.sampled_from(("simple", "simple", "member", "member", "unknown")),
    generation_delta=generation_deltas,
    topic=topic_refs,
    partition=partitions,
    offset=st.sampled_from((0, 5, 42)),
)
offset_fetch = st.builds(
    OffsetFetch,
    version=versions(1, 9),
    group=groups,
    topics=st.one_of(
        st.none(),
        st.lists(
            st.tuples(topic_refs, st.lists(partitions, min_size=1, max_size=2, unique=True)
                      .map(tuple)),
            min_size=1, max_size=2, unique_by=lambda t: t[0],
        ).map(tuple),
    ),
)  # fmt: skip
list_groups = st.builds(
    ListGroups,
    version=versions(0, 5),
    states=st.sampled_from(((), ("Stable",), ("Empty", "CompletingRebalance"))),
)
describe_groups = st.builds(
    DescribeGroups,
    version=versions(0, 5),
    groups=st.lists(groups, min_size=1, max_size=2, unique=True).map(tuple),
)
delete_groups = st.builds(
    DeleteGroups,
    version=versions(0, 2),
    groups=st.lists(groups, min_size=1, max_size=2, unique=True).map(tuple),
)

data_ops = st.one_of(
    create_topic, good_create, good_create, delete_topic, produce, produce, fetch, fetch,
    list_offsets, metadata,
)  # fmt: skip
config_ops = st.one_of(
    create_topic, good_create, good_create, describe_configs, describe_configs, alter_configs,
    alter_configs, metadata,
)
group_ops = st.one_of(
    good_create, find_coordinator, join_group, join_group, sync_group, sync_group, heartbeat,
    heartbeat, leave_group, offset_commit, offset_commit, offset_commit, offset_fetch,
    offset_fetch, list_groups, describe_groups, delete_groups, produce,
)  # fmt: skip


def _joined(group: int) -> st.SearchStrategy[list[Any]]:
    """A member joining (twice from JoinGroup v4: the first gets its id) and syncing."""
    return st.tuples(
        versions(4, 9).map(lambda v: JoinGroup(v, group, 30_000)),
        versions(4, 9).map(lambda v: JoinGroup(v, group, 30_000)),
        versions(0, 5).map(lambda v: SyncGroup(v, group, True, 0, True)),
    ).map(list)


group_sequences = st.tuples(
    st.sampled_from((0, 1)).flatmap(_joined), st.lists(group_ops, min_size=1, max_size=12)
).map(lambda parts: parts[0] + parts[1])
"""Group sequences start from a Stable group with one member, then anything goes."""
