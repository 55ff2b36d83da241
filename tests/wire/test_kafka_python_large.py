"""kafka-python <-> Strom with sizes past one-byte varints, and unknown tagged fields.

Compact lengths, array counts and tagged-field sizes are uvarints: anything
of 127 or more needs two bytes, a classic place for one side to go wrong.
The per-API tests use small values; here strings, arrays, records and tagged
fields are made long enough to need multi-byte lengths, at every version.
Unknown tagged fields that Strom writes must be skipped (and kept raw) by
kafka-python without disturbing the known fields around them.
"""

from __future__ import annotations

import pytest

from strom.wire.message import Message
from strom.wire.messages import api_versions as s_api_versions
from strom.wire.messages import fetch as s_fetch
from strom.wire.messages import metadata as s_metadata
from strom.wire.messages import produce as s_produce
from tests.wire.kp_helpers import (
    assert_matches,
    case_id,
    fixed_uuid,
    kp_consumer,
    kp_metadata,
    kp_producer,
    kp_receive,
    kp_send,
    record_batch,
    strom_body,
    strom_receive,
    strom_response_bytes,
    trim_to_version,
)

ApiVersionsRequest = kp_metadata.ApiVersionsRequest
ApiVersionsResponse = kp_metadata.ApiVersionsResponse
MetadataRequest = kp_metadata.MetadataRequest
MetadataResponse = kp_metadata.MetadataResponse
FetchRequest = kp_consumer.FetchRequest
FetchResponse = kp_consumer.FetchResponse
JoinGroupRequest = kp_consumer.JoinGroupRequest
ProduceRequest = kp_producer.ProduceRequest

LONG = "lõng-ñame-" * 20  # 220 UTF-8 bytes
BIG_BATCH = record_batch(bytes(range(256)) * 80)  # ~20 KiB


def _exchange(kp_request: object, body: Message, version: int, kp_response_cls: object) -> object:
    """Send kp_request, answer it with `body` (trimmed to `version`); return kafka-python's view."""
    trim_to_version(body, kp_response_cls._struct, version)  # type: ignore[attr-defined]
    proto, data = kp_send([(kp_request, 99)])
    (request,) = strom_receive(data)
    ((_, got),) = kp_receive(proto, strom_response_bytes(request, body))
    return got


@pytest.mark.parametrize("version", range(14), ids=case_id)
def test_large_metadata_request(version: int) -> None:
    topics = [
        MetadataRequest.MetadataRequestTopic(topic_id=fixed_uuid(i + 1), name=f"{LONG}-{i}")
        for i in range(300)
    ]
    req = MetadataRequest(version=version, topics=topics, allow_auto_topic_creation=False)
    _, data = kp_send([(req, 1)])
    body = strom_body(data, s_metadata.MetadataRequest)
    assert body.topics is not None
    assert len(body.topics) == 300
    assert body.topics[299].name == f"{LONG}-299"
    assert assert_matches(body, req, version) >= 300


@pytest.mark.parametrize("version", range(14), ids=case_id)
def test_large_metadata_response(version: int) -> None:
    replicas = list(range(-65, 65))  # 130 entries
    body = s_metadata.MetadataResponse(
        throttle_time_ms=1,
        brokers=[
            s_metadata.MetadataResponse.MetadataResponseBroker(
                node_id=i, host=f"{LONG}.{i}", port=9092 + i, rack=LONG
            )
            for i in range(130)
        ],
        cluster_id=LONG,
        controller_id=129,
        topics=[
            s_metadata.MetadataResponse.MetadataResponseTopic(
                name=LONG,
                topic_id=fixed_uuid(5),
                partitions=[
                    s_metadata.MetadataResponse.MetadataResponsePartition(
                        partition_index=p,
                        leader_id=p % 130,
                        leader_epoch=p,
                        replica_nodes=replicas,
                        isr_nodes=replicas[:p],
                        offline_replicas=[p],
                    )
                    for p in range(150)
                ],
                topic_authorized_operations=0x7FFFFFFF,
            )
        ],
    )
    got: object = _exchange(
        MetadataRequest(version=version, topics=[]), body, version, MetadataResponse
    )
    assert assert_matches(body, got, version) > 1000
    assert got.topics[0].partitions[149].isr_nodes == replicas[:149]  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", [3, 4], ids=case_id)
def test_large_api_versions_response_tagged_fields(version: int) -> None:
    """Tagged fields whose encoded size needs a multi-byte uvarint."""
    body = s_api_versions.ApiVersionsResponse(
        api_keys=[
            s_api_versions.ApiVersionsResponse.ApiVersion(api_key=k, min_version=0, max_version=k)
            for k in range(200)
        ],
        supported_features=[
            s_api_versions.ApiVersionsResponse.SupportedFeatureKey(
                name=f"{LONG}{i}", min_version=i, max_version=i + 1
            )
            for i in range(130)
        ],
        finalized_features_epoch=2**62,
        finalized_features=[
            s_api_versions.ApiVersionsResponse.FinalizedFeatureKey(
                name=LONG, max_version_level=300, min_version_level=-300
            )
        ],
        zk_migration_ready=True,
    )
    got: object = _exchange(ApiVersionsRequest(version=version), body, version, ApiVersionsResponse)
    assert assert_matches(body, got, version) > 800


