"""The controller host on a single node (a one-voter Raft quorum) under trio: bootstrap,
durability across restarts, listeners, snapshots, a metadata disk that fails."""

from __future__ import annotations

import errno
import os
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel

from strom.broker.drivers import quorum_controller
from strom.broker.drivers.quorum_controller import QuorumController
from strom.config import BrokerConfig, Listener
from strom.coordinator.controller import ControllerError, ControllerResult
from strom.coordinator.controller.result import PLAN_SLICE
from strom.coordinator.metadata.delta import MetadataDelta
from strom.coordinator.metadata.image import MetadataImage
from strom.coordinator.metadata.kraft_checkpoint import encode_bootstrap
from strom.coordinator.metadata.metadata_records import MetadataError
from strom.storage.meta_properties import BOOTSTRAP_FILE, read_meta_properties
from strom.storage.raft.raft_disk import LOG_DIR_NAME
from strom.storage.raft.raft_log import parse_snapshot_name, snapshot_name
from strom.storage.raft.raft_store import SnapshotId
from strom.wire.errors import ErrorCode
from strom.wire.formats.metadata.remove_topic_record import RemoveTopicRecord
from strom.wire.messages.alter_configs import AlterConfigsRequest
from strom.wire.messages.broker_heartbeat import BrokerHeartbeatRequest
from strom.wire.messages.create_partitions import CreatePartitionsRequest
from strom.wire.messages.create_topics import CreateTopicsRequest
from strom.wire.messages.delete_topics import DeleteTopicsRequest
from strom.wire.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from tests.controller.helpers import topic, uuid_source


def _config(tmp_path: Path, **extra: str) -> BrokerConfig:
    props = {
        "log.dir": str(tmp_path / "data"),
        **{k.replace("_", "."): v for k, v in extra.items()},
    }
    return BrokerConfig.from_properties(props)


def _run(test: Callable[[], Awaitable[None]]) -> None:
    trio.run(test)


@asynccontextmanager
async def _open(config: BrokerConfig, **kwargs: object) -> AsyncIterator[QuorumController]:
    """The node's controller, running, with its broker registered and unfenced (as `strom
    serve` has it before it serves); closed on exit."""
    controller = await QuorumController.open(config, clock=lambda: 1_700_000_000_000, **kwargs)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        await nursery.start(controller.run)
        try:
            await controller.start()
            yield controller
        finally:
            await controller.close()


def _snapshots(directory: Path) -> list[SnapshotId]:
    return sorted(s for p in directory.iterdir() if (s := parse_snapshot_name(p.name)))


def test_first_start_bootstraps_and_restart_recovers(tmp_path: Path) -> None:
    config = _config(tmp_path, cluster_id="strom-test")

    async def main() -> None:
        async with _open(config) as driver:
            image = driver.image
            assert driver.cluster_id == "strom-test"
            assert image.metadata_version == 25
            (node,) = image.brokers()
            assert (node.broker_id, node.fenced, node.epoch) == (1, False, driver.broker_epoch)
            assert [(e.name, e.host, e.port) for e in node.endpoints] == [
                ("PLAINTEXT", "127.0.0.1", 9092)
            ]
            created = await driver.create_topics(CreateTopicsRequest(topics=[topic("a", 3)]), 7)
            assert created.topics[0].error_code == 0
            grown = await driver.create_partitions(
                CreatePartitionsRequest(
                    topics=[CreatePartitionsRequest.CreatePartitionsTopic("a", 4, None)]
                ),
                3,
            )
            assert grown.results[0].error_code == 0
            config_change = IncrementalAlterConfigsRequest(
                resources=[
                    IncrementalAlterConfigsRequest.AlterConfigsResource(
                        2,
                        "a",
                        [IncrementalAlterConfigsRequest.AlterableConfig("retention.ms", 0, "5")],
                    )
                ]
            )
            altered = await driver.incremental_alter_configs(config_change, 1)
            assert altered.responses[0].error_code == 0
            legacy = AlterConfigsRequest(
                resources=[
                    AlterConfigsRequest.AlterConfigsResource(
                        2, "a", [AlterConfigsRequest.AlterableConfig("segment.ms", "99")]
                    )
                ]
            )
            assert (await driver.alter_configs(legacy, 1)).responses[0].error_code == 0
            assert await driver.allocate_producer_ids() == (0, 1000)
            assert await driver.allocate_producer_ids() == (1000, 1000)
            await driver.create_topics(CreateTopicsRequest(topics=[topic("gone")]), 7)
            deleted = await driver.delete_topics(DeleteTopicsRequest(topic_names=["gone"]), 4)
            assert deleted.responses[0].error_code == 0
            before, epoch, broker_epoch = driver.image, driver.epoch, driver.broker_epoch

        async with _open(config) as again:
            after = again.image
            assert again.epoch == epoch + 1
            assert after.topic_names() == ["a"]
            assert after.topic("a") == before.topic("a")
            assert after.topic_config_overrides("a") == {"segment.ms": "99"}
            assert after.next_producer_id == 2000
            assert await again.allocate_producer_ids() == (2000, 1000)
            assert again.broker_epoch > broker_epoch  # re-registered as a new incarnation
            assert again.image.broker(1).incarnation_id != before.broker(1).incarnation_id  # type: ignore[union-attr]

    _run(main)
    props = read_meta_properties(tmp_path / "data")
    assert props is not None
    assert (props["cluster.id"], props["node.id"], props["version"]) == ("strom-test", "1", "1")


