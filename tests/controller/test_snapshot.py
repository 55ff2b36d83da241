"""Snapshots of the metadata image: KRaft's checkpoint format (bootstrap.checkpoint, and the
snapshots older single nodes wrote), the Raft snapshot data, file naming, and the image an old
single-node log holds (snapshot + tail == full replay)."""

from __future__ import annotations

import random
import struct
import uuid
from typing import Any

import pytest

from strom.coordinator.controller import Controller, ControllerResult
from strom.coordinator.metadata.delta import MetadataDelta
from strom.coordinator.metadata.image import MetadataImage, Provenance
from strom.coordinator.metadata.kraft_checkpoint import (
    decode_checkpoint,
    encode_checkpoint,
    image_records,
)
from strom.coordinator.metadata.metadata_records import (
    MetadataError,
    decode_record,
    encode_batch,
    encode_record,
)
from strom.coordinator.metadata.raft_entries import (
    EntryReplay,
    SnapshotLoader,
    decode_entry,
    decode_snapshot,
    encode_entries,
    encode_snapshot,
)
from strom.coordinator.metadata.single_node_log import image_of
from strom.storage.raft.raft_log import parse_snapshot_name, snapshot_name
from strom.storage.raft.raft_store import SnapshotId
from strom.wire.formats.metadata.config_record import ConfigRecord
from strom.wire.formats.metadata.feature_level_record import FeatureLevelRecord
from strom.wire.formats.metadata.partition_record import PartitionRecord
from strom.wire.formats.metadata.topic_record import TopicRecord
from strom.wire.formats.protocol.snapshot_footer_record import SnapshotFooterRecord
from strom.wire.formats.protocol.snapshot_header_record import SnapshotHeaderRecord
from strom.wire.message import Message
from strom.wire.messages.create_partitions import CreatePartitionsRequest
from strom.wire.messages.create_topics import CreateTopicsRequest
from strom.wire.messages.delete_topics import DeleteTopicsRequest
from strom.wire.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from strom.wire.primitives import read_uvarint, uvarint
from strom.wire.records import ControlType, iter_batches, parse_control_key
from strom.wire.records import decode_batch as decode_wire_batch
from tests.controller.helpers import add_broker, make_controller, topic


class _SingleNodeLog:
    """What an older Strom's single node wrote, kept as its minimal writer: one batch per
    command (records framed as in the metadata log, the start's epoch, the append time), and
    snapshots in KRaft's checkpoint format."""

    def __init__(self) -> None:
        self.controller = make_controller(brokers=3)
        self.batches: list[bytes] = []
        self.end = 0
        self.clock = 1_000
        self.commit_records(list(image_records(self.controller.image)))

    def commit_records(self, records: list[Message]) -> None:
        self.clock += 1
        self.batches.append(
            bytes(encode_batch(records, base_offset=self.end, epoch=2, timestamp=self.clock))
        )
        self.end += len(records)
        self.controller.replay(records, Provenance(self.end - 1, 2, self.clock))

    def run(self, result: ControllerResult[Any]) -> None:
        if result.records:
            self.commit_records(list(result.records))

    def snapshot(self) -> tuple[SnapshotId, bytes]:
        image = self.controller.image
        p = image.provenance
        return SnapshotId(p.offset + 1, p.epoch), encode_checkpoint(
            image_records(image), p.epoch, p.timestamp
        )


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


def test_snapshot_file_naming() -> None:
    snapshot_id = SnapshotId(1234, 7)
    assert snapshot_name(snapshot_id) == "00000000000000001234-0000000007.checkpoint"
    assert parse_snapshot_name(snapshot_name(snapshot_id)) == snapshot_id
    assert parse_snapshot_name("00000000000000001234-0000000007.checkpoint.part") is None
    assert parse_snapshot_name("1234-7.checkpoint") is None


def _image() -> MetadataImage:
    controller = make_controller(brokers=2)
    add_broker(controller, 3, fenced=True)
    controller.replay(
        controller.create_topics(
            CreateTopicsRequest(topics=[topic("a", 3, 2, configs={"retention.ms": "9"})]), 7
        ).records
    )
    controller.replay(controller.allocate_producer_ids(1, 1).records)
    return controller.image.apply_all([], Provenance(41, 3, 555))


