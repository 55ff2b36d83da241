"""kafka-python <-> Strom: Produce, Fetch, ListOffsets and InitProducerId.

Versions are those both sides have. kafka-python 3.0.12 goes one further on
each (Produce 13, Fetch 18, ListOffsets 11, InitProducerId 6, from a newer
Kafka) and, ignoring the JSON's minimum, also encodes the removed versions
below Strom's (Produce 0-2, Fetch 0-3, ListOffsets 0); those are not covered.
"""

from __future__ import annotations

from typing import Any

import pytest

from strom.wire.messages import fetch as s_fetch
from strom.wire.messages import init_producer_id as s_init_producer_id
from strom.wire.messages import list_offsets as s_list_offsets
from strom.wire.messages import produce as s_produce
from strom.wire.primitives import ZERO_UUID
from tests.wire.kp_helpers import (
    ApiCase,
    assert_matches,
    case_id,
    fixed_uuid,
    kp_consumer,
    kp_producer,
    kp_receive,
    kp_send,
    record_batch,
    run_request_case,
    run_response_case,
    strom_receive,
    strom_response_bytes,
)

ProduceRequest = kp_producer.ProduceRequest
ProduceResponse = kp_producer.ProduceResponse
InitProducerIdRequest = kp_producer.InitProducerIdRequest
InitProducerIdResponse = kp_producer.InitProducerIdResponse
FetchRequest = kp_consumer.FetchRequest
FetchResponse = kp_consumer.FetchResponse
ListOffsetsRequest = kp_consumer.ListOffsetsRequest
ListOffsetsResponse = kp_consumer.ListOffsetsResponse

BATCH_A = record_batch("välue-中".encode())
BATCH_B = record_batch(b"\x00" * 300, producer_id=-1, base_offset=41)

# --- Produce -----------------------------------------------------------------


def kp_produce_request(v: int) -> Any:
    return ProduceRequest(
        version=v,
        transactional_id="tx-ü" if v % 2 else None,
        acks=-1 if v % 3 else 1,
        timeout_ms=30_000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="tøpic-中",
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=BATCH_A),
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=7, records=None),
                ],
            ),
            ProduceRequest.TopicProduceData(
                name="t2",
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(
                        index=2**31 - 1, records=BATCH_B
                    ),
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=1, records=b""),
                ],
            ),
        ],
    )


def strom_produce_response(v: int) -> s_produce.ProduceResponse:
    return s_produce.ProduceResponse(
        responses=[
            s_produce.ProduceResponse.TopicProduceResponse(
                name="tøpic-中",
                partition_responses=[
                    s_produce.ProduceResponse.PartitionProduceResponse(
                        index=0,
                        error_code=0,
                        base_offset=1_234_567_890_123,
                        log_append_time_ms=1_700_000_000_000,
                        log_start_offset=42,
                        record_errors=[
                            s_produce.ProduceResponse.BatchIndexAndErrorMessage(
                                batch_index=3, batch_index_error_message="bäd record"
                            ),
                            s_produce.ProduceResponse.BatchIndexAndErrorMessage(
                                batch_index=4, batch_index_error_message=None
                            ),
                        ],
                        error_message="partial ✗",
                        current_leader=s_produce.ProduceResponse.LeaderIdAndEpoch(
                            leader_id=2, leader_epoch=9
                        ),
                    ),
                    s_produce.ProduceResponse.PartitionProduceResponse(
                        index=7,
                        error_code=6,
                        base_offset=-1,
                        log_append_time_ms=-1,
                        log_start_offset=-1,
                        record_errors=[],
                        error_message=None,
                        current_leader=s_produce.ProduceResponse.LeaderIdAndEpoch(
                            leader_id=3, leader_epoch=2**31 - 1
                        ),
                    ),
                ],
            ),
            s_produce.ProduceResponse.TopicProduceResponse(name="t2", partition_responses=[]),
        ],
        throttle_time_ms=77,
        node_endpoints=[
            s_produce.ProduceResponse.NodeEndpoint(
                node_id=2, host="brøker-2", port=9092, rack="rack-中"
            ),
            s_produce.ProduceResponse.NodeEndpoint(node_id=3, host="b3", port=9094, rack=None),
        ],
    )


def check_produce_request(body: Any, v: int) -> None:
    assert body.transactional_id == ("tx-ü" if v % 2 else None)
    assert body.acks == (-1 if v % 3 else 1)
    assert body.timeout_ms == 30_000
    t0, t1 = body.topic_data
    assert t0.name == "tøpic-中"
    assert bytes(t0.partition_data[0].records) == BATCH_A
    assert t0.partition_data[1].index == 7
    assert t0.partition_data[1].records is None
    assert t1.partition_data[0].index == 2**31 - 1
    assert bytes(t1.partition_data[0].records) == BATCH_B
    assert bytes(t1.partition_data[1].records) == b""


