"""Hypothesis round trips: records and whole batches, every codec, control and transactional."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strom.wire.records import (
    BatchHeader,
    Codec,
    ControlType,
    EndTxnMarker,
    Record,
    TimestampType,
    build_batch,
    build_control_batch,
    control_key,
    decode_batch,
    decode_records,
    encode_record,
    end_txn_marker_record,
    iter_batches,
    parse_control_key,
    parse_end_txn_marker,
    read_records,
)

from .records_strategies import SETTINGS, blobs, codecs, headers, record_lists, timestamps

int32s = st.integers(-(2**31), 2**31 - 1)


@SETTINGS
@given(
    key=blobs,
    value=blobs,
    hdrs=headers,
    offset_delta=st.integers(0, 2**31 - 1),
    timestamp_delta=st.integers(-(2**62), 2**62),
)
def test_single_record_round_trip(
    key: bytes | None,
    value: bytes | None,
    hdrs: tuple[tuple[str, bytes | None], ...],
    offset_delta: int,
    timestamp_delta: int,
) -> None:
    body = bytearray()
    encode_record(body, offset_delta, timestamp_delta, key, value, hdrs)
    batch = build_batch([Record(b"x", b"y")])
    header = BatchHeader.parse(batch)
    header.base_offset, header.base_timestamp = 100, 5
    (record,) = decode_records(header, bytes(body))
    assert record == Record(key, value, hdrs, 5 + timestamp_delta, 100 + offset_delta)


@SETTINGS
@given(
    records=record_lists(base_offset=1000),
    codec=codecs,
    producer=st.tuples(st.integers(-1, 2**62), st.integers(-1, 2**15 - 1), int32s),
    transactional=st.booleans(),
    leader_epoch=int32s,
)
def test_batch_round_trip(
    records: list[Record],
    codec: Codec,
    producer: tuple[int, int, int],
    transactional: bool,
    leader_epoch: int,
) -> None:
    producer_id, producer_epoch, base_sequence = producer
    batch = build_batch(
        records,
        base_offset=1000,
        codec=codec,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        transactional=transactional,
        partition_leader_epoch=leader_epoch,
    )
    header, decoded = decode_batch(batch)
    assert decoded == records
    assert header.codec is codec
    assert header.is_transactional is transactional
    assert not header.is_control
    assert header.record_count == len(records)
    assert header.last_offset == records[-1].offset
    assert header.base_timestamp == records[0].timestamp
    assert header.max_timestamp == max(r.timestamp for r in records)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == producer
    assert header.partition_leader_epoch == leader_epoch
    assert read_records(batch).records == records


@SETTINGS
@given(records=record_lists(), codec=codecs, append_time=st.integers(0, 2**50))
def test_log_append_time_batches_report_the_append_time(
    records: list[Record], codec: Codec, append_time: int
) -> None:
    batch = build_batch(
        records,
        codec=codec,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        max_timestamp=append_time,
    )
    header, decoded = decode_batch(batch)
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in decoded] == [append_time] * len(records)
    assert [r._replace(timestamp=0) for r in decoded] == [r._replace(timestamp=0) for r in records]


@SETTINGS
@given(batches=st.lists(st.tuples(record_lists(max_size=4), codecs), min_size=1, max_size=5))
def test_concatenated_batches_round_trip(batches: list[tuple[list[Record], Codec]]) -> None:
    buf = bytearray()
    expected: list[Record] = []
    base = 0
    for records, codec in batches:
        shifted = [r._replace(offset=r.offset + base) for r in records]
        buf += build_batch(shifted, base_offset=base, codec=codec)
        expected += shifted
        base = shifted[-1].offset + 1
    it = iter_batches(buf, allow_partial=False, check_crc=True)
    assert [decode_batch(view)[1] for _, view in it] == _regroup(expected, batches)
    assert it.consumed == len(buf)
    assert read_records(buf, allow_partial=False).records == expected


def _regroup(flat: list[Record], batches: list[tuple[list[Record], Codec]]) -> list[list[Record]]:
    out, pos = [], 0
    for records, _ in batches:
        out.append(flat[pos : pos + len(records)])
        pos += len(records)
    return out


@SETTINGS
@given(
    commit=st.booleans(),
    coordinator_epoch=int32s,
    producer_id=st.integers(0, 2**62),
    producer_epoch=st.integers(0, 2**15 - 1),
    timestamp=timestamps,
    base_offset=st.integers(0, 2**50),
)
def test_control_batch_round_trip(
    commit: bool,
    coordinator_epoch: int,
    producer_id: int,
    producer_epoch: int,
    timestamp: int,
    base_offset: int,
) -> None:
    kind = ControlType.COMMIT if commit else ControlType.ABORT
    marker = EndTxnMarker(kind, coordinator_epoch)
    batch = build_control_batch(
        marker,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        timestamp=timestamp,
        base_offset=base_offset,
    )
    header, (record,) = decode_batch(batch)
    assert header.is_control
    assert header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
        producer_id,
        producer_epoch,
        -1,
    )
    assert record.offset == base_offset
    assert record.timestamp == timestamp
    assert parse_control_key(record.key) == (0, kind)
    assert parse_end_txn_marker(record) == marker
    assert read_records(batch).records == []
    assert read_records(batch, include_control=True).records == [record]


def test_control_key_helpers() -> None:
    assert control_key(ControlType.LEADER_CHANGE) == b"\x00\x00\x00\x02"
    assert parse_control_key(b"\x00\x01\x00\x09") == (1, 9)
    record = end_txn_marker_record(EndTxnMarker(ControlType.ABORT, 5), 77)
    assert record == Record(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x05", (), 77, -1)
    # A newer marker version may append fields: they are ignored.
    newer = record._replace(value=b"\x00\x01\x00\x00\x00\x07\x00")
    assert parse_end_txn_marker(newer) == EndTxnMarker(ControlType.ABORT, 7, 1)


def test_builder_offsets_and_errors() -> None:
    records = [Record(b"a", None, (), 1), Record(b"b", None, (), 2, 10), Record(b"c", None, (), 3)]
    header, decoded = decode_batch(build_batch(records, base_offset=5))
    assert [r.offset for r in decoded] == [5, 10, 11]
    assert header.last_offset_delta == 6
    with pytest.raises(ValueError, match="at least one"):
        build_batch([])
    with pytest.raises(ValueError, match="out of order"):
        build_batch([Record(None, None, (), 0, 5), Record(None, None, (), 0, 5)])
    with pytest.raises(ValueError, match="LOG_APPEND_TIME"):
        build_batch([Record(None, None)], timestamp_type=TimestampType.LOG_APPEND_TIME)
    with pytest.raises(ValueError, match="out of range"):
        build_batch([Record(None, None)], producer_epoch=2**15)
    with pytest.raises(ValueError, match="COMMIT or ABORT"):
        end_txn_marker_record(EndTxnMarker(ControlType.LEADER_CHANGE, 0))