def test_checkpoint_round_trip_and_layout() -> None:
    image = _image()
    data = encode_checkpoint(image_records(image), 3, 555)
    records, timestamp = decode_checkpoint(data, "x.checkpoint")
    assert timestamp == 555
    assert MetadataImage.EMPTY.apply_all(records, image.provenance) == image

    batches = list(iter_batches(data, allow_partial=False, check_crc=True))
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


def test_many_records_span_batches() -> None:
    controller = make_controller()
    request = CreateTopicsRequest(topics=[topic(f"t{i}", 5) for i in range(400)])
    controller.replay(controller.create_topics(request, 7).records)
    image = controller.image.apply_all([], Provenance(9, 1, 1))
    data = encode_checkpoint(image_records(image), 1, 1)
    assert len(list(iter_batches(data))) > 3
    records, _ = decode_checkpoint(data, "x")
    assert MetadataImage.EMPTY.apply_all(records, image.provenance) == image


@pytest.mark.parametrize("damage", ["truncate", "flip", "no-footer"])
def test_damaged_checkpoint_is_reported(damage: str) -> None:
    data = bytearray(encode_checkpoint(image_records(make_controller().image), 1, 0))
    if damage == "truncate":
        data = data[:-5]
    elif damage == "flip":
        data[80] ^= 0xFF
    else:
        footer_size = list(iter_batches(bytes(data)))[-1][0].size
        data = data[: len(data) - footer_size]
    with pytest.raises(MetadataError, match="snapshot x"):
        decode_checkpoint(bytes(data), "x")


def test_raft_snapshot_data_round_trip() -> None:
    image = _image()
    decoded, delta = decode_snapshot(encode_snapshot(image))
    assert decoded == image
    assert set(delta.created_topics) == {t.topic_id for t in image.topics_by_name.values()}


@pytest.mark.parametrize("seed", range(6))
def test_an_old_single_node_log_snapshot_plus_tail_equals_full_replay(seed: int) -> None:
    rng = random.Random(seed)
    node = _SingleNodeLog()
    steps = 60
    snapshot_at = rng.randrange(5, steps - 5)
    snapshot = None
    for step in range(steps):
        node.run(_random_command(rng, node.controller))
        if step == snapshot_at:
            snapshot = node.snapshot()
    expected = node.controller.image
    assert snapshot is not None
    assert image_of(None, node.batches) == expected
    assert image_of(snapshot, node.batches) == expected
    tail = [
        b for b in node.batches if decode_wire_batch(b)[0].base_offset >= snapshot[0].end_offset
    ]
    assert image_of(snapshot, tail) == expected  # segments below the snapshot were deleted


def test_an_old_log_behind_its_snapshot_is_ignored() -> None:
    node = _SingleNodeLog()
    snapshot_id, data = node.snapshot()
    ahead = SnapshotId(snapshot_id.end_offset + 10, snapshot_id.epoch)
    image = image_of((ahead, data), node.batches)
    assert image.topic_names() == node.controller.image.topic_names()
    assert image.provenance.offset == ahead.end_offset - 1


def test_an_old_log_with_a_gap_is_refused() -> None:
    node = _SingleNodeLog()
    node.run(node.controller.create_topics(CreateTopicsRequest(topics=[topic("x")]), 7))
    with pytest.raises(MetadataError, match="missing"):
        image_of(None, node.batches[1:])


def _generic_decode(data: bytes) -> tuple[MetadataImage, MetadataDelta]:
    """Snapshot data decoded record by record through the generated codec (what
    `decode_snapshot` did before its fast path for partitions)."""
    offset, epoch, timestamp = struct.unpack_from(">qiq", data, 4)
    delta = MetadataImage.EMPTY.delta()
    pos, view = 24, memoryview(data)
    while pos < len(view):
        length, pos = read_uvarint(view, pos)
        delta.replay(decode_record(view[pos : pos + length])[0])
        pos += length
    return delta.apply(Provenance(offset, epoch, timestamp)), delta