@pytest.mark.parametrize("version", range(4, 18), ids=case_id)
def test_large_fetch_response(version: int) -> None:
    body = s_fetch.FetchResponse(
        session_id=1,
        responses=[
            s_fetch.FetchResponse.FetchableTopicResponse(
                topic=LONG,
                topic_id=fixed_uuid(1),
                partitions=[
                    s_fetch.FetchResponse.PartitionData(
                        partition_index=p,
                        high_watermark=10**12 + p,
                        current_leader=s_fetch.FetchResponse.LeaderIdAndEpoch(
                            leader_id=p, leader_epoch=p
                        ),
                        aborted_transactions=[
                            s_fetch.FetchResponse.AbortedTransaction(producer_id=i, first_offset=-i)
                            for i in range(140)
                        ],
                        records=BIG_BATCH,
                    )
                    for p in range(3)
                ],
            )
        ],
        node_endpoints=[
            s_fetch.FetchResponse.NodeEndpoint(
                node_id=i, host=LONG, port=i, rack=None if i % 2 else LONG
            )
            for i in range(140)
        ],
    )
    req = FetchRequest(version=version, max_wait_ms=1, min_bytes=1, topics=[])
    got: object = _exchange(req, body, version, FetchResponse)
    assert assert_matches(body, got, version) > 800


@pytest.mark.parametrize("version", range(3, 13), ids=case_id)
def test_large_produce_request(version: int) -> None:
    req = ProduceRequest(
        version=version,
        transactional_id=LONG,
        acks=-1,
        timeout_ms=1,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=f"{LONG}{t}",
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=i, records=BIG_BATCH)
                    for i in range(130)
                ],
            )
            for t in range(2)
        ],
    )
    _, data = kp_send([(req, 1)])
    body = strom_body(data, s_produce.ProduceRequest)
    records = body.topic_data[1].partition_data[129].records
    assert records is not None
    assert bytes(records) == BIG_BATCH
    assert assert_matches(body, req, version) > 500


@pytest.mark.parametrize("version", range(2, 10), ids=case_id)
def test_large_join_group_request(version: int) -> None:
    req = JoinGroupRequest(
        version=version,
        group_id=LONG,
        session_timeout_ms=1,
        member_id=LONG,
        group_instance_id=LONG,
        protocol_type=LONG,
        reason=LONG,
        protocols=[
            JoinGroupRequest.JoinGroupRequestProtocol(name=f"p{i}", metadata=bytes(200 + i))
            for i in range(130)
        ],
    )
    _, data = kp_send([(req, 1)])
    (request,) = strom_receive(data)
    assert assert_matches(request.body, req, version) > 260


UNKNOWN = ((7, b""), (300, b"\x01" * 200), (10_000, b"\xfe\xff"))


@pytest.mark.parametrize("version", range(12, 18), ids=case_id)
def test_unknown_tagged_fields_from_strom_are_skipped_by_kafka_python(version: int) -> None:
    """Unknown tags (numbered past the known ones) at the top level and nested."""
    body = s_fetch.FetchResponse(
        throttle_time_ms=1,
        responses=[
            s_fetch.FetchResponse.FetchableTopicResponse(
                topic="t",
                topic_id=fixed_uuid(1),
                partitions=[
                    s_fetch.FetchResponse.PartitionData(
                        partition_index=3,
                        current_leader=s_fetch.FetchResponse.LeaderIdAndEpoch(
                            leader_id=1, leader_epoch=2
                        ),
                        snapshot_id=s_fetch.FetchResponse.SnapshotId(end_offset=5, epoch=6),
                        records=b"",
                        unknown_tagged_fields=UNKNOWN,
                    )
                ],
                unknown_tagged_fields=UNKNOWN[:1],
            )
        ],
        node_endpoints=[s_fetch.FetchResponse.NodeEndpoint(node_id=1, host="h", port=1, rack="r")],
        unknown_tagged_fields=UNKNOWN,
    )
    req = FetchRequest(version=version, max_wait_ms=1, min_bytes=1, topics=[])
    got: object = _exchange(req, body, version, FetchResponse)
    expected = {f"_{tag}": raw for tag, raw in UNKNOWN}
    assert got.unknown_tags == expected  # type: ignore[attr-defined]
    topic = got.responses[0]  # type: ignore[attr-defined]
    assert topic.unknown_tags == {"_7": b""}
    part = topic.partitions[0]
    assert part.unknown_tags == expected
    assert (part.current_leader.leader_id, part.snapshot_id.epoch) == (1, 6)
    assert assert_matches(body, got, version, no_unknown_tags=False) > 0
    if version >= 16:
        assert got.node_endpoints[0].rack == "r"  # type: ignore[attr-defined]
