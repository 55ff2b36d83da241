"""The transaction APIs under the StandardAuthorizer, as Kafka checks them: a principal given,
one ACL at a time, exactly what Kafka asks of a transactional producer (WRITE on its
transactional id, WRITE on each topic it writes, READ on the group and on each topic whose
offsets it commits) runs a whole transaction; before each ACL the step that needs it is refused
with Kafka's error, and what it may not DESCRIBE stays hidden."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import TypeVar

import pytest
import trio

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker, open_broker
from strom.coordinator.metadata.acls import AclOperation as Op
from strom.coordinator.metadata.acls import PatternType, Permission
from strom.coordinator.metadata.acls import ResourceType as R
from strom.wire.errors import ErrorCode
from strom.wire.message import Message
from strom.wire.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from strom.wire.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)
from strom.wire.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)
from strom.wire.messages.end_txn import EndTxnRequest, EndTxnResponse
from strom.wire.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from strom.wire.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from strom.wire.messages.list_transactions import ListTransactionsRequest, ListTransactionsResponse
from strom.wire.messages.produce import ProduceResponse
from strom.wire.messages.txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from strom.wire.messages.write_txn_markers import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from tests.broker.test_acls import SECURED, as_user, create_acls, create_topic
from tests.broker.test_produce_helpers import batch, produce_request

pytestmark = pytest.mark.trio

Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
TxnTopic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
TxnPart = TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition
Marker = WriteTxnMarkersRequest.WritableTxnMarker
M = TypeVar("M", bound=Message)


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[EmbeddedBroker]:
    overrides = {**SECURED, "transaction.state.log.num.partitions": "1",
                 "offsets.topic.num.partitions": "1"}  # fmt: skip
    async with open_broker(tmp_path / "data", overrides) as running:
        yield running


def allow(resource: R, name: str, op: Op, who: str = "User:alice") -> tuple[
    R, str, PatternType, str, Op, Permission
]:
    return (resource, name, PatternType.LITERAL, who, op, Permission.ALLOW)


async def retried(client: KafkaClient, request: Message, version: int, response: type[M]) -> M:
    """As clients do while a transaction's markers go out or the coordinator loads."""
    retriable = {ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                 ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR}  # fmt: skip
    with trio.fail_after(20):
        while True:
            answer = await client.request(request, version, response)
            codes = {getattr(answer, "error_code", 0)} | {
                p.partition_error_code
                for t in getattr(answer, "results_by_topic_v3_and_below", [])
                for p in t.results_by_partition
            }
            if not codes & retriable:
                return answer
            await trio.sleep(0.05)


async def init(client: KafkaClient, txn: str) -> InitProducerIdResponse:
    request = InitProducerIdRequest(transactional_id=txn, transaction_timeout_ms=60_000)
    return await retried(client, request, 5, InitProducerIdResponse)


async def add(client: KafkaClient, txn: str, pid: int, epoch: int, topic: str) -> list[int]:
    request = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch, v3_and_below_topics=[Topic(topic, [0])],
    )  # fmt: skip
    answer = await retried(client, request, 3, AddPartitionsToTxnResponse)
    return [p.partition_error_code for t in answer.results_by_topic_v3_and_below
            for p in t.results_by_partition]  # fmt: skip


