"""Storage failures as clients see them: offline partitions in Metadata and
DescribeTopicPartitions, KAFKA_STORAGE_ERROR from the data path, and a metadata
log on a full disk answering error codes instead of closing connections."""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable
from types import SimpleNamespace
from typing import cast

import pytest
import trio
import trio.testing
from typing_extensions import Buffer

from strom.broker.state import BrokerState
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import EmbeddedBroker
from strom.storage.log.log_manager import LogManager
from strom.storage.log_errors import KafkaStorageError
from strom.wire.errors import ErrorCode
from strom.wire.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse
from tests.broker.test_create_topics import create, topic
from tests.broker.test_produce_helpers import batch, create_topic, produce, state_of
from tests.log.test_storage_errors import full_disk_after, names

pytestmark = pytest.mark.trio

PartitionState = tuple[int, int, int, list[int]]
"""(index, error code, leader, offline replicas)"""


async def metadata(
    client: KafkaClient, *names: str, auto_create: bool = False
) -> MetadataResponse:
    request = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names],
        allow_auto_topic_creation=auto_create,
    )
    return await client.request(request, 12, MetadataResponse)


async def partition_states(client: KafkaClient, name: str) -> list[PartitionState]:
    [t] = (await metadata(client, name)).topics
    assert t.error_code == ErrorCode.NONE
    return [(p.partition_index, p.error_code, p.leader_id, p.offline_replicas) for p in t.partitions]


async def described(client: KafkaClient, name: str) -> list[tuple[int, int, list[int]]]:
    request = DescribeTopicPartitionsRequest(
        topics=[DescribeTopicPartitionsRequest.TopicRequest(name)], response_partition_limit=100
    )
    response = await client.request(request, 0, DescribeTopicPartitionsResponse)
    [t] = response.topics
    return [(p.partition_index, p.leader_id, p.offline_replicas) for p in t.partitions]


