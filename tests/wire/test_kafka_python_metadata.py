"""kafka-python <-> Strom: ApiVersions, Metadata and FindCoordinator, every common version.

kafka-python 3.0.12 has ApiVersions 0-4, Metadata 0-13 and FindCoordinator
0-6, the same ranges as Strom, so every version is covered both ways.
"""

from __future__ import annotations

from typing import Any

import pytest

from strom.wire.messages import api_versions as s_api_versions
from strom.wire.messages import find_coordinator as s_find_coordinator
from strom.wire.messages import metadata as s_metadata
from strom.wire.primitives import ZERO_UUID
from tests.wire.kp_helpers import (
    ApiCase,
    assert_matches,
    case_id,
    fixed_uuid,
    kp_metadata,
    kp_receive,
    kp_send,
    run_request_case,
    run_response_case,
    strom_body,
    strom_body_for,
    strom_receive,
    strom_response_bytes,
)

ApiVersionsRequest = kp_metadata.ApiVersionsRequest
ApiVersionsResponse = kp_metadata.ApiVersionsResponse
FindCoordinatorRequest = kp_metadata.FindCoordinatorRequest
FindCoordinatorResponse = kp_metadata.FindCoordinatorResponse
MetadataRequest = kp_metadata.MetadataRequest
MetadataResponse = kp_metadata.MetadataResponse

# --- ApiVersions -------------------------------------------------------------


def kp_api_versions_request(v: int) -> Any:
    return ApiVersionsRequest(
        version=v, client_software_name="strøm-client", client_software_version="1.0.0-ü"
    )


def strom_api_versions_response(v: int) -> s_api_versions.ApiVersionsResponse:
    return s_api_versions.ApiVersionsResponse(
        error_code=0,
        api_keys=[
            s_api_versions.ApiVersionsResponse.ApiVersion(api_key=0, min_version=3, max_version=12),
            s_api_versions.ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4),
            s_api_versions.ApiVersionsResponse.ApiVersion(
                api_key=32767, min_version=-1, max_version=-32768
            ),
        ],
        throttle_time_ms=-7,
        supported_features=[
            s_api_versions.ApiVersionsResponse.SupportedFeatureKey(
                name="metadata.version", min_version=1, max_version=27
            ),
            s_api_versions.ApiVersionsResponse.SupportedFeatureKey(
                name="fëature.β", min_version=0, max_version=1
            ),
        ],
        finalized_features_epoch=-123_456_789_012,
        finalized_features=[
            s_api_versions.ApiVersionsResponse.FinalizedFeatureKey(
                name="metadata.version", max_version_level=27, min_version_level=1
            )
        ],
        zk_migration_ready=True,
    )


def check_api_versions_request(body: Any, v: int) -> None:
    if v >= 3:
        assert body.client_software_name == "strøm-client"
        assert body.client_software_version == "1.0.0-ü"
    else:
        assert body.client_software_name == ""


def check_api_versions_response(got: Any, v: int) -> None:
    assert got.error_code == 0
    assert [(k.api_key, k.min_version, k.max_version) for k in got.api_keys] == [
        (0, 3, 12),
        (18, 0, 4),
        (32767, -1, -32768),
    ]
    if v >= 1:
        assert got.throttle_time_ms == -7
    if v >= 3:  # all four tagged fields
        assert [f.name for f in got.supported_features] == ["metadata.version", "fëature.β"]
        assert got.finalized_features_epoch == -123_456_789_012
        assert got.finalized_features[0].max_version_level == 27
        assert got.zk_migration_ready is True


API_VERSIONS = ApiCase(
    "ApiVersions",
    ApiVersionsRequest,
    ApiVersionsResponse,
    range(5),
    kp_api_versions_request,
    strom_api_versions_response,
    check_api_versions_request,
    check_api_versions_response,
)

# --- Metadata ----------------------------------------------------------------


def kp_metadata_request(v: int) -> Any:
    return MetadataRequest(
        version=v,
        topics=[
            MetadataRequest.MetadataRequestTopic(topic_id=fixed_uuid(1), name="tøpic-中"),
            # Name is nullable from v10 (lookup by topic id).
            MetadataRequest.MetadataRequestTopic(
                topic_id=fixed_uuid(2), name=None if v >= 10 else "__consumer_offsets"
            ),
        ],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True,
    )


