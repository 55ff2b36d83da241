"""Snapshots: file naming and layout, round trips, and snapshot + tail == full replay."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from strom.coordinator.controller import Controller, ControllerResult
from strom.coordinator.metadata.image import MetadataImage, Provenance
from strom.coordinator.metadata.loader import load_metadata
from strom.coordinator.metadata.log import LOG_DIR_NAME, MetadataLog
from strom.coordinator.metadata.metadata_records import MetadataError
from strom.coordinator.metadata.snapshot import (
    SnapshotId,
    delete_snapshots_before,
    image_records,
    list_snapshots,
    read_snapshot,
    write_snapshot,
)
from strom.wire.formats.protocol.snapshot_footer_record import SnapshotFooterRecord
from strom.wire.formats.protocol.snapshot_header_record import SnapshotHeaderRecord
from strom.wire.messages.create_partitions import CreatePartitionsRequest
from strom.wire.messages.create_topics import CreateTopicsRequest
from strom.wire.messages.delete_topics import DeleteTopicsRequest
from strom.wire.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from strom.wire.records import ControlType, iter_batches, parse_control_key
from strom.wire.records import decode_batch as decode_wire_batch
from tests.controller.helpers import add_broker, make_controller, topic


class _Node:
    """The driver's loop, synchronously: plan, append durably, replay with provenance."""

    def __init__(self, directory: Path) -> None:
        self.log = MetadataLog.open(directory)
        self.controller = make_controller(brokers=3)
        self.clock = 1_000
        self.commit_records(list(image_records(self.controller.image)))

    def commit_records(self, records: list[object]) -> None:
        self.clock += 1
        batch = self.log.append(records, epoch=2, timestamp=self.clock)  # type: ignore[arg-type]
        self.controller.replay(
            batch.records, Provenance(batch.last_offset, batch.epoch, batch.timestamp)
        )

    def run(self, result: ControllerResult[object]) -> None:
        if result.records:
            self.commit_records(list(result.records))


def _random_command(rng: random.Random, controller: Controller) -> ControllerResult[object]:
    names = controller.image.topic_names()
    choice = rng.randrange(5)
    if choice == 0 or not names:
        name = f"topic-{rng.randrange(40)}"
        request = CreateTopicsRequest(topics=[topic(name, rng.randint(1, 4), rng.randint(1, 3))])
        return controller.create_topics(request, 7)  # type: ignore[return-value]
    name = rng.choice(names)
    if choice == 1:
        return controller.delete_topics(DeleteTopicsRequest(topic_names=[name]), 5)  # type: ignore[return-value]
    if choice == 2:
        current = controller.image.topic(name)
        assert current is not None
        grow = CreatePartitionsRequest.CreatePartitionsTopic(name, current.num_partitions + 1, None)
        return controller.create_partitions(CreatePartitionsRequest(topics=[grow]), 3)  # type: ignore[return-value]
    if choice == 3:
        config = IncrementalAlterConfigsRequest.AlterableConfig(
            "retention.ms", rng.choice([0, 1]), str(rng.randrange(1, 10**6))
        )
        resource = IncrementalAlterConfigsRequest.AlterConfigsResource(2, name, [config])
        return controller.incremental_alter_configs(
            IncrementalAlterConfigsRequest(resources=[resource]), 1
        )  # type: ignore[return-value]
    registration = controller.image.broker(1)
    assert registration is not None
    return controller.allocate_producer_ids(1, registration.epoch)  # type: ignore[return-value]


def test_snapshot_id_naming() -> None:
    snapshot_id = SnapshotId(1234, 7)
    assert snapshot_id.file_name == "00000000000000001234-0000000007.checkpoint"
    assert SnapshotId.parse(snapshot_id.file_name) == snapshot_id
    assert SnapshotId.parse("00000000000000001234-0000000007.checkpoint.part") is None
    assert SnapshotId.parse("1234-7.checkpoint") is None


