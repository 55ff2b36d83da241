"""kafka-python <-> Strom: CreateTopics (2-7) and DescribeConfigs (1-4).

Both ranges are the same on the two sides, so every version is covered.
"""

from __future__ import annotations

from typing import Any

import pytest

from strom.wire.messages import create_topics as s_create_topics
from strom.wire.messages import describe_configs as s_describe_configs
from strom.wire.primitives import ZERO_UUID
from tests.wire.kp_helpers import (
    ApiCase,
    case_id,
    fixed_uuid,
    kp_admin,
    run_request_case,
    run_response_case,
)

CreateTopicsRequest = kp_admin.CreateTopicsRequest
CreateTopicsResponse = kp_admin.CreateTopicsResponse
DescribeConfigsRequest = kp_admin.DescribeConfigsRequest
DescribeConfigsResponse = kp_admin.DescribeConfigsResponse

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4

# --- CreateTopics ---------------------------------------------------------------


def kp_create_topics_request(v: int) -> Any:
    return CreateTopicsRequest(
        version=v,
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name="tøpic-中",
                num_partitions=-1,
                replication_factor=-1,
                assignments=[
                    CreateTopicsRequest.CreatableTopic.CreatableReplicaAssignment(
                        partition_index=0, broker_ids=[1, 2]
                    ),
                    CreateTopicsRequest.CreatableTopic.CreatableReplicaAssignment(
                        partition_index=1, broker_ids=[2, 3]
                    ),
                ],
                configs=[
                    CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(
                        name="cleanup.policy", value="compact"
                    ),
                    CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(
                        name="retention.ms", value=None
                    ),
                ],
            ),
            CreateTopicsRequest.CreatableTopic(
                name="t2", num_partitions=3, replication_factor=2, assignments=[], configs=[]
            ),
        ],
        timeout_ms=30_000,
        validate_only=True,
    )


def strom_create_topics_response(v: int) -> s_create_topics.CreateTopicsResponse:
    return s_create_topics.CreateTopicsResponse(
        throttle_time_ms=11,
        topics=[
            s_create_topics.CreateTopicsResponse.CreatableTopicResult(
                name="tøpic-中",
                topic_id=fixed_uuid(1),
                error_code=0,
                error_message=None,
                topic_config_error_code=29,
                num_partitions=2,
                replication_factor=3,
                configs=[
                    s_create_topics.CreateTopicsResponse.CreatableTopicConfigs(
                        name="cleanup.policy",
                        value="compact",
                        read_only=False,
                        config_source=1,
                        is_sensitive=False,
                    ),
                    s_create_topics.CreateTopicsResponse.CreatableTopicConfigs(
                        name="sasl.secret-ü",
                        value=None,
                        read_only=True,
                        config_source=5,
                        is_sensitive=True,
                    ),
                ],
            ),
            s_create_topics.CreateTopicsResponse.CreatableTopicResult(
                name="t2",
                topic_id=ZERO_UUID,
                error_code=36,
                error_message="Topic 't2' already exists ✗",
                topic_config_error_code=0,
                num_partitions=-1,
                replication_factor=-1,
                configs=None,
            ),
        ],
    )


def check_create_topics_request(body: Any, v: int) -> None:
    t0, t1 = body.topics
    assert (t0.name, t0.num_partitions, t0.replication_factor) == ("tøpic-中", -1, -1)
    assert [(a.partition_index, a.broker_ids) for a in t0.assignments] == [(0, [1, 2]), (1, [2, 3])]
    assert [(c.name, c.value) for c in t0.configs] == [
        ("cleanup.policy", "compact"),
        ("retention.ms", None),
    ]
    assert (t1.name, t1.num_partitions, t1.replication_factor) == ("t2", 3, 2)
    assert (t1.assignments, t1.configs) == ([], [])
    assert (body.timeout_ms, body.validate_only) == (30_000, True)


def check_create_topics_response(got: Any, v: int) -> None:
    t0, t1 = got.topics
    assert got.throttle_time_ms == 11
    assert (t0.name, t0.error_code, t0.error_message) == ("tøpic-中", 0, None)
    assert (t1.name, t1.error_code, t1.error_message) == ("t2", 36, "Topic 't2' already exists ✗")
    if v >= 5:
        assert t0.topic_config_error_code == 29  # tagged
        assert (t0.num_partitions, t0.replication_factor) == (2, 3)
        assert [
            (c.name, c.value, c.read_only, c.config_source, c.is_sensitive) for c in t0.configs
        ] == [
            ("cleanup.policy", "compact", False, 1, False),
            ("sasl.secret-ü", None, True, 5, True),
        ]
        assert t1.configs is None
        assert t1.tags is None  # topic_config_error_code 0 is the default: not sent
    if v >= 7:
        assert t0.topic_id == fixed_uuid(1)
        assert t1.topic_id is None  # kafka-python's zero UUID