def strom_metadata_response(v: int) -> s_metadata.MetadataResponse:
    return s_metadata.MetadataResponse(
        throttle_time_ms=250,
        brokers=[
            s_metadata.MetadataResponse.MetadataResponseBroker(
                node_id=1, host="brøker-1.local", port=9092, rack="rack-中"
            ),
            s_metadata.MetadataResponse.MetadataResponseBroker(
                node_id=2, host="b2", port=19092, rack=None
            ),
        ],
        cluster_id="clüster-id" if v != 7 else None,
        controller_id=2,
        topics=[
            s_metadata.MetadataResponse.MetadataResponseTopic(
                error_code=0,
                name="tøpic-中",
                topic_id=fixed_uuid(1),
                is_internal=False,
                partitions=[
                    s_metadata.MetadataResponse.MetadataResponsePartition(
                        0, 0, 1, 5, [1, 2], [1], [2]
                    ),
                    s_metadata.MetadataResponse.MetadataResponsePartition(
                        error_code=9,
                        partition_index=1,
                        leader_id=-1,
                        leader_epoch=-1,
                        replica_nodes=[2, 1],
                        isr_nodes=[],
                        offline_replicas=[],
                    ),
                ],
                topic_authorized_operations=0b1111_1000,
            ),
            s_metadata.MetadataResponse.MetadataResponseTopic(
                error_code=3,
                name=None if v >= 12 else "missing",
                topic_id=fixed_uuid(3),
                is_internal=True,
                partitions=[],
                topic_authorized_operations=-2147483648,
            ),
        ],
        cluster_authorized_operations=(1 << 3) | (1 << 7) | (1 << 30),
        error_code=-1,
    )


def check_metadata_request(body: Any, v: int) -> None:
    assert body.topics[0].name == "tøpic-中"
    assert body.topics[1].name == (None if v >= 10 else "__consumer_offsets")
    assert body.topics[1].topic_id == (fixed_uuid(2) if v >= 10 else ZERO_UUID)
    assert body.allow_auto_topic_creation is (v < 4)  # v0-3 lack it: Strom's default True
    assert body.include_topic_authorized_operations is (v >= 8)
    assert body.include_cluster_authorized_operations is (8 <= v <= 10)


def check_metadata_response(got: Any, v: int) -> None:
    assert [(b.node_id, b.host, b.port) for b in got.brokers] == [
        (1, "brøker-1.local", 9092),
        (2, "b2", 19092),
    ]
    topic = got.topics[0]
    assert topic.name == "tøpic-中"
    assert topic.partitions[0].replica_nodes == [1, 2]
    assert topic.partitions[1].leader_id == -1
    assert got.topics[1].error_code == 3
    assert got.topics[1].name == (None if v >= 12 else "missing")
    if v >= 1:
        assert got.brokers[0].rack == "rack-中"
        assert got.brokers[1].rack is None
        assert got.controller_id == 2
        assert got.topics[1].is_internal is True
    if v >= 2:
        assert got.cluster_id == (None if v == 7 else "clüster-id")
    if v >= 5:
        assert topic.partitions[0].offline_replicas == [2]
    if v >= 8:
        assert topic.authorized_operations == {3, 4, 5, 6, 7}
        assert got.topics[1].authorized_operations is None  # INT32_MIN: not requested
    if 8 <= v <= 10:
        assert got.authorized_operations == {3, 7, 30}
    if v >= 10:
        assert topic.topic_id == fixed_uuid(1)
    if v >= 13:
        assert got.error_code == -1


METADATA = ApiCase(
    "Metadata",
    MetadataRequest,
    MetadataResponse,
    range(14),
    kp_metadata_request,
    strom_metadata_response,
    check_metadata_request,
    check_metadata_response,
)

# --- FindCoordinator -----------------------------------------------------------


def kp_find_coordinator_request(v: int) -> Any:
    return FindCoordinatorRequest(
        version=v, key="grøup-中", key_type=1, coordinator_keys=["grøup-中", "tx-β", ""]
    )