def test_round_trip_and_file_layout(tmp_path: Path) -> None:
    controller = make_controller(brokers=2)
    add_broker(controller, 3, fenced=True)
    controller.replay(
        controller.create_topics(
            CreateTopicsRequest(topics=[topic("a", 3, 2, configs={"retention.ms": "9"})]), 7
        ).records
    )
    controller.replay(controller.allocate_producer_ids(1, 1).records)
    image = controller.image.apply_all([], Provenance(41, 3, 555))
    path = write_snapshot(tmp_path, image, SnapshotId(42, 3))
    assert path.name == "00000000000000000042-0000000003.checkpoint"
    assert read_snapshot(tmp_path, SnapshotId(42, 3)) == image

    batches = list(iter_batches(path.read_bytes(), allow_partial=False, check_crc=True))
    first, last = batches[0], batches[-1]
    assert first[0].is_control
    assert last[0].is_control
    assert first[0].base_offset == 0
    assert {h.partition_leader_epoch for h, _ in batches} == {3}
    (header_record,) = decode_wire_batch(first[1])[1]
    assert parse_control_key(header_record.key) == (0, ControlType.SNAPSHOT_HEADER)
    assert SnapshotHeaderRecord.decode(header_record.value or b"", 0) == SnapshotHeaderRecord(
        0, 555
    )
    (footer_record,) = decode_wire_batch(last[1])[1]
    assert parse_control_key(footer_record.key) == (0, ControlType.SNAPSHOT_FOOTER)
    assert SnapshotFooterRecord.decode(footer_record.value or b"", 0) == SnapshotFooterRecord(0)
    offsets = [h.base_offset for h, _ in batches]
    assert offsets == sorted(offsets)


def test_many_records_span_batches(tmp_path: Path) -> None:
    controller = make_controller()
    request = CreateTopicsRequest(topics=[topic(f"t{i}", 5) for i in range(400)])
    controller.replay(controller.create_topics(request, 7).records)
    image = controller.image.apply_all([], Provenance(9, 1, 1))
    path = write_snapshot(tmp_path, image, SnapshotId(10, 1))
    assert len(list(iter_batches(path.read_bytes()))) > 3
    assert read_snapshot(tmp_path, SnapshotId(10, 1)) == image


def test_part_files_and_older_snapshots_are_cleaned(tmp_path: Path) -> None:
    image = make_controller().image
    for offset in (5, 9, 12):
        write_snapshot(tmp_path, image, SnapshotId(offset, 1))
    (tmp_path / "00000000000000000099-0000000001.checkpoint.part").write_bytes(b"half")
    assert list_snapshots(tmp_path) == [SnapshotId(5, 1), SnapshotId(9, 1), SnapshotId(12, 1)]
    assert not list(tmp_path.glob("*.part"))
    delete_snapshots_before(tmp_path, SnapshotId(12, 1))
    assert list_snapshots(tmp_path) == [SnapshotId(12, 1)]


@pytest.mark.parametrize("damage", ["truncate", "flip", "no-footer"])
def test_damaged_snapshot_is_reported(tmp_path: Path, damage: str) -> None:
    image = make_controller().image
    path = write_snapshot(tmp_path, image, SnapshotId(3, 1))
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[:-5]
    elif damage == "flip":
        data[80] ^= 0xFF
    else:
        footer_size = list(iter_batches(bytes(data)))[-1][0].size
        data = data[: len(data) - footer_size]
    path.write_bytes(bytes(data))
    with pytest.raises(MetadataError):
        read_snapshot(tmp_path, SnapshotId(3, 1))


@pytest.mark.parametrize("seed", range(6))
def test_snapshot_plus_tail_equals_full_replay(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    node = _Node(tmp_path)
    steps = 60
    snapshot_at = rng.randrange(5, steps - 5)
    for step in range(steps):
        node.run(_random_command(rng, node.controller))
        if step == snapshot_at:
            image = node.controller.image
            write_snapshot(
                node.log.directory,
                image,
                SnapshotId(image.provenance.offset + 1, image.provenance.epoch),
            )
    expected = node.controller.image
    node.log.close()

    full = MetadataImage.EMPTY
    log = MetadataLog.open(tmp_path)
    for batch in log.read():
        full = full.apply_all(
            batch.records, Provenance(batch.last_offset, batch.epoch, batch.timestamp)
        )
    log.close()
    loaded_log, from_snapshot = load_metadata(tmp_path)
    loaded_log.close()
    assert full == expected
    assert from_snapshot == expected
    assert list_snapshots(tmp_path / LOG_DIR_NAME)


def test_loader_restarts_log_at_snapshot_when_log_is_behind(tmp_path: Path) -> None:
    node = _Node(tmp_path)
    image = node.controller.image
    write_snapshot(
        node.log.directory,
        image,
        SnapshotId(image.provenance.offset + 1 + 10, image.provenance.epoch),
    )
    node.log.close()
    log, loaded = load_metadata(tmp_path)
    assert log.end_offset == image.provenance.offset + 11
    assert loaded.topic_names() == image.topic_names()
    log.close()


def test_loader_refuses_a_gap(tmp_path: Path) -> None:
    log = MetadataLog.open(tmp_path)
    log.reset(100)
    log.close()
    with pytest.raises(MetadataError, match="missing"):
        load_metadata(tmp_path)