def _ids(rng: random.Random, most: int) -> list[int]:
    return [rng.randrange(-1, 1000) for _ in range(rng.randint(0, most))]


def _random_partitions_image(rng: random.Random) -> MetadataImage:
    """Topics whose partitions take every shape a PartitionRecord can: empty and long (over
    126 entries: a two-byte length) arrays, removing and adding replicas, a recovering leader
    (a tagged field), eligible leader replicas (version 2)."""
    records: list[Message] = [FeatureLevelRecord("metadata.version", 21)]
    for t in range(rng.randint(1, 5)):
        topic_id = uuid.UUID(int=rng.getrandbits(128))
        records.append(TopicRecord(f"t{t}", topic_id))
        for index in range(rng.randint(0, 40)):
            long = rng.random() < 0.05
            replicas = _ids(rng, 300 if long else 4)
            elr = _ids(rng, 3) if rng.random() < 0.2 else None
            records.append(
                PartitionRecord(
                    partition_id=index, topic_id=topic_id, replicas=replicas,
                    isr=replicas[: rng.randint(0, len(replicas))],
                    removing_replicas=_ids(rng, 2) if rng.random() < 0.2 else [],
                    adding_replicas=_ids(rng, 2) if rng.random() < 0.2 else [],
                    leader=rng.randrange(-1, 5), leader_epoch=rng.randrange(1 << 31),
                    partition_epoch=rng.randrange(-1, 1 << 31),
                    leader_recovery_state=int(rng.random() < 0.1),
                    eligible_leader_replicas=elr, last_known_elr=_ids(rng, 1) if elr else None,
                )
            )  # fmt: skip
        if rng.random() < 0.5:
            records.append(ConfigRecord(2, f"t{t}", "retention.ms", "7"))
    return MetadataImage.EMPTY.apply_all(records, Provenance(99, 4, 1234))


@pytest.mark.parametrize("seed", range(20))
def test_a_loaded_snapshot_is_what_record_by_record_replay_gives(seed: int) -> None:
    """The fast path for common PartitionRecords builds the same image and delta as the
    generated codec, whatever the partitions hold."""
    image = _random_partitions_image(random.Random(seed))
    data = encode_snapshot(image)
    decoded, delta = decode_snapshot(data)
    generic, generic_delta = _generic_decode(data)
    assert decoded == generic == image
    assert decoded.provenance == image.provenance
    assert delta.changed_partitions == generic_delta.changed_partitions
    assert delta.created_topics == generic_delta.created_topics
    assert all(  # one topic id object per topic, not one per partition
        t.topic_id is decoded.topics_by_name[t.name].topic_id
        for t in decoded.topics_by_id.values()
    )


def test_a_partition_of_an_unknown_topic_is_refused_on_the_fast_path() -> None:
    image = _random_partitions_image(random.Random(3))
    orphan = PartitionRecord(partition_id=0, topic_id=uuid.UUID(int=1), replicas=[1], isr=[1])
    framed = encode_record(orphan)
    data = encode_snapshot(image) + uvarint(len(framed)) + framed
    with pytest.raises(MetadataError, match="unknown topic id"):
        decode_snapshot(data)


@pytest.mark.parametrize("cut", [1, 5, 30])
def test_a_truncated_snapshot_is_refused(cut: int) -> None:
    data = encode_snapshot(_random_partitions_image(random.Random(1)))
    with pytest.raises(MetadataError):
        decode_snapshot(data[:-cut])


def test_a_damaged_partition_record_fails_as_the_generated_codec_does() -> None:
    """A PartitionRecord whose array count overruns it is not read on the fast path: the
    generated codec refuses it with its own message."""
    topic_id = uuid.UUID(int=9)
    records: list[Message] = [
        TopicRecord("a", topic_id),
        PartitionRecord(partition_id=0, topic_id=topic_id, replicas=[1, 2], isr=[1, 2]),
    ]
    image = MetadataImage.EMPTY.apply_all(records, Provenance(5, 1, 1))
    data = bytearray(encode_snapshot(image))
    framed = encode_record(records[1])
    at = bytes(data).index(framed)
    data[at + 3 + 20] = 0x7F  # the replicas array now claims 126 entries
    with pytest.raises(MetadataError) as fast:
        decode_snapshot(bytes(data))
    with pytest.raises(MetadataError) as generic:
        decode_record(bytes(data[at : at + len(framed)]))
    assert str(fast.value) == str(generic.value)


