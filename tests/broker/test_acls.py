"""ACLs end to end on a broker with the StandardAuthorizer and PLAIN users: CreateAcls /
DescribeAcls / DeleteAcls, each API refusing with Kafka's error (TOPIC_, GROUP_, CLUSTER_
AUTHORIZATION_FAILED), topics a principal may not describe being indistinguishable from missing
ones, authorized_operations filled in, super users, and a principal without ACLs trying every
API this broker serves: each refused (or the connection closed), none answering with data."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from strom.broker.handlers import HANDLERS
from strom.broker.security.sasl_client import SaslClient
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker, open_broker
from strom.coordinator.metadata.acls import AclOperation as Op
from strom.coordinator.metadata.acls import PatternType, Permission
from strom.coordinator.metadata.acls import ResourceType as R
from strom.wire.apis import request_class, response_class
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from strom.wire.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from strom.wire.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse
from strom.wire.messages.join_group import JoinGroupRequest, JoinGroupResponse
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse
from strom.wire.messages.produce import ProduceRequest, ProduceResponse
from tests.broker.test_produce_helpers import batch

SECRETS = {"admin": "admin-pw-1", "alice": "alice-pw-2", "bob": "bob-pw-3"}
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-pw-1" '
    + " ".join(f'user_{u}="{p}"' for u, p in SECRETS.items())
    + ";"
)
SECURED = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN",
    "sasl.mechanism.inter.broker.protocol": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
    "connection.failed.authentication.delay.ms": "0",
}

pytestmark = pytest.mark.trio


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[EmbeddedBroker]:
    async with open_broker(tmp_path / "data", SECURED) as running:
        yield running


async def as_user(broker: EmbeddedBroker, user: str) -> KafkaClient:
    client = await KafkaClient.connect(broker.bootstrap)
    await client.login(SaslClient("PLAIN", user, SECRETS[user]))
    return client


async def create_acls(admin: KafkaClient, *acls: tuple[R, str, PatternType, str, Op, Permission]) -> None:
    creations = [CreateAclsRequest.AclCreation(r, n, p, who, "*", op, perm)
                 for r, n, p, who, op, perm in acls]  # fmt: skip
    response = await admin.request(CreateAclsRequest(creations=creations), 3, CreateAclsResponse)
    assert [r.error_code for r in response.results] == [0] * len(acls), response


async def create_topic(client: KafkaClient, name: str) -> int:
    topic = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1, replication_factor=1)
    response = await client.request(CreateTopicsRequest(topics=[topic], timeout_ms=5000), 7,
                                    CreateTopicsResponse)  # fmt: skip
    return response.topics[0].error_code


async def metadata(client: KafkaClient, *names: str, ops: bool = False) -> MetadataResponse:
    topics = None if not names else [MetadataRequest.MetadataRequestTopic(name=n) for n in names]
    return await client.request(
        MetadataRequest(topics=topics, allow_auto_topic_creation=True,
                        include_topic_authorized_operations=ops), 12, MetadataResponse,
    )  # fmt: skip


async def produce(client: KafkaClient, topic: str) -> int:
    request = ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(topic, [ProduceRequest.PartitionProduceData(0, batch([b"v"]))])
    ])  # fmt: skip
    response = await client.request(request, 9, ProduceResponse)
    return response.responses[0].partition_responses[0].error_code


async def test_topics_need_acls_and_unauthorized_ones_look_missing(broker: EmbeddedBroker) -> None:
    admin = await as_user(broker, "admin")
    alice = await as_user(broker, "alice")
    assert await create_topic(admin, "orders") == 0
    assert await create_topic(alice, "alices-own") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    # nothing allowed: all topics is empty; a named topic is refused whether or not it exists
    assert (await metadata(alice)).topics == []
    named = await metadata(alice, "orders", "no-such-topic")
    assert [(t.name, t.error_code) for t in named.topics] == [
        ("orders", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ("no-such-topic", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ]
    assert (await metadata(admin, "no-such-topic")).topics[0].error_code == 0  # auto-created
    await create_acls(admin, (R.TOPIC, "orders", PatternType.LITERAL, "User:alice", Op.READ,
                              Permission.ALLOW))  # fmt: skip
    listed = await metadata(alice, ops=True)
    assert [t.name for t in listed.topics] == ["orders"]  # READ implies DESCRIBE
    bits = listed.topics[0].topic_authorized_operations
    assert {op for op in Op if bits & (1 << op)} == {Op.READ, Op.DESCRIBE}
    assert await produce(alice, "orders") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    await create_acls(admin, (R.TOPIC, "ord", PatternType.PREFIXED, "User:alice", Op.WRITE,
                              Permission.ALLOW))  # fmt: skip
    assert await produce(alice, "orders") == 0
    await create_acls(admin, (R.TOPIC, "orders", PatternType.LITERAL, "User:*", Op.WRITE,
                              Permission.DENY))  # fmt: skip
    assert await produce(alice, "orders") == ErrorCode.TOPIC_AUTHORIZATION_FAILED  # DENY wins
    assert await produce(admin, "orders") == 0  # a super user
    for client in (admin, alice):
        await client.aclose()


async def test_groups_and_cluster_apis(broker: EmbeddedBroker) -> None:
    admin = await as_user(broker, "admin")
    bob = await as_user(broker, "bob")
    join = JoinGroupRequest(group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000,
                            member_id="", protocol_type="consumer",
                            protocols=[JoinGroupRequest.JoinGroupRequestProtocol("range", b"")])  # fmt: skip
    response = await bob.request(join, 9, JoinGroupResponse)
    assert response.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    refused = await bob.request(
        CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
            R.TOPIC, "x", 3, "User:bob", "*", Op.ALL, Permission.ALLOW)]), 3, CreateAclsResponse,
    )  # fmt: skip
    assert refused.results[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    described = await bob.request(
        DescribeAclsRequest(resource_type_filter=R.ANY, resource_name_filter=None,
                            pattern_type_filter=PatternType.ANY, principal_filter=None,
                            host_filter=None, operation=Op.ANY, permission_type=Permission.ANY),
        3, DescribeAclsResponse,
    )  # fmt: skip
    assert described.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    await create_acls(admin, (R.GROUP, "g", PatternType.LITERAL, "User:bob", Op.READ,
                              Permission.ALLOW),
                      (R.CLUSTER, "kafka-cluster", PatternType.LITERAL, "User:bob", Op.DESCRIBE,
                       Permission.ALLOW))  # fmt: skip
    assert (await bob.request(join, 9, JoinGroupResponse)).error_code in (
        ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED)  # fmt: skip
    described = await bob.request(
        DescribeAclsRequest(resource_type_filter=R.GROUP, resource_name_filter="g",
                            pattern_type_filter=PatternType.MATCH, principal_filter=None,
                            host_filter=None, operation=Op.ANY, permission_type=Permission.ANY),
        3, DescribeAclsResponse,
    )  # fmt: skip
    assert [(r.resource_type, r.resource_name, [(a.principal, a.operation) for a in r.acls])
            for r in described.resources] == [(R.GROUP, "g", [("User:bob", Op.READ)])]  # fmt: skip
    deleted = await admin.request(
        DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
            R.GROUP, None, PatternType.ANY, "User:bob", None, Op.ANY, Permission.ANY)]),
        3, DeleteAclsResponse,
    )  # fmt: skip
    assert [m.resource_name for m in deleted.filter_results[0].matching_acls] == ["g"]
    assert (await bob.request(join, 9, JoinGroupResponse)).error_code == (
        ErrorCode.GROUP_AUTHORIZATION_FAILED)  # fmt: skip
    for client in (admin, bob):
        await client.aclose()


REFUSALS = {
    ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ErrorCode.SECURITY_DISABLED,
}  # fmt: skip
HARMLESS = {ErrorCode.NONE, ErrorCode.INVALID_REQUEST, ErrorCode.UNKNOWN_TOPIC_ID,
            ErrorCode.ILLEGAL_SASL_STATE, ErrorCode.INVALID_GROUP_ID}  # fmt: skip
"""Answers that reveal nothing: empty successes (no data), malformed requests."""


def _codes(message: Any) -> list[int]:
    found: list[int] = []
    for name in getattr(message, "FIELDS", ()):
        value = getattr(message, name)
        if name == "error_code" and isinstance(value, int):
            found.append(value)
        elif isinstance(value, list):
            for item in value:
                found += _codes(item)
        elif hasattr(value, "FIELDS"):
            found += _codes(value)
    return found


async def test_a_principal_without_acls_is_refused_every_api(broker: EmbeddedBroker) -> None:
    """Every API this broker serves, asked by a principal no ACL mentions, with requests naming
    an existing topic, group and transactional id: each is refused with an authorization error,
    answered with nothing (an empty success), or closes the connection."""
    admin = await as_user(broker, "admin")
    assert await create_topic(admin, "secret") == 0
    await admin.aclose()
    checked = 0
    for key, handler in sorted(HANDLERS.items()):
        if not handler.serves("broker") or key in (17, 18, 36):
            continue
        version = handler.max_version
        body = _probe(request_class(key)(), key)
        client = await as_user(broker, "bob")
        try:
            with trio.fail_after(10):
                response = await client.request(body, version, response_class(key))
        except (ProtocolError, trio.BrokenResourceError, trio.ClosedResourceError):
            checked += 1  # refused by closing the connection
            continue
        except trio.TooSlowError:
            pytest.fail(f"API key {key} did not answer")
        finally:
            await client.aclose()
        codes = set(_codes(response))
        assert codes & REFUSALS or codes <= HARMLESS, (key, codes, response)
        assert "secret" not in repr(response) or codes & REFUSALS, (key, response)
        checked += 1
    assert checked >= 30


def _probe(body: Any, key: int) -> Any:
    """Fill a default request with names of existing things, so that a missing check shows."""
    for name in body.FIELDS:
        if name in ("group_id", "key", "transactional_id", "resource_name"):
            setattr(body, name, "secret")
        elif name == "groups" and key in (15,):
            body.groups = ["secret"]
        elif name == "groups_names":
            body.groups_names = ["secret"]
    if key == 3:
        body.topics = None
    if key == 0:
        body.acks = 1  # acks=0 is not answered
        body.timeout_ms = 1000
    return body


async def test_committed_offsets_of_a_topic_it_may_not_describe_stay_hidden(
    broker: EmbeddedBroker,
) -> None:
    from strom.wire.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
    from strom.wire.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse

    admin = await as_user(broker, "admin")
    bob = await as_user(broker, "bob")
    assert await create_topic(admin, "payments") == 0
    commit = OffsetCommitRequest(group_id="audit", generation_id_or_member_epoch=-1, member_id="",
                                 topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                                     "payments", [OffsetCommitRequest.OffsetCommitRequestPartition(
                                         0, 42, -1, "")])])  # fmt: skip
    committed = await admin.request(commit, 8, OffsetCommitResponse)
    assert committed.topics[0].partitions[0].error_code == 0
    await create_acls(admin, (R.GROUP, "audit", PatternType.LITERAL, "User:bob", Op.DESCRIBE,
                              Permission.ALLOW))  # fmt: skip
    named = OffsetFetchRequest(group_id="audit", topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic("payments", [0])])  # fmt: skip
    answer = await bob.request(named, 7, OffsetFetchResponse)
    [partition] = answer.topics[0].partitions
    assert (partition.error_code, partition.committed_offset) == (
        ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)  # fmt: skip
    everything = await bob.request(OffsetFetchRequest(group_id="audit", topics=None), 7,
                                   OffsetFetchResponse)  # fmt: skip
    assert everything.topics == []
    for client in (admin, bob):
        await client.aclose()