async def test_a_failed_disk_shows_the_partition_offline(
    broker: EmbeddedBroker, client: KafkaClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    await create_topic(broker, "t", partitions=2)
    assert await partition_states(client, "t") == [(0, 0, 1, []), (1, 0, 1, [])]
    monkeypatch.setattr(os, "write", full_disk_after(lambda fd: names(fd, ".log")))
    assert (await produce(client, "t", batch([b"x" * 1000]))).error_code == (
        ErrorCode.KAFKA_STORAGE_ERROR
    )
    monkeypatch.undo()
    # at once, with no heartbeat interval to wait for: the produce reported it before answering
    assert await partition_states(client, "t") == [
        (0, ErrorCode.LEADER_NOT_AVAILABLE, -1, [1]),
        (1, ErrorCode.NONE, 1, []),
    ]
    assert await described(client, "t") == [(0, -1, [1]), (1, 1, [])]
    assert (await produce(client, "t", batch([b"other"]), partition=1)).error_code == 0


async def test_a_failed_checkpoint_takes_the_whole_dir_offline(
    broker: EmbeddedBroker, client: KafkaClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    await create_topic(broker, "t", partitions=2)
    state = state_of(broker)
    monkeypatch.setattr(os, "write", full_disk_after(lambda fd: True))
    state.logs.checkpoint()  # what the maintenance loop runs; the heartbeat reports it
    monkeypatch.undo()
    assert state.logs.offline_dirs == set(state.logs.dirs)
    from strom.broker.replication.partitions import report_storage

    report_storage(state)
    assert await partition_states(client, "t") == [
        (0, ErrorCode.LEADER_NOT_AVAILABLE, -1, [1]),
        (1, ErrorCode.LEADER_NOT_AVAILABLE, -1, [1]),
    ]
    assert (await produce(client, "t", batch([b"x"]), partition=1)).error_code == (
        ErrorCode.KAFKA_STORAGE_ERROR
    )


async def test_a_partition_that_cannot_be_opened_is_offline_until_it_opens(
    broker: EmbeddedBroker, client: KafkaClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = LogManager.open_new

    def out_of_files(self: LogManager, directory: object, name: str, *args: object) -> object:
        if name == "many":
            raise OSError(errno.EMFILE, "Too many open files")
        return real(self, directory, name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(LogManager, "open_new", out_of_files)
    [result] = await create(client, topic("many", 2))
    assert result.error_code == ErrorCode.NONE  # the topic exists; its logs do not
    assert await partition_states(client, "many") == [
        (0, ErrorCode.LEADER_NOT_AVAILABLE, -1, [1]),
        (1, ErrorCode.LEADER_NOT_AVAILABLE, -1, [1]),
    ]
    assert (await produce(client, "many", batch([b"x"]))).error_code == (
        ErrorCode.KAFKA_STORAGE_ERROR
    )
    monkeypatch.undo()
    await create(client, topic("next"))  # any metadata change retries the open
    assert await partition_states(client, "many") == [(0, 0, 1, []), (1, 0, 1, [])]
    assert (await produce(client, "many", batch([b"x"]))).error_code == ErrorCode.NONE


def _no_space(fd: int, data: Buffer, position: int) -> int:
    raise OSError(errno.ENOSPC, "No space left on device")


async def test_a_full_metadata_disk_answers_errors_and_keeps_the_connection(
    broker: EmbeddedBroker,
    client: KafkaClient,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(os, "pwrite", _no_space)  # only the metadata log writes with pwrite
    [result] = await create(client, topic("a"))
    assert result.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert "No space left on device" in (result.error_message or "")
    for _ in range(20):  # a client polling Metadata with auto-creation on
        [t] = (await metadata(client, "auto", auto_create=True)).topics
        assert t.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert not [r for r in caplog.records if r.exc_info]  # no tracebacks
    refused = [r for r in caplog.records if "could not be written" in r.getMessage()]
    assert len(refused) == 1
    assert refused[0].levelno == logging.ERROR
    monkeypatch.undo()
    [result] = await create(client, topic("a"))
    assert result.error_code == ErrorCode.NONE
    [t] = (await metadata(client, "auto", auto_create=True)).topics
    assert t.error_code == ErrorCode.NONE


async def test_a_failed_background_flush_is_reported_and_the_loop_goes_on(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    from strom.broker.process import app

    class FailingLog:
        def flush(self) -> None:
            raise KafkaStorageError("t-0: flush failed: [Errno 5] Input/output error")

    third_round = trio.Event()
    rounds = []

    class Logs:
        on_flush_wanted = None

        def has_flush_candidates(self) -> bool:
            return True  # a failed log stays a candidate

        def flush_due(self, now_ms: int) -> list[FailingLog]:
            rounds.append(now_ms)
            if len(rounds) == 3:
                third_round.set()
            return [FailingLog()]

    reported: list[object] = []
    monkeypatch.setattr(app, "report_storage", reported.append)
    state = cast(BrokerState, SimpleNamespace(logs=Logs()))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(app._flush_loop, state)
        await third_round.wait()
        nursery.cancel_scope.cancel()
    assert len(reported) >= 2  # each failure reported, and the loop outlived them
    assert all(r is state for r in reported)


async def test_the_flush_loop_sleeps_until_a_log_wants_a_flush(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """No flush candidate (the default policy between rolls): no wake-ups at all, however
    long; the first candidate wakes the loop, which then checks every FLUSH_CHECK_SECONDS."""
    from strom.broker.process import app

    checked = trio.Event()

    class Logs:
        on_flush_wanted: Callable[[], None] | None = None
        candidates = False
        checks = 0

        def has_flush_candidates(self) -> bool:
            return self.candidates

        def flush_due(self, now_ms: int) -> list[object]:
            self.checks += 1
            checked.set()
            return []

    logs = Logs()
    state = cast(BrokerState, SimpleNamespace(logs=logs))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(app._flush_loop, state)
        await trio.sleep(3600)
        assert logs.checks == 0
        logs.candidates = True
        assert logs.on_flush_wanted is not None
        logs.on_flush_wanted()
        with trio.fail_after(1):
            await checked.wait()
        nursery.cancel_scope.cancel()
