"""CreateTopics over the wire: every version, Kafka's error cases, timeouts, logs, restart."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest

from strom.broker.drivers.quorum_controller import QuorumController
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker, open_broker
from strom.storage.log.log_manager import LogManager
from strom.wire.errors import ErrorCode
from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse
from tests.broker.test_produce_helpers import batch, produce

pytestmark = pytest.mark.trio

Topic = CreateTopicsRequest.CreatableTopic
Config = CreateTopicsRequest.CreatableTopicConfig
Assignment = CreateTopicsRequest.CreatableReplicaAssignment
ZERO = uuid.UUID(int=0)


async def create(
    client: KafkaClient,
    *topics: Topic,
    version: int = 7,
    timeout_ms: int = 30_000,
    validate_only: bool = False,
) -> list[CreateTopicsResponse.CreatableTopicResult]:
    request = CreateTopicsRequest(
        topics=list(topics), timeout_ms=timeout_ms, validate_only=validate_only
    )
    return (await client.request(request, version, CreateTopicsResponse)).topics


def topic(name: str, partitions: int = 1, factor: int = 1, /, **configs: str) -> Topic:
    """A topic to create; configs use underscores for dots (retention_ms=...)."""
    return Topic(
        name=name,
        num_partitions=partitions,
        replication_factor=factor,
        configs=[Config(k.replace("_", "."), v) for k, v in configs.items()],
    )


async def create_topic(
    client: KafkaClient, name: str, partitions: int = 1, /, **configs: str
) -> None:
    """Create a topic that must succeed (shared by the other admin API tests)."""
    [result] = await create(client, topic(name, partitions, **configs))
    assert (result.error_code, result.error_message) == (ErrorCode.NONE, None)


async def metadata(client: KafkaClient, *names: str) -> MetadataResponse:
    request = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names],
        allow_auto_topic_creation=False,
    )
    return await client.request(request, 12, MetadataResponse)


@pytest.mark.parametrize("version", range(2, 8))
async def test_every_version_creates(
    broker: EmbeddedBroker, client: KafkaClient, version: int, tmp_path: Path
) -> None:
    [result] = await create(client, topic("t", 3, retention_ms="3600000"), version=version)
    assert result.name == "t"
    assert result.error_code == ErrorCode.NONE
    if version >= 5:
        assert (result.num_partitions, result.replication_factor) == (3, 1)
        configs = {c.name: c for c in result.configs or []}
        assert configs["retention.ms"].value == "3600000"
        assert configs["retention.ms"].config_source == 1  # DYNAMIC_TOPIC_CONFIG
        assert configs["cleanup.policy"].value == "delete"
        assert configs["cleanup.policy"].config_source == 5  # DEFAULT_CONFIG
    if version >= 7:
        assert result.topic_id != ZERO
    # the logs exist and Metadata shows the topic as soon as the response is in
    assert all((tmp_path / "data" / f"t-{p}").is_dir() for p in range(3))
    [shown] = (await metadata(client, "t")).topics
    assert shown.error_code == ErrorCode.NONE
    assert [p.partition_index for p in shown.partitions] == [0, 1, 2]
    assert all(p.leader_id == 1 for p in shown.partitions)


async def test_broker_defaults_for_minus_one(client: KafkaClient) -> None:
    [result] = await create(client, topic("d", -1, -1))
    assert (result.error_code, result.num_partitions, result.replication_factor) == (0, 1, 1)


async def test_topic_id_matches_metadata(client: KafkaClient) -> None:
    [result] = await create(client, topic("ids"))
    [shown] = (await metadata(client, "ids")).topics
    assert shown.topic_id == result.topic_id


async def test_existing_topic(client: KafkaClient) -> None:
    await create_topic(client, "dup")
    [result] = await create(client, topic("dup"))
    assert result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert result.error_message == "Topic 'dup' already exists."
    assert result.topic_id == ZERO


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "the empty string is not allowed"),
        ("..", "'..' is not allowed"),
        ("bad/name", "contains one or more characters other than"),
        ("x" * 250, "is longer than the max allowed length 249"),
    ],
)
async def test_invalid_names(client: KafkaClient, name: str, reason: str) -> None:
    [result] = await create(client, topic(name))
    assert result.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert result.error_message is not None
    assert reason in result.error_message


async def test_colliding_name(client: KafkaClient) -> None:
    await create_topic(client, "a.b")
    [result] = await create(client, topic("a_b"))
    assert result.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert result.error_message == "Topic 'a_b' collides with existing topic: a.b"


@pytest.mark.parametrize(
    ("configs", "text"),
    [
        ({"no_such_option": "1"}, "Unknown topic config name: no.such.option"),
        ({"retention_ms": "soon"}, "retention.ms"),
        ({"cleanup_policy": "archive"}, "cleanup.policy"),
        ({"min_insync_replicas": "0"}, "min.insync.replicas"),
    ],
)
async def test_invalid_configs(client: KafkaClient, configs: dict[str, str], text: str) -> None:
    [result] = await create(client, topic("c", **configs))
    assert result.error_code == ErrorCode.INVALID_CONFIG
    assert result.error_message is not None
    assert text in result.error_message
    assert (await metadata(client, "c")).topics[
        0
    ].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_null_config_value(client: KafkaClient) -> None:
    [result] = await create(
        client,
        Topic(
            name="n", num_partitions=1, replication_factor=1, configs=[Config("retention.ms", None)]
        ),
    )
    assert result.error_code == ErrorCode.INVALID_CONFIG
    assert result.error_message == "Null value not supported for topic configs: retention.ms"


async def test_replication_factor_above_broker_count(client: KafkaClient) -> None:
    [result] = await create(client, topic("rf", 1, 2))
    assert result.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert result.error_message == (
        "Unable to replicate the partition 2 time(s): The target replication factor of 2 "
        "cannot be reached because only 1 broker(s) are registered."
    )


@pytest.mark.parametrize(("partitions", "factor"), [(0, 1), (-2, 1), (1, 0), (1, -2)])
async def test_non_positive_counts(client: KafkaClient, partitions: int, factor: int) -> None:
    [result] = await create(client, topic("np", partitions, factor))
    expected = ErrorCode.INVALID_PARTITIONS if factor == 1 else ErrorCode.INVALID_REPLICATION_FACTOR
    assert result.error_code == expected


async def test_manual_assignment(client: KafkaClient) -> None:
    manual = Topic(
        name="m",
        num_partitions=-1,
        replication_factor=-1,
        assignments=[Assignment(0, [1]), Assignment(1, [1])],
    )
    [result] = await create(client, manual)
    assert (result.error_code, result.num_partitions) == (ErrorCode.NONE, 2)
    wrong = Topic(
        name="w", num_partitions=1, replication_factor=1, assignments=[Assignment(0, [1])]
    )
    unknown = Topic(
        name="u", num_partitions=-1, replication_factor=-1, assignments=[Assignment(0, [7])]
    )
    both, missing = await create(client, wrong, unknown)
    assert both.error_code == ErrorCode.INVALID_REQUEST
    assert both.error_message == (
        "A manual partition assignment was specified, but replication factor was not set to -1."
    )
    assert missing.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


async def test_duplicate_names_come_last(client: KafkaClient) -> None:
    results = await create(client, topic("x"), topic("y"), topic("x"))
    assert [(r.name, r.error_code, r.error_message) for r in results] == [
        ("y", ErrorCode.NONE, None),
        ("x", ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
    ]


async def test_cluster_metadata_topic_is_refused(client: KafkaClient) -> None:
    results = await create(client, topic("__cluster_metadata"), topic("ok"))
    assert [(r.name, r.error_code, r.error_message) for r in results] == [
        ("ok", ErrorCode.NONE, None),
        (
            "__cluster_metadata",
            ErrorCode.INVALID_REQUEST,
            "Creation of internal topic __cluster_metadata is prohibited.",
        ),
    ]


async def test_validate_only_leaves_nothing_behind(client: KafkaClient, tmp_path: Path) -> None:
    [result] = await create(client, topic("v", 2, retention_ms="1000"), validate_only=True)
    assert (result.error_code, result.num_partitions) == (ErrorCode.NONE, 2)
    assert result.topic_id != ZERO
    assert {c.name: c.value for c in result.configs or []}["retention.ms"] == "1000"
    assert (await metadata(client, "v")).topics[
        0
    ].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert not (tmp_path / "data" / "v-0").exists()
    # and validation still reports the real errors
    [bad] = await create(client, topic("v", 1, 3), validate_only=True)
    assert bad.error_code == ErrorCode.INVALID_REPLICATION_FACTOR


@pytest.mark.parametrize("timeout_ms", [0, -1])
async def test_expired_timeout_creates_nothing(client: KafkaClient, timeout_ms: int) -> None:
    results = await create(client, topic("late"), topic("late2"), timeout_ms=timeout_ms)
    assert [(r.name, r.error_code, r.error_message) for r in results] == [
        ("late", ErrorCode.REQUEST_TIMED_OUT, None),
        ("late2", ErrorCode.REQUEST_TIMED_OUT, None),
    ]
    assert (await metadata(client, "late")).topics[
        0
    ].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_expired_timeout_without_work_answers(client: KafkaClient) -> None:
    assert await create(client, timeout_ms=0) == []
    results = await create(client, topic("d"), topic("d"), timeout_ms=0)
    assert [(r.name, r.error_code) for r in results] == [("d", ErrorCode.INVALID_REQUEST)]


async def test_topics_survive_a_restart(tmp_path: Path) -> None:
    async with open_broker(tmp_path) as running:
        client = await KafkaClient.connect(running.bootstrap)
        [created] = await create(client, topic("kept", 2, retention_ms="1234"))
        await client.aclose()
    async with open_broker(tmp_path) as running:
        client = await KafkaClient.connect(running.bootstrap)
        [shown] = (await metadata(client, "kept")).topics
        assert shown.topic_id == created.topic_id
        assert len(shown.partitions) == 2
        [again] = await create(client, topic("kept"))
        assert again.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        await client.aclose()


async def test_deadline_passing_while_queued_creates_nothing(
    broker: EmbeddedBroker, client: KafkaClient
) -> None:
    """The timeout bounds the wait for the controller, which runs one command at a time."""
    state = broker.broker.state
    assert state is not None
    controller = state.controller
    assert isinstance(controller, QuorumController)  # the single-node default
    async with controller._lock:  # another command holds the controller
        results = await create(client, topic("queued"), timeout_ms=50)
    assert [(r.name, r.error_code, r.error_message) for r in results] == [
        ("queued", ErrorCode.REQUEST_TIMED_OUT, None)
    ]
    assert (await metadata(client, "queued")).topics[0].error_code == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    # once the controller is free the same request succeeds (with time to commit: a command's
    # fsync on a loaded machine may take longer than the 50 ms above)
    [created] = await create(client, topic("queued"))
    assert created.error_code == ErrorCode.NONE


async def test_new_logs_are_created_off_the_event_loop(
    client: KafkaClient, broker: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Creating a partition's files takes a millisecond or more: a worker thread does it, and
    the response still means the logs exist."""
    threads: list[threading.Thread] = []
    open_new = LogManager.open_new

    def spy(self: LogManager, *args: object, **kwargs: object) -> object:
        threads.append(threading.current_thread())
        return open_new(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LogManager, "open_new", spy)
    [result] = await create(client, topic("off-loop", 3))
    assert result.error_code == ErrorCode.NONE
    assert len(threads) == 3
    assert all(t is not threading.main_thread() for t in threads)
    state = broker.broker.state
    assert state is not None
    assert all(state.logs.get("off-loop", p) is not None for p in range(3))