def check_produce_response(got: Any, v: int) -> None:
    p0, p1 = got.responses[0].partition_responses
    assert got.responses[0].name == "tøpic-中"
    assert (p0.index, p0.error_code, p0.base_offset) == (0, 0, 1_234_567_890_123)
    assert (p1.index, p1.error_code, p1.base_offset) == (7, 6, -1)
    assert got.responses[1].partition_responses == []
    assert got.throttle_time_ms == 77
    assert p0.log_append_time_ms == 1_700_000_000_000
    if v >= 5:
        assert p0.log_start_offset == 42
    if v >= 8:
        assert [(e.batch_index, e.batch_index_error_message) for e in p0.record_errors] == [
            (3, "bäd record"),
            (4, None),
        ]
        assert p0.error_message == "partial ✗"
        assert p1.error_message is None
    if v >= 10:  # tagged fields
        assert (p0.current_leader.leader_id, p0.current_leader.leader_epoch) == (2, 9)
        assert p1.current_leader.leader_epoch == 2**31 - 1
        assert [(n.node_id, n.host, n.rack) for n in got.node_endpoints] == [
            (2, "brøker-2", "rack-中"),
            (3, "b3", None),
        ]
    else:
        assert p0.current_leader is None
        assert got.node_endpoints == []


PRODUCE = ApiCase(
    "Produce",
    ProduceRequest,
    ProduceResponse,
    range(3, 13),
    kp_produce_request,
    strom_produce_response,
    check_produce_request,
    check_produce_response,
)

# --- Fetch -------------------------------------------------------------------


def kp_fetch_request(v: int) -> Any:
    return FetchRequest(
        version=v,
        cluster_id="clüster-中" if v % 2 else None,
        replica_id=5,
        replica_state=FetchRequest.ReplicaState(replica_id=5, replica_epoch=123_456_789_012),
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=52_428_800,
        isolation_level=1,
        session_id=987_654,
        session_epoch=3,
        topics=[
            FetchRequest.FetchTopic(
                topic="tøpic-中",
                topic_id=fixed_uuid(1),
                partitions=[
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=0,
                        current_leader_epoch=5,
                        fetch_offset=1_234_567_890_123,
                        last_fetched_epoch=4,
                        log_start_offset=10,
                        partition_max_bytes=1_048_576,
                        replica_directory_id=fixed_uuid(9),
                    ),
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=3,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=0,
                        replica_directory_id=None,
                    ),
                ],
            ),
            FetchRequest.FetchTopic(topic="t2", topic_id=fixed_uuid(2), partitions=[]),
        ],
        forgotten_topics_data=[
            FetchRequest.ForgottenTopic(topic="öld", topic_id=fixed_uuid(3), partitions=[1, 2, 3]),
        ],
        rack_id="rack-中",
    )


def strom_fetch_response(v: int) -> s_fetch.FetchResponse:
    return s_fetch.FetchResponse(
        throttle_time_ms=10,
        error_code=70,
        session_id=987_654,
        responses=[
            s_fetch.FetchResponse.FetchableTopicResponse(
                topic="tøpic-中",
                topic_id=fixed_uuid(1),
                partitions=[
                    s_fetch.FetchResponse.PartitionData(
                        partition_index=0,
                        error_code=0,
                        high_watermark=1000,
                        last_stable_offset=990,
                        log_start_offset=5,
                        diverging_epoch=s_fetch.FetchResponse.EpochEndOffset(
                            epoch=3, end_offset=800
                        ),
                        current_leader=s_fetch.FetchResponse.LeaderIdAndEpoch(
                            leader_id=2, leader_epoch=9
                        ),
                        snapshot_id=s_fetch.FetchResponse.SnapshotId(end_offset=700, epoch=2),
                        aborted_transactions=[
                            s_fetch.FetchResponse.AbortedTransaction(
                                producer_id=4242, first_offset=900
                            ),
                            s_fetch.FetchResponse.AbortedTransaction(
                                producer_id=-1, first_offset=0
                            ),
                        ],
                        preferred_read_replica=3,
                        records=BATCH_A + BATCH_B,
                    ),
                    s_fetch.FetchResponse.PartitionData(
                        partition_index=1,
                        error_code=1,
                        high_watermark=-1,
                        last_stable_offset=-1,
                        log_start_offset=-1,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=None,
                    ),
                ],
            ),
            s_fetch.FetchResponse.FetchableTopicResponse(
                topic="t2", topic_id=fixed_uuid(2), partitions=[]
            ),
        ],
        node_endpoints=[
            s_fetch.FetchResponse.NodeEndpoint(node_id=2, host="brøker-2", port=9092, rack=None)
        ],
    )