def test_generated_cluster_id_is_kept(tmp_path: Path) -> None:
    async def main() -> None:
        async with _open(_config(tmp_path), new_uuid=uuid_source()) as first:
            cluster_id = first.cluster_id
        async with _open(_config(tmp_path)) as second:
            assert second.cluster_id == cluster_id
        assert len(cluster_id) == 22

    _run(main)


def test_foreign_directory_refused(tmp_path: Path) -> None:
    async def main() -> None:
        async with _open(_config(tmp_path, cluster_id="one")):
            pass
        with pytest.raises(Exception, match="does not match"):
            await QuorumController.open(_config(tmp_path, cluster_id="two"))
        with pytest.raises(Exception, match=r"node\.id"):
            await QuorumController.open(_config(tmp_path, node_id="7"))

    _run(main)


def test_a_quorum_members_metadata_directory_is_refused(tmp_path: Path) -> None:
    """The Raft state of a quorum of other voters is never reused by a single node."""

    async def main() -> None:
        directory = tmp_path / "data" / LOG_DIR_NAME
        directory.mkdir(parents=True)
        (directory / "quorum-state").write_text(
            '{"clusterId":"","leaderId":2,"leaderEpoch":5,"votedId":-1,"appliedOffset":0,'
            '"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}'
        )
        with pytest.raises(Exception, match=r"Raft state of a quorum of voters \[1, 2, 3\]"):
            await QuorumController.open(_config(tmp_path))

    _run(main)


def test_a_single_node_is_its_own_active_controller(tmp_path: Path) -> None:
    async def main() -> None:
        async with _open(_config(tmp_path)) as driver:
            assert driver.is_active
            assert driver.active_controller_id == driver.node_id
            assert driver.controller_address(driver.node_id) is None  # no voters configured
        assert not driver.is_active

    _run(main)


def test_metadata_log_dir_setting(tmp_path: Path) -> None:
    async def main() -> None:
        async with _open(_config(tmp_path, metadata_log_dir=str(tmp_path / "meta"))):
            pass

    _run(main)
    assert (tmp_path / "meta" / LOG_DIR_NAME).is_dir()
    assert (tmp_path / "meta" / "meta.properties").exists()


def test_validate_only_and_failures_write_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        async with _open(_config(tmp_path)) as driver:
            offset = driver.image.provenance.offset
            response = await driver.create_topics(
                CreateTopicsRequest(topics=[topic("v")], validate_only=True), 7
            )
            assert response.topics[0].error_code == 0
            response = await driver.create_topics(CreateTopicsRequest(topics=[topic("bad!")]), 7)
            assert response.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
            assert driver.image.provenance.offset == offset
            assert driver.image.topic_names() == []

    _run(main)


