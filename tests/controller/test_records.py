"""KRaft metadata record framing and metadata batches."""

from __future__ import annotations

import uuid

import pytest

from strom.coordinator.metadata.metadata_records import (
    RECORD_TYPE_IDS,
    MetadataError,
    decode_batch,
    decode_record,
    encode_batch,
    encode_record,
    record_type,
    write_version,
)
from strom.coordinator.metadata.raft_entries import decode_entry, encode_entries
from strom.wire.formats.metadata.partition_record import PartitionRecord
from strom.wire.formats.metadata.topic_record import TopicRecord
from strom.wire.formats.protocol.snapshot_header_record import SnapshotHeaderRecord
from strom.wire.records import NO_PRODUCER_ID, BatchHeader


def test_frame_layout_matches_kraft() -> None:
    record = TopicRecord("t", uuid.UUID(int=5))
    framed = encode_record(record)
    # frame version 1, apiKey 2 (TopicRecord), version 0, then the v0 body
    assert framed == b"\x01\x02\x00" + record.encode(0)
    assert decode_record(framed) == (record, 0)


def test_unknown_record_version_two_byte_varint() -> None:
    # version 200 is a two-byte unsigned varint; TopicRecord has no such version
    with pytest.raises(MetadataError, match="no version 200"):
        decode_record(b"\x01\x02" + bytes([0xC8, 0x01]))


@pytest.mark.parametrize("type_id", sorted(RECORD_TYPE_IDS))
def test_every_record_type_round_trips(type_id: int) -> None:
    cls = record_type(type_id)
    assert cls is not None
    assert type_id == cls.API_KEY
    record = cls()
    version = write_version(record)
    back, got = decode_record(encode_record(record))
    assert (back, got) == (record, version)
    for v in range(record.MIN_VERSION, record.MAX_VERSION + 1):
        assert decode_record(encode_record(record, v)) == (record, v)


def test_partition_record_written_at_v0() -> None:
    assert write_version(PartitionRecord()) == 0


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"\x00\x02\x00", "frame version 0"),
        (b"\x02\x02\x00", "frame version 2"),
        (b"\x01\x63\x00", "unknown metadata record type 99"),
        (encode_record(TopicRecord("t")) + b"\x00", "garbage"),
        (encode_record(TopicRecord("t"))[:-3], "malformed"),
        (b"\x01", "malformed"),
    ],
)
def test_bad_frames(data: bytes, fragment: str) -> None:
    with pytest.raises(MetadataError, match=fragment):
        decode_record(data)


def test_non_metadata_message_refused() -> None:
    with pytest.raises(TypeError):
        encode_record(SnapshotHeaderRecord())


def test_batch_round_trip() -> None:
    records = [TopicRecord("a", uuid.UUID(int=1)), TopicRecord("b", uuid.UUID(int=2))]
    data = encode_batch(records, base_offset=40, epoch=3, timestamp=1234)
    header = BatchHeader.parse(data)
    assert (header.base_offset, header.partition_leader_epoch, header.record_count) == (40, 3, 2)
    assert header.producer_id == NO_PRODUCER_ID
    assert not header.is_control
    batch = decode_batch(data)
    assert (batch.base_offset, batch.last_offset, batch.epoch, batch.timestamp) == (40, 41, 3, 1234)
    assert batch.records == records
    assert batch.size == len(data)
    assert not batch.control


def test_corrupt_batch() -> None:
    data = encode_batch([TopicRecord("a")], base_offset=0, epoch=1, timestamp=0)
    data[-1] ^= 0xFF
    with pytest.raises(MetadataError, match="corrupt"):
        decode_batch(data)


def test_empty_batch_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        encode_batch([], base_offset=0, epoch=1, timestamp=0)


def test_entries_encoded_a_slice_at_a_time_are_the_same_entries() -> None:
    records = [TopicRecord(f"t{i}", uuid.UUID(int=i + 1)) for i in range(7)]
    whole = encode_entries(records, 1234)
    sliced = encode_entries(records[:3], 1234, after=4) + encode_entries(records[3:], 1234)
    assert sliced == whole
    assert [decode_entry(e)[0] for e in whole] == [6, 5, 4, 3, 2, 1, 0]