@pytest.mark.parametrize("slice_bytes", [1, 100, 4096])
def test_a_snapshot_loaded_in_slices_is_the_same_image(slice_bytes: int) -> None:
    image = _random_partitions_image(random.Random(slice_bytes))
    data = encode_snapshot(image)
    loader = SnapshotLoader(data)
    positions = [loader.position]
    while loader.step(slice_bytes):
        positions.append(loader.position)
    assert len(positions) > len(data) // max(slice_bytes, 200)  # it did stop between slices
    assert positions == sorted(positions)
    loaded, delta = loader.result()
    assert loaded == image
    assert delta.changed_partitions == decode_snapshot(data)[1].changed_partitions


@pytest.mark.parametrize("seed", range(10))
def test_entries_replayed_are_what_decoding_them_gives(seed: int) -> None:
    """`EntryReplay` (common PartitionRecords straight from their bytes) builds the delta
    that decoding each entry with the generated codec and replaying its record builds."""
    records = list(image_records(_random_partitions_image(random.Random(seed))))
    entries = encode_entries(records, 4321)
    fast, generic = MetadataImage.EMPTY.delta(), MetadataImage.EMPTY.delta()
    replay = EntryReplay()
    for entry in entries:
        remaining, timestamp, record = decode_entry(entry)
        generic.replay(record)
        assert replay.replay(fast, entry) == (remaining, timestamp)
    assert fast.apply() == generic.apply()
    assert fast.changed_partitions == generic.changed_partitions


def test_a_malformed_partition_entry_is_refused_as_decoding_refuses_it() -> None:
    topic_id = uuid.UUID(int=5)
    delta = MetadataImage.EMPTY.apply(TopicRecord("a", topic_id)).delta()
    (entry,) = encode_entries(
        [PartitionRecord(partition_id=0, topic_id=topic_id, replicas=[1], isr=[1])], 1
    )
    with pytest.raises(MetadataError, match="garbage") as fast:
        EntryReplay().replay(delta, entry + b"\x00")
    with pytest.raises(MetadataError) as generic:
        decode_entry(entry + b"\x00")
    assert str(fast.value) == str(generic.value)


@pytest.mark.parametrize("seed", range(10))
def test_snapshot_data_is_the_generated_codecs_bytes(seed: int) -> None:
    """Common PartitionRecords are packed in one step when a snapshot is encoded: the bytes
    are those the generated codec writes, record for record."""
    image = _random_partitions_image(random.Random(seed))
    header = encode_snapshot(MetadataImage.EMPTY.apply_all([], image.provenance))
    framed = [encode_record(r) for r in image_records(image)]
    assert encode_snapshot(image) == header + b"".join(uvarint(len(f)) + f for f in framed)


@pytest.mark.parametrize("length", [0, 1, 125, 126, 127, 128])
def test_arrays_at_the_one_byte_length_boundary(length: int) -> None:
    """126 entries are the most a one-byte compact length (entries + 1) counts: the fast
    paths take up to that and leave longer arrays to the generated codec, with the same
    bytes and the same image either way."""
    topic_id = uuid.UUID(int=77)
    records: list[Message] = [
        TopicRecord("a", topic_id),
        PartitionRecord(partition_id=0, topic_id=topic_id, replicas=list(range(length)),
                        isr=list(range(length)), leader=0, leader_epoch=1, partition_epoch=2),
    ]  # fmt: skip
    image = MetadataImage.EMPTY.apply_all(records, Provenance(3, 1, 1))
    data = encode_snapshot(image)
    assert data.endswith(encode_record(records[1]))
    assert decode_snapshot(data)[0] == image
    entries = encode_entries(records, 5)
    assert entries[1].endswith(encode_record(records[1]))
    delta = MetadataImage.EMPTY.delta()
    for entry in entries:
        EntryReplay().replay(delta, entry)
    assert delta.apply(Provenance(3, 1, 1)) == image