async def test_a_log_that_cannot_be_created_is_not_served(
    broker: EmbeddedBroker, client: KafkaClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The data directory refuses one partition's log: no crash, that partition alone refuses
    data (KAFKA_STORAGE_ERROR, retriable), and the log is created at the next metadata change."""
    real_open_new = LogManager.open_new

    def refuse_partition_0(
        self: LogManager, directory: Path, name: str, partition: int, config: object
    ) -> object:
        if (name, partition) == ("t", 0):
            raise OSError(13, "Permission denied", str(directory / f"{name}-{partition}"))
        return real_open_new(self, directory, name, partition, config)  # type: ignore[arg-type]

    monkeypatch.setattr(LogManager, "open_new", refuse_partition_0)
    [result] = await create(client, topic("t", 2))
    assert result.error_code == ErrorCode.NONE  # the controller committed it; the disk refused
    assert (await produce(client, "t", batch([b"x"]), partition=0)).error_code == (
        ErrorCode.KAFKA_STORAGE_ERROR
    )
    assert (await produce(client, "t", batch([b"y"]), partition=1)).error_code == ErrorCode.NONE
    monkeypatch.undo()
    await create_topic(client, "next")  # any metadata change: partition 0's log is retried
    assert (await produce(client, "t", batch([b"x"]), partition=0)).error_code == ErrorCode.NONE


async def test_a_log_that_cannot_be_created_is_offline_in_metadata(
    broker: EmbeddedBroker, client: KafkaClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listed without a leader, so clients stop producing to it blind (issue 10, finding 5)."""

    def refuse(*_args: object) -> object:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(LogManager, "open_new", refuse)
    await create(client, topic("t", 1))
    [listed] = (await metadata(client, "t")).topics
    [partition] = listed.partitions
    assert (partition.error_code, partition.leader_id) == (ErrorCode.LEADER_NOT_AVAILABLE, -1)
    assert partition.offline_replicas == [1]


async def test_reported_configs_include_dynamic_broker_defaults(client: KafkaClient) -> None:
    """CreateTopics v5+ resolves configs over dynamic broker configs, as DescribeConfigs does.

    Found by differential testing: a fresh Kafka 4.1 cluster has a cluster-wide
    min.insync.replicas, which Kafka reports with source DYNAMIC_DEFAULT_BROKER_CONFIG.
    """
    from strom.wire.messages.incremental_alter_configs import (
        IncrementalAlterConfigsRequest as Alter,
    )
    from strom.wire.messages.incremental_alter_configs import IncrementalAlterConfigsResponse

    changes = [
        Alter.AlterableConfig(name="min.insync.replicas", config_operation=0, value="1"),
        Alter.AlterableConfig(name="log.retention.ms", config_operation=0, value="123456"),
    ]
    altered = await client.request(
        Alter(resources=[Alter.AlterConfigsResource(resource_type=4, resource_name="",
                                                    configs=changes)]),
        1,
        IncrementalAlterConfigsResponse,
    )  # fmt: skip
    assert altered.responses[0].error_code == ErrorCode.NONE
    [result] = await create(client, topic("dyn"), version=5)
    configs = {c.name: (c.value, c.config_source) for c in result.configs or []}
    assert configs["min.insync.replicas"] == ("1", 3)  # DYNAMIC_DEFAULT_BROKER_CONFIG
    assert configs["retention.ms"] == ("123456", 3)
    assert configs["segment.bytes"][1] == 5  # DEFAULT_CONFIG