def check_fetch_request(body: Any, v: int) -> None:
    assert (body.max_wait_ms, body.min_bytes, body.max_bytes) == (500, 1, 52_428_800)
    assert body.isolation_level == 1
    (p0, p1) = body.topics[0].partitions
    assert (p0.partition, p0.fetch_offset, p0.partition_max_bytes) == (
        0,
        1_234_567_890_123,
        1_048_576,
    )
    assert p1.partition == 3
    assert body.topics[1].partitions == []
    assert body.cluster_id == ("clüster-中" if v >= 12 and v % 2 else None)
    if v <= 14:
        assert body.replica_id == 5
    else:
        assert (body.replica_state.replica_id, body.replica_state.replica_epoch) == (
            5,
            123_456_789_012,
        )
    if v >= 7:
        assert (body.session_id, body.session_epoch) == (987_654, 3)
        assert body.forgotten_topics_data[0].partitions == [1, 2, 3]
    else:
        assert body.forgotten_topics_data == []
    if v >= 9:
        assert p0.current_leader_epoch == 5
    if v >= 11:
        assert body.rack_id == "rack-中"
    if v >= 12:
        assert p0.last_fetched_epoch == 4
    if v <= 12:
        assert body.topics[0].topic == "tøpic-中"
        assert body.topics[0].topic_id == ZERO_UUID
        assert body.forgotten_topics_data == [] or body.forgotten_topics_data[0].topic == "öld"
    else:
        assert body.topics[0].topic == ""
        assert body.topics[0].topic_id == fixed_uuid(1)
        assert body.forgotten_topics_data[0].topic_id == fixed_uuid(3)
    assert p0.replica_directory_id == (fixed_uuid(9) if v >= 17 else ZERO_UUID)


def check_fetch_response(got: Any, v: int) -> None:
    p0, p1 = got.responses[0].partitions
    assert (p0.partition_index, p0.high_watermark, p0.last_stable_offset) == (0, 1000, 990)
    assert p0.records == BATCH_A + BATCH_B
    assert [(a.producer_id, a.first_offset) for a in p0.aborted_transactions] == [
        (4242, 900),
        (-1, 0),
    ]
    assert (p1.error_code, p1.aborted_transactions, p1.records) == (1, None, None)
    if v >= 7:
        assert (got.error_code, got.session_id) == (70, 987_654)
    if v >= 11:
        assert p0.preferred_read_replica == 3
    if v >= 12:
        assert (p0.diverging_epoch.epoch, p0.diverging_epoch.end_offset) == (3, 800)
        assert (p0.current_leader.leader_id, p0.current_leader.leader_epoch) == (2, 9)
        assert (p0.snapshot_id.end_offset, p0.snapshot_id.epoch) == (700, 2)
        assert p1.diverging_epoch is None  # default: tag not sent
    if v >= 13:
        assert got.responses[0].topic_id == fixed_uuid(1)
    else:
        assert got.responses[0].topic == "tøpic-中"
    if v >= 16:
        assert [(n.node_id, n.host, n.rack) for n in got.node_endpoints] == [(2, "brøker-2", None)]


FETCH = ApiCase(
    "Fetch",
    FetchRequest,
    FetchResponse,
    range(4, 18),
    kp_fetch_request,
    strom_fetch_response,
    check_fetch_request,
    check_fetch_response,
)

# --- ListOffsets -----------------------------------------------------------------


def kp_list_offsets_request(v: int) -> Any:
    return ListOffsetsRequest(
        version=v,
        replica_id=-2,
        isolation_level=1,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name="tøpic-中",
                partitions=[
                    ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=0, current_leader_epoch=7, timestamp=-1
                    ),
                    ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=2, current_leader_epoch=-1, timestamp=1_700_000_000_000
                    ),
                ],
            ),
            ListOffsetsRequest.ListOffsetsTopic(
                name="t2",
                partitions=[
                    ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=0, current_leader_epoch=1, timestamp=-2
                    )
                ],
            ),
        ],
        timeout_ms=1500,
    )


def strom_list_offsets_response(v: int) -> s_list_offsets.ListOffsetsResponse:
    return s_list_offsets.ListOffsetsResponse(
        throttle_time_ms=3,
        topics=[
            s_list_offsets.ListOffsetsResponse.ListOffsetsTopicResponse(
                name="tøpic-中",
                partitions=[
                    s_list_offsets.ListOffsetsResponse.ListOffsetsPartitionResponse(
                        partition_index=0,
                        error_code=0,
                        timestamp=-1,
                        offset=1_234_567_890_123,
                        leader_epoch=7,
                    ),
                    s_list_offsets.ListOffsetsResponse.ListOffsetsPartitionResponse(
                        partition_index=2,
                        error_code=0,
                        timestamp=1_700_000_000_005,
                        offset=55,
                        leader_epoch=6,
                    ),
                ],
            ),
            s_list_offsets.ListOffsetsResponse.ListOffsetsTopicResponse(
                name="t2",
                partitions=[
                    s_list_offsets.ListOffsetsResponse.ListOffsetsPartitionResponse(
                        partition_index=0, error_code=3, timestamp=-1, offset=-1, leader_epoch=-1
                    ),
                ],
            ),
        ],
    )