def test_listeners_see_each_change(tmp_path: Path) -> None:
    seen: list[tuple[str, list[str]]] = []
    deltas: list[MetadataDelta] = []

    async def main() -> None:
        async with _open(_config(tmp_path)) as driver:

            def on_image(image: MetadataImage) -> None:
                seen.append(("sync", image.topic_names()))

            async def on_delta(image: MetadataImage, delta: MetadataDelta) -> None:
                await trio.lowlevel.checkpoint()
                deltas.append(delta)
                seen.append(("async", image.topic_names()))

            def broken(image: MetadataImage) -> None:
                raise RuntimeError("listener bug")

            driver.subscribe(broken)
            unsubscribe = driver.subscribe(on_image)
            driver.subscribe_deltas(on_delta)
            await driver.create_topics(CreateTopicsRequest(topics=[topic("x", 2)]), 7)
            await driver.delete_topics(DeleteTopicsRequest(topic_names=["x"]), 5)
            unsubscribe()
            await driver.create_topics(CreateTopicsRequest(topics=[topic("y")]), 7)

    _run(main)
    assert seen == [
        ("sync", ["x"]),
        ("async", ["x"]),
        ("sync", []),
        ("async", []),
        ("async", ["y"]),
    ]
    assert len(deltas[0].created_topics) == 1
    assert [t.name for t in deltas[1].deleted_topics.values()] == ["x"]


def test_concurrent_commands_are_serialized(tmp_path: Path) -> None:
    async def main() -> None:
        async with _open(_config(tmp_path)) as driver:
            results: dict[str, int] = {}

            async def create(name: str) -> None:
                response = await driver.create_topics(
                    CreateTopicsRequest(topics=[topic("same"), topic(name)]), 7
                )
                for entry in response.topics:
                    if entry.name == "same":
                        results[name] = entry.error_code

            async with trio.open_nursery() as nursery:
                for i in range(8):
                    nursery.start_soon(create, f"n{i}")
            assert sorted(results.values()) == [0] + [ErrorCode.TOPIC_ALREADY_EXISTS] * 7
            assert len(driver.image.topic_names()) == 9

    _run(main)


def test_snapshots_are_taken_and_used_on_restart(tmp_path: Path) -> None:
    config = _config(tmp_path, metadata_log_segment_bytes="2048")

    async def main() -> None:
        directory = tmp_path / "data" / LOG_DIR_NAME
        async with _open(config, snapshot_interval_bytes=4096) as driver:
            for i in range(40):
                await driver.create_topics(CreateTopicsRequest(topics=[topic(f"t{i}", 2)]), 7)
            await driver.snapshots_settled()
            snapshots = _snapshots(directory)
            assert snapshots
            assert len(snapshots) == 1  # older ones are deleted
            segments = sorted(directory.glob("*.log"))
            assert int(segments[0].name[:20]) > 0  # segments below the snapshot were deleted
            await driver.create_topics(CreateTopicsRequest(topics=[topic("last")]), 7)
            explicit = await driver.snapshot()
            assert explicit is not None
            assert _snapshots(directory) == [explicit]
            assert await driver.snapshot() is None  # nothing new since
            before = driver.image

        async with _open(config) as again:
            assert again.image.topics_by_name == before.topics_by_name
            assert again.image.next_producer_id == before.next_producer_id

    _run(main)