def strom_find_coordinator_response(v: int) -> s_find_coordinator.FindCoordinatorResponse:
    return s_find_coordinator.FindCoordinatorResponse(
        throttle_time_ms=12,
        error_code=15,
        error_message=None if v == 2 else "nø coordinator ✗",
        node_id=-1,
        host="hóst",
        port=65536,
        coordinators=[
            s_find_coordinator.FindCoordinatorResponse.Coordinator(
                key="grøup-中", node_id=1, host="h1", port=9092, error_code=0, error_message=None
            ),
            s_find_coordinator.FindCoordinatorResponse.Coordinator(
                key="tx-β",
                node_id=-1,
                host="",
                port=-1,
                error_code=15,
                error_message="nöt available",
            ),
        ],
    )


def check_find_coordinator_request(body: Any, v: int) -> None:
    if v <= 3:
        assert body.key == "grøup-中"
        assert body.coordinator_keys == []
    else:
        assert body.key == ""
        assert body.coordinator_keys == ["grøup-中", "tx-β", ""]
    assert body.key_type == (1 if v >= 1 else 0)


def check_find_coordinator_response(got: Any, v: int) -> None:
    if v <= 3:
        assert (got.error_code, got.node_id, got.host, got.port) == (15, -1, "hóst", 65536)
        if v >= 1:
            assert got.error_message == (None if v == 2 else "nø coordinator ✗")
    else:
        assert [(c.key, c.node_id, c.error_code, c.error_message) for c in got.coordinators] == [
            ("grøup-中", 1, 0, None),
            ("tx-β", -1, 15, "nöt available"),
        ]
    if v >= 1:
        assert got.throttle_time_ms == 12


FIND_COORDINATOR = ApiCase(
    "FindCoordinator",
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    range(7),
    kp_find_coordinator_request,
    strom_find_coordinator_response,
    check_find_coordinator_request,
    check_find_coordinator_response,
)

CASES = [API_VERSIONS, METADATA, FIND_COORDINATOR]
PARAMS = [p for c in CASES for p in c.params()]


@pytest.mark.parametrize(("case", "version"), PARAMS, ids=case_id)
def test_kafka_python_request_decodes_in_strom(case: ApiCase, version: int) -> None:
    run_request_case(case, version, correlation_id=0x7FFF_FF00 + version)


@pytest.mark.parametrize(("case", "version"), PARAMS, ids=case_id)
def test_strom_response_decodes_in_kafka_python(case: ApiCase, version: int) -> None:
    run_response_case(case, version, correlation_id=-(1000 + version))


@pytest.mark.parametrize("version", range(1, 14), ids=case_id)
def test_metadata_request_null_topics_means_all(version: int) -> None:
    """A null Topics array (all topics, v1+) stays null rather than becoming empty."""
    req = MetadataRequest(version=version, topics=None, allow_auto_topic_creation=True)
    _, data = kp_send([(req, 5)])
    body = strom_body(data, s_metadata.MetadataRequest)
    assert body.topics is None
    assert_matches(body, req, version)


def test_metadata_request_v0_empty_topics_means_all() -> None:
    """v0 has no null array: kafka-python sends [] for all topics, Strom sees []."""
    req = MetadataRequest(version=0, topics=None)
    _, data = kp_send([(req, 5)])
    assert strom_body(data, s_metadata.MetadataRequest).topics == []


@pytest.mark.parametrize("version", [9, 12, 13], ids=case_id)
def test_metadata_response_null_bitfields_and_empty_arrays(version: int) -> None:
    body = s_metadata.MetadataResponse(
        brokers=[],
        topics=[
            s_metadata.MetadataResponse.MetadataResponseTopic(
                name="t", partitions=[], topic_authorized_operations=0
            )
        ],
    )
    proto, data = kp_send([(MetadataRequest(version=version, topics=None), 9)])
    (request,) = strom_receive(data)
    ((_, got),) = kp_receive(proto, strom_response_bytes(request, body))
    assert got.brokers == []
    assert got.cluster_id is None
    assert got.controller_id == -1
    assert got.topics[0].authorized_operations == set()  # 0 is "none allowed", not "not requested"
    assert_matches(body, got, version)


def test_strom_body_for_trims_fields_a_version_lacks() -> None:
    """Sanity check of the helper itself: v0 keeps only v0 fields."""
    body = strom_body_for(METADATA, 0)
    assert isinstance(body, s_metadata.MetadataResponse)
    assert body.cluster_id is None
    assert body.throttle_time_ms == 0
    assert body.brokers[0].rack is None
    assert body.topics[0].topic_id == ZERO_UUID
    assert body.topics[0].partitions[0].offline_replicas == []