async def test_a_transaction_needs_exactly_kafkas_acls(broker: EmbeddedBroker) -> None:
    admin = await as_user(broker, "admin")
    alice = await as_user(broker, "alice")
    for topic in ("orders", "audit"):
        assert await create_topic(admin, topic) == 0
    admins = await init(admin, "admins-txn")  # another transactional id, open, not alice's
    assert admins.error_code == 0
    assert await add(admin, "admins-txn", admins.producer_id, admins.producer_epoch, "audit") == [0]

    # the transactional id: DESCRIBE to find its coordinator, WRITE to use it
    find = FindCoordinatorRequest(key="tx", key_type=1)
    found = await alice.request(find, 3, FindCoordinatorResponse)
    assert found.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert (await init(alice, "tx")).error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    await create_acls(admin, allow(R.TRANSACTIONAL_ID, "tx", Op.DESCRIBE))
    assert (await alice.request(find, 3, FindCoordinatorResponse)).error_code == 0
    assert (await init(alice, "tx")).error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    await create_acls(admin, allow(R.TRANSACTIONAL_ID, "tx", Op.WRITE))
    ids = await init(alice, "tx")
    assert ids.error_code == 0
    pid, epoch = ids.producer_id, ids.producer_epoch

    # each topic written: WRITE on it; a refused partition adds nothing
    assert await add(alice, "tx", pid, epoch, "orders") == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
    assert await add(alice, "admins-txn", pid, epoch, "orders") == [
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]  # fmt: skip
    await create_acls(admin, allow(R.TOPIC, "orders", Op.WRITE))
    assert await add(alice, "tx", pid, epoch, "orders") == [0]
    records = batch([b"paid"], pid=pid, epoch=epoch, seq=0, transactional=True)
    wrong_id = await alice.request(produce_request("orders", records, txn="admins-txn"), 11,
                                   ProduceResponse)  # fmt: skip
    assert wrong_id.responses[0].partition_responses[0].error_code == (
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)  # fmt: skip
    written = await alice.request(produce_request("orders", records, txn="tx"), 11, ProduceResponse)
    assert written.responses[0].partition_responses[0].error_code == 0
    # a transactional id on a produce without transactional records is not checked (Kafka)
    plain = await alice.request(produce_request("orders", batch([b"x"]), txn="admins-txn"), 11,
                                ProduceResponse)  # fmt: skip
    assert plain.responses[0].partition_responses[0].error_code == 0

    # offsets in the transaction: READ on the group, then READ on each topic
    offsets = AddOffsetsToTxnRequest(transactional_id="tx", producer_id=pid, producer_epoch=epoch,
                                     group_id="billing")  # fmt: skip
    answer = await alice.request(offsets, 3, AddOffsetsToTxnResponse)
    assert answer.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    commit = TxnOffsetCommitRequest(transactional_id="tx", group_id="billing", producer_id=pid,
                                    producer_epoch=epoch,
                                    topics=[TxnTopic("orders", [TxnPart(0, 1, -1, "")])])  # fmt: skip
    committed = await alice.request(commit, 3, TxnOffsetCommitResponse)
    assert committed.topics[0].partitions[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    await create_acls(admin, allow(R.GROUP, "billing", Op.READ))
    assert (await retried(alice, offsets, 3, AddOffsetsToTxnResponse)).error_code == 0
    committed = await alice.request(commit, 3, TxnOffsetCommitResponse)
    assert committed.topics[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    await create_acls(admin, allow(R.TOPIC, "orders", Op.READ))
    committed = await alice.request(commit, 3, TxnOffsetCommitResponse)
    assert committed.topics[0].partitions[0].error_code == 0

    # describing: only its own transactional id, and no partition of a topic it may not see
    described = await alice.request(
        DescribeTransactionsRequest(transactional_ids=["tx", "admins-txn"]), 0,
        DescribeTransactionsResponse,
    )  # fmt: skip
    states = [(s.transactional_id, s.error_code, s.transaction_state, [t.topic for t in s.topics])
              for s in described.transaction_states]  # fmt: skip
    assert states == [  # __consumer_offsets is in it, but alice may not DESCRIBE that topic
        ("tx", 0, "Ongoing", ["orders"]),
        ("admins-txn", ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "", []),
    ]
    seen = await admin.request(DescribeTransactionsRequest(transactional_ids=["tx"]), 0,
                               DescribeTransactionsResponse)  # fmt: skip
    assert sorted(t.topic for t in seen.transaction_states[0].topics) == [
        "__consumer_offsets", "orders"]  # fmt: skip
    listed = await alice.request(ListTransactionsRequest(), 1, ListTransactionsResponse)
    assert [t.transactional_id for t in listed.transaction_states] == ["tx"]
    every = await admin.request(ListTransactionsRequest(), 1, ListTransactionsResponse)
    assert sorted(t.transactional_id for t in every.transaction_states) == ["admins-txn", "tx"]

    # the markers and the brokers' own AddPartitionsToTxn: the cluster's, not a producer's
    markers = WriteTxnMarkersRequest(markers=[Marker(
        pid, epoch, False, [WriteTxnMarkersRequest.WritableTxnMarkerTopic("orders", [0])], 0)])  # fmt: skip
    refused = await alice.request(markers, 1, WriteTxnMarkersResponse)
    assert [p.error_code for m in refused.markers for t in m.topics for p in t.partitions] == [
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED]  # fmt: skip
    batched = AddPartitionsToTxnRequest(transactions=[
        AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
            "tx", pid, epoch, True, [Topic("orders", [0])])])  # fmt: skip
    answer4 = await alice.request(batched, 4, AddPartitionsToTxnResponse)
    assert (answer4.error_code, answer4.results_by_transaction) == (
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])  # fmt: skip

    end = EndTxnRequest(transactional_id="admins-txn", producer_id=pid, producer_epoch=epoch,
                        committed=True)  # fmt: skip
    ended = await alice.request(end, 4, EndTxnResponse)
    assert ended.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    end.transactional_id = "tx"
    assert (await alice.request(end, 4, EndTxnResponse)).error_code == 0
    for client in (admin, alice):
        await client.aclose()


async def test_markers_may_be_written_with_alter_on_the_cluster(broker: EmbeddedBroker) -> None:
    """Kafka accepts WriteTxnMarkers from a principal with ALTER on the cluster (what
    `kafka-transactions.sh abort` needs) as well as CLUSTER_ACTION."""
    admin = await as_user(broker, "admin")
    bob = await as_user(broker, "bob")
    assert await create_topic(admin, "hung") == 0
    markers = WriteTxnMarkersRequest(markers=[Marker(
        4242, 0, False, [WriteTxnMarkersRequest.WritableTxnMarkerTopic("hung", [0])], 0)])  # fmt: skip
    refused = await bob.request(markers, 1, WriteTxnMarkersResponse)
    assert refused.markers[0].topics[0].partitions[0].error_code == (
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED)  # fmt: skip
    await create_acls(admin, allow(R.CLUSTER, "kafka-cluster", Op.ALTER, "User:bob"))
    written = await bob.request(markers, 1, WriteTxnMarkersResponse)
    assert written.markers[0].topics[0].partitions[0].error_code == 0
    for client in (admin, bob):
        await client.aclose()


async def test_internal_topics_are_never_added_by_a_producer(broker: EmbeddedBroker) -> None:
    """Kafka refuses a producer's AddPartitionsToTxn of an internal topic whatever the ACLs
    (TOPIC_AUTHORIZATION_FAILED): offsets join a transaction through AddOffsetsToTxn only."""
    admin = await as_user(broker, "admin")
    ids = await init(admin, "sneaky")
    assert ids.error_code == 0
    assert await add(admin, "sneaky", ids.producer_id, ids.producer_epoch, "__consumer_offsets") == [
        ErrorCode.TOPIC_AUTHORIZATION_FAILED]  # fmt: skip
    await admin.aclose()