def test_a_snapshot_is_loaded_in_slices_while_the_loop_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restarted node loads its snapshot a slice at a time: other tasks run between the
    slices (with a million partitions the load takes seconds, which heartbeats and Raft must
    not wait for), and the node is not caught up, so not active, until it is loaded."""
    monkeypatch.setattr(quorum_controller, "LOAD_SLICE_BYTES", 1024)
    config = _config(tmp_path)

    async def main() -> None:
        async with _open(config) as driver:
            request = CreateTopicsRequest(topics=[topic(f"t{i}", 100) for i in range(6)])
            await driver.create_topics(request, 7)
            snapshot = await driver.snapshot()
            assert snapshot is not None
            before = driver.image
        size = (tmp_path / "data" / LOG_DIR_NAME / snapshot_name(snapshot)).stat().st_size
        assert size > 16 * 1024

        node = await QuorumController.open(config, clock=lambda: 1_700_000_000_000)
        seen: list[tuple[bool, int]] = []  # (active, topics in the image) while loading

        async def watch() -> None:
            while True:
                if node.raft.snapshot_loading is not None:
                    seen.append((node.is_active, len(node.image.topics_by_name)))
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            await nursery.start(node.run)
            await node.start()  # registered and unfenced: the image is loaded
            assert node.image.topics_by_name == before.topics_by_name
            nursery.cancel_scope.cancel()
        await node.close()
        assert len(seen) >= size // 1024 // 2  # the loop ran between the slices
        assert seen == [(False, 0)] * len(seen)  # nothing half loaded, not active meanwhile

    _run(main)


def test_a_large_create_topics_lets_the_loop_run_while_planned_and_proposed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The active controller plans, replays and encodes a large CreateTopics a slice at a
    time: another task (the Raft replica answering its followers, heartbeats arriving) runs
    between the slices, and the topic is created whole."""
    config = _config(tmp_path)

    async def main() -> None:
        async with _open(config) as driver:
            events: list[str] = []
            planning = driver._controller.create_topics_steps
            propose = driver.raft.propose

            def traced(*args: Any) -> Generator[None, None, Any]:
                inner = planning(*args)
                while True:
                    events.append("plan")
                    try:
                        next(inner)
                    except StopIteration as done:
                        return done.value
                    yield

            def proposing(payloads: list[bytes]) -> int | None:
                events.append("propose")
                return propose(payloads)

            monkeypatch.setattr(driver._controller, "create_topics_steps", traced)
            monkeypatch.setattr(driver.raft, "propose", proposing)

            async def watch() -> None:
                while True:
                    events.append("loop")
                    await trio.lowlevel.checkpoint()

            partitions = 6 * PLAN_SLICE
            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch)
                request = CreateTopicsRequest(topics=[topic("big", partitions)])
                created = await driver.create_topics(request, 7)
                nursery.cancel_scope.cancel()
            assert created.topics[0].error_code == 0
            created_topic = driver.image.topic("big")
            assert created_topic is not None
            assert created_topic.num_partitions == partitions
        plans = [i for i, e in enumerate(events) if e == "plan"]
        (proposed,) = [i for i, e in enumerate(events) if e == "propose"]
        assert len(plans) >= 2 * 6  # placed, then recorded, a slice at a time
        # each pass of the scheduler runs the watcher once: between the first and the last
        # step of the plan, and from the plan to the proposal (replay, encoding), it ran
        assert events[plans[0] : plans[-1]].count("loop") >= len(plans) - 2
        assert events[plans[-1] : proposed].count("loop") >= 2 * 6 - 2

    _run(main)


def test_start_reregisters_with_bound_endpoints(tmp_path: Path) -> None:
    async def main() -> None:
        async with _open(_config(tmp_path, listeners="PLAINTEXT://127.0.0.1:0")) as driver:
            first_epoch = driver.broker_epoch
            await driver.start([Listener("PLAINTEXT", "127.0.0.1", 40123)])
            assert driver.broker_epoch > first_epoch
            node = driver.image.broker(1)
            assert node is not None
            assert [e.port for e in node.endpoints] == [40123]
            offset = driver.image.provenance.offset
            await driver.start([Listener("PLAINTEXT", "127.0.0.1", 40123)])  # unchanged: no-op
            assert driver.image.provenance.offset == offset

    _run(main)


def test_closed_driver_refuses_commands(tmp_path: Path) -> None:
    async def main() -> None:
        async with _open(_config(tmp_path)) as driver:
            pass
        await driver.close()  # idempotent
        with pytest.raises(trio.ClosedResourceError):
            await driver.create_topics(CreateTopicsRequest(topics=[topic("z")]), 7)

    _run(main)


def test_producer_ids_need_registration(tmp_path: Path) -> None:
    async def main() -> None:
        async with _open(_config(tmp_path)) as driver:
            driver.local_broker.broker_epoch = 12345  # a stale epoch, as after a lost registration
            with pytest.raises(ControllerError) as info:
                await driver.allocate_producer_ids()
            assert info.value.error.code == ErrorCode.STALE_BROKER_EPOCH

    _run(main)