CREATE_TOPICS = ApiCase(
    "CreateTopics",
    CreateTopicsRequest,
    CreateTopicsResponse,
    range(2, 8),
    kp_create_topics_request,
    strom_create_topics_response,
    check_create_topics_request,
    check_create_topics_response,
)

# --- DescribeConfigs ------------------------------------------------------------


def kp_describe_configs_request(v: int) -> Any:
    return DescribeConfigsRequest(
        version=v,
        resources=[
            DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=TOPIC_RESOURCE,
                resource_name="tøpic-中",
                configuration_keys=["cleanup.policy", "retention.ms"],
            ),
            DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=BROKER_RESOURCE, resource_name="1", configuration_keys=None
            ),
            DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=BROKER_RESOURCE, resource_name="", configuration_keys=[]
            ),
        ],
        include_synonyms=True,
        include_documentation=True,
    )


def strom_describe_configs_response(v: int) -> s_describe_configs.DescribeConfigsResponse:
    return s_describe_configs.DescribeConfigsResponse(
        throttle_time_ms=13,
        results=[
            s_describe_configs.DescribeConfigsResponse.DescribeConfigsResult(
                error_code=0,
                error_message=None,
                resource_type=TOPIC_RESOURCE,
                resource_name="tøpic-中",
                configs=[
                    s_describe_configs.DescribeConfigsResponse.DescribeConfigsResourceResult(
                        name="cleanup.policy",
                        value="compact",
                        read_only=False,
                        config_source=1,
                        is_sensitive=False,
                        synonyms=[
                            s_describe_configs.DescribeConfigsResponse.DescribeConfigsSynonym(
                                name="cleanup.policy", value="compact", source=1
                            ),
                            s_describe_configs.DescribeConfigsResponse.DescribeConfigsSynonym(
                                name="log.cleanup.policy", value=None, source=5
                            ),
                        ],
                        config_type=2,
                        documentation="Düc ✓",
                    ),
                    s_describe_configs.DescribeConfigsResponse.DescribeConfigsResourceResult(
                        name="ssl.key.password",
                        value=None,
                        read_only=True,
                        config_source=4,
                        is_sensitive=True,
                        synonyms=[],
                        config_type=9,
                        documentation=None,
                    ),
                ],
            ),
            s_describe_configs.DescribeConfigsResponse.DescribeConfigsResult(
                error_code=3,
                error_message="unknown tøpic",
                resource_type=BROKER_RESOURCE,
                resource_name="1",
                configs=[],
            ),
        ],
    )


def check_describe_configs_request(body: Any, v: int) -> None:
    r0, r1, r2 = body.resources
    assert (r0.resource_type, r0.resource_name, r0.configuration_keys) == (
        TOPIC_RESOURCE,
        "tøpic-中",
        ["cleanup.policy", "retention.ms"],
    )
    assert (r1.resource_type, r1.resource_name, r1.configuration_keys) == (
        BROKER_RESOURCE,
        "1",
        None,
    )
    assert (r2.resource_name, r2.configuration_keys) == ("", [])
    assert body.include_synonyms is True
    assert body.include_documentation is (v >= 3)


def check_describe_configs_response(got: Any, v: int) -> None:
    r0, r1 = got.results
    assert got.throttle_time_ms == 13
    assert (r0.error_code, r0.error_message, r0.resource_name) == (0, None, "tøpic-中")
    assert (r1.error_code, r1.error_message, r1.configs) == (3, "unknown tøpic", [])
    c0, c1 = r0.configs
    assert (c0.name, c0.value, c0.read_only, c0.is_sensitive) == (
        "cleanup.policy",
        "compact",
        False,
        False,
    )
    assert (c1.value, c1.read_only, c1.is_sensitive) == (None, True, True)
    assert (c0.config_source, c1.config_source) == (1, 4)
    assert [(s.name, s.value, s.source) for s in c0.synonyms] == [
        ("cleanup.policy", "compact", 1),
        ("log.cleanup.policy", None, 5),
    ]
    if v >= 3:
        assert (c0.config_type, c0.documentation) == (2, "Düc ✓")
        assert (c1.config_type, c1.documentation) == (9, None)


DESCRIBE_CONFIGS = ApiCase(
    "DescribeConfigs",
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    range(1, 5),
    kp_describe_configs_request,
    strom_describe_configs_response,
    check_describe_configs_request,
    check_describe_configs_response,
)

CASES = [CREATE_TOPICS, DESCRIBE_CONFIGS]
PARAMS = [p for c in CASES for p in c.params()]


@pytest.mark.parametrize(("case", "version"), PARAMS, ids=case_id)
def test_kafka_python_request_decodes_in_strom(case: ApiCase, version: int) -> None:
    run_request_case(case, version, correlation_id=31_337 + version)


@pytest.mark.parametrize(("case", "version"), PARAMS, ids=case_id)
def test_strom_response_decodes_in_kafka_python(case: ApiCase, version: int) -> None:
    run_response_case(case, version, correlation_id=-31_337 - version)