def check_list_offsets_request(body: Any, v: int) -> None:
    assert body.replica_id == -2
    assert body.isolation_level == (1 if v >= 2 else 0)
    p0, p1 = body.topics[0].partitions
    assert (p0.partition_index, p0.timestamp) == (0, -1)
    assert (p1.partition_index, p1.timestamp) == (2, 1_700_000_000_000)
    assert body.topics[1].partitions[0].timestamp == -2
    assert p0.current_leader_epoch == (7 if v >= 4 else -1)
    assert body.timeout_ms == (1500 if v >= 10 else 0)


def check_list_offsets_response(got: Any, v: int) -> None:
    p0, p1 = got.topics[0].partitions
    assert (p0.partition_index, p0.timestamp, p0.offset) == (0, -1, 1_234_567_890_123)
    assert (p1.timestamp, p1.offset) == (1_700_000_000_005, 55)
    assert got.topics[1].partitions[0].error_code == 3
    if v >= 2:
        assert got.throttle_time_ms == 3
    if v >= 4:
        assert (p0.leader_epoch, p1.leader_epoch) == (7, 6)


LIST_OFFSETS = ApiCase(
    "ListOffsets",
    ListOffsetsRequest,
    ListOffsetsResponse,
    range(1, 11),
    kp_list_offsets_request,
    strom_list_offsets_response,
    check_list_offsets_request,
    check_list_offsets_response,
)

# --- InitProducerId ------------------------------------------------------------


def kp_init_producer_id_request(v: int) -> Any:
    return InitProducerIdRequest(
        version=v,
        transactional_id=None if v % 2 else "tx-ü",
        transaction_timeout_ms=60_000,
        producer_id=1_234_567_890_123,
        producer_epoch=7,
    )


def strom_init_producer_id_response(v: int) -> s_init_producer_id.InitProducerIdResponse:
    return s_init_producer_id.InitProducerIdResponse(
        throttle_time_ms=3, error_code=47, producer_id=-1, producer_epoch=-32768
    )


def check_init_producer_id_request(body: Any, v: int) -> None:
    assert body.transactional_id == (None if v % 2 else "tx-ü")
    assert body.transaction_timeout_ms == 60_000
    if v >= 3:
        assert (body.producer_id, body.producer_epoch) == (1_234_567_890_123, 7)
    else:
        assert (body.producer_id, body.producer_epoch) == (-1, -1)


def check_init_producer_id_response(got: Any, v: int) -> None:
    assert (got.throttle_time_ms, got.error_code) == (3, 47)
    assert (got.producer_id, got.producer_epoch) == (-1, -32768)


INIT_PRODUCER_ID = ApiCase(
    "InitProducerId",
    InitProducerIdRequest,
    InitProducerIdResponse,
    range(6),
    kp_init_producer_id_request,
    strom_init_producer_id_response,
    check_init_producer_id_request,
    check_init_producer_id_response,
)

CASES = [PRODUCE, FETCH, LIST_OFFSETS, INIT_PRODUCER_ID]
PARAMS = [p for c in CASES for p in c.params()]


@pytest.mark.parametrize(("case", "version"), PARAMS, ids=case_id)
def test_kafka_python_request_decodes_in_strom(case: ApiCase, version: int) -> None:
    run_request_case(case, version, correlation_id=version)


@pytest.mark.parametrize(("case", "version"), PARAMS, ids=case_id)
def test_strom_response_decodes_in_kafka_python(case: ApiCase, version: int) -> None:
    run_response_case(case, version, correlation_id=-(2**31) + version)


@pytest.mark.parametrize("version", range(12, 18), ids=case_id)
def test_fetch_response_partition_tags_absent_when_default(version: int) -> None:
    """Default tagged structs are not sent; kafka-python then sees none of them."""
    body = s_fetch.FetchResponse(
        responses=[
            s_fetch.FetchResponse.FetchableTopicResponse(
                topic="t",
                topic_id=fixed_uuid(1),
                partitions=[s_fetch.FetchResponse.PartitionData(records=b"")],
            )
        ]
    )
    proto, data = kp_send([(kp_fetch_request(version), 1)])
    (request,) = strom_receive(data)
    ((_, got),) = kp_receive(proto, strom_response_bytes(request, body))
    part = got.responses[0].partitions[0]
    assert part.tags is None  # no tagged field at all on the wire
    assert (part.diverging_epoch, part.current_leader, part.snapshot_id) == (None, None, None)
    assert part.aborted_transactions == []
    assert part.records == b""
    assert assert_matches(body, got, version) > 0