def test_cancelled_caller_does_not_tear_state(tmp_path: Path) -> None:
    async def main() -> None:
        async with _open(_config(tmp_path)) as driver:
            with trio.move_on_after(0):
                await driver.create_topics(CreateTopicsRequest(topics=[topic("c")]), 7)
            # whether or not the command ran, image and log agree after a restart; a later
            # command is applied after anything the cancelled one proposed
            await driver.allocate_producer_ids()
            image = driver.image
        async with _open(_config(tmp_path)) as again:
            assert again.image.topic_names() == image.topic_names()

    _run(main)


def test_records_that_would_not_apply_are_never_written(tmp_path: Path) -> None:
    async def main() -> None:
        async with _open(_config(tmp_path)) as driver:
            before = driver.image
            bad = ControllerResult(None, [RemoveTopicRecord(uuid.UUID(int=42))])
            with pytest.raises(MetadataError):
                await driver._run_command(lambda _offset: bad)
            assert driver.image is before
        async with _open(_config(tmp_path)) as again:  # the log still replays
            assert again.image.topic_names() == []

    _run(main)


def test_a_full_metadata_disk_answers_error_codes_and_recovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    config = _config(tmp_path)

    def disk_full(fd: int, data: object, position: int) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    async def main() -> None:
        async with _open(config) as driver:
            await driver.create_topics(CreateTopicsRequest(topics=[topic("before")]), 7)
            image = driver.image
            monkeypatch.setattr(os, "pwrite", disk_full)
            for _ in range(3):
                response = await driver.create_topics(
                    CreateTopicsRequest(topics=[topic("a"), topic("before")]), 7
                )
                assert [(t.name, t.error_code) for t in response.topics] == [
                    ("a", ErrorCode.UNKNOWN_SERVER_ERROR),
                    ("before", ErrorCode.TOPIC_ALREADY_EXISTS),
                ]
                assert "No space left on device" in (response.topics[0].error_message or "")
            with pytest.raises(ControllerError) as info:
                await driver.allocate_producer_ids()
            assert info.value.error.code == ErrorCode.KAFKA_STORAGE_ERROR
            assert driver.image is image  # nothing was applied
            assert caplog.text.count("metadata log could not be written: ") == 1  # rate-limited
            monkeypatch.undo()
            response = await driver.create_topics(CreateTopicsRequest(topics=[topic("a")]), 7)
            assert response.topics[0].error_code == ErrorCode.NONE
        async with _open(config) as again:
            assert again.image.topic_names() == ["a", "before"]

    _run(main)


def test_a_failed_snapshot_leaves_the_command_done_and_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _config(tmp_path)

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    async def main() -> None:
        directory = tmp_path / "data" / LOG_DIR_NAME
        async with _open(config, snapshot_interval_bytes=1) as driver:
            await driver.raft.writes_done()
            monkeypatch.setattr("strom.storage.raft.raft_log.atomic_replace", disk_full)
            response = await driver.create_topics(CreateTopicsRequest(topics=[topic("a")]), 7)
            assert response.topics[0].error_code == ErrorCode.NONE  # durable, so it stands
            await driver.snapshots_settled()
            missed = driver.image.provenance.offset + 1
            assert missed not in [s.end_offset for s in _snapshots(directory)]
            monkeypatch.undo()
            await driver.create_topics(CreateTopicsRequest(topics=[topic("b")]), 7)
            await driver.snapshots_settled()
            latest = max(s.end_offset for s in _snapshots(directory))
            assert latest == driver.image.provenance.offset + 1

    _run(main)


def test_first_start_takes_the_metadata_version_strom_format_chose(tmp_path: Path) -> None:
    directory = tmp_path / "data"
    directory.mkdir()
    (directory / BOOTSTRAP_FILE).write_bytes(encode_bootstrap({"metadata.version": 21}, 0))

    async def main() -> None:
        async with _open(_config(tmp_path)) as driver:
            assert driver.image.metadata_version == 21

    _run(main)


def test_local_broker_registers_then_is_unfenced(tmp_path: Path) -> None:
    async def main() -> None:
        async with _open(_config(tmp_path)) as driver:
            node = driver.image.broker(1)
            assert node is not None
            assert (node.fenced, node.epoch) == (False, driver.broker_epoch)
            assert node.incarnation_id == driver.local_broker.incarnation_id

    _run(main)


def test_a_registration_the_log_refuses_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from strom.wire.messages.broker_registration import BrokerRegistrationRequest

    def disk_full(fd: int, data: object, position: int) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    async def main() -> None:
        async with _open(_config(tmp_path)) as driver:
            request = BrokerRegistrationRequest(
                broker_id=2,
                cluster_id=driver.cluster_id,
                incarnation_id=uuid.UUID(int=2),
                features=[BrokerRegistrationRequest.Feature("metadata.version", 7, 25)],
            )
            monkeypatch.setattr(os, "pwrite", disk_full)
            response = await driver.broker_registration(request)
            assert response.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
            assert driver.image.broker(2) is None
            monkeypatch.undo()
            assert (await driver.broker_registration(request)).error_code == ErrorCode.NONE

    _run(main)


def test_a_heartbeat_planned_past_its_deadline_is_still_proposed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A heartbeat times out after half of broker.heartbeat.interval.ms; its plan (a controlled
    shutdown writes a record for each partition the broker leads: about 100,000 for a broker
    of a million-partition cluster, seconds of planning, replay and encoding) runs in steps
    with the loop running between them. Once planning began, the deadline must not cut it:
    else every heartbeat is cut before its proposal and the broker never shuts down (or is
    never unfenced), however often it asks."""
    config = _config(tmp_path, broker_heartbeat_interval_ms="100")  # times out after 50 ms

    async def main() -> None:
        async with _open(config) as driver:
            planning = driver._controller.broker_heartbeat_steps

            def slow(request: Any, **kwargs: Any) -> Generator[None, None, Any]:
                inner = planning(request, **kwargs)
                if request.want_shut_down:
                    for _ in range(4):  # a plan longer than the deadline
                        time.sleep(0.03)
                        yield
                return (yield from inner)

            created = await driver.create_topics(CreateTopicsRequest(topics=[topic("led")]), 7)
            assert created.topics[0].error_code == 0  # it leads a partition: controlled shutdown
            monkeypatch.setattr(driver._controller, "broker_heartbeat_steps", slow)
            request = BrokerHeartbeatRequest(
                broker_id=1,
                broker_epoch=driver.broker_epoch,
                current_metadata_offset=driver.image.provenance.offset,
                want_shut_down=True,
            )
            for _ in range(3):
                await driver.broker_heartbeat(request)
            node = driver.image.broker(1)
            assert node is not None
            assert node.in_controlled_shutdown

    _run(main)


def test_a_command_whose_leadership_is_lost_while_it_plans_is_not_controller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large command plans in steps with the loop running between them: meanwhile this node
    may lose its leadership and apply the next leader's records (here: the next leader
    creates the same topic). The plan, made against the old image, must end as
    NOT_CONTROLLER, not be replayed against the new image (a MetadataError escaping to the
    caller) nor read the replica index the new image carried on."""
    config = _config(tmp_path)

    async def main() -> None:
        async with _open(config) as driver:
            planning = driver._controller.create_topics_steps
            raft = driver.raft

            def deposed(*args: Any) -> Generator[None, None, Any]:
                result = yield from planning(*args)
                # what a leader change seen between two steps does: a newer epoch led by
                # another node, whose CreateTopics of the same name this node then applies
                monkeypatch.setattr(raft, "epoch", raft.epoch + 1)
                monkeypatch.setattr(raft, "leader_id", 2)
                other = CreateTopicsRequest(topics=[topic("big", 3)])
                records = driver._controller.create_topics(other, 7).records
                driver._controller.adopt(driver._controller.stage(records))
                yield
                return result

            monkeypatch.setattr(driver._controller, "create_topics_steps", deposed)
            request = CreateTopicsRequest(topics=[topic("big", 3 * PLAN_SLICE)])
            created = await driver.create_topics(request, 7)
            assert created.topics[0].error_code == ErrorCode.NOT_CONTROLLER
            monkeypatch.undo()  # the driver closes as it runs

    _run(main)
