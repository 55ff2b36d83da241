"""Cross-checks against kafka-python's record code: each side decodes what the other built."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given

from strom.wire.records import (
    BatchHeader,
    Codec,
    ControlType,
    EndTxnMarker,
    Record,
    build_batch,
    build_control_batch,
    decode_batch,
    iter_batches,
    read_records,
)

from .records_kafka_python import (
    DefaultRecordBatch,
    DefaultRecordBatchBuilder,
    MemoryRecords,
    MemoryRecordsBuilder,
)
from .records_strategies import SETTINGS, codecs, record_lists

ALL_CODECS = list(Codec)


def _sample_records(n: int = 30) -> list[Record]:
    return [
        Record(
            None if i % 7 == 0 else b"key-%d" % i,
            None if i % 5 == 0 else b"value %d " % i * (i + 1),
            (("trace", b"t%d" % i), ("empty", None)) if i % 3 == 0 else (),
            1_700_000_000_000 + i * 13,
            i,
        )
        for i in range(n)
    ]


def _as_tuples(records: Any) -> list[tuple[Any, ...]]:
    return [
        (r.offset, r.timestamp, r.key, r.value, tuple((k, v) for k, v in r.headers))
        for r in records
    ]


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_kafka_python_default_builder_decodes_in_strom(codec: Codec) -> None:
    records = _sample_records()
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for r in records:
        builder.append(
            r.offset, timestamp=r.timestamp, key=r.key, value=r.value, headers=list(r.headers)
        )
    batch = bytes(builder.build())
    header, decoded = decode_batch(batch)
    assert header.codec is codec
    assert _as_tuples(decoded) == _as_tuples(records)
    assert header.max_timestamp == records[-1].timestamp


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_kafka_python_memory_records_decode_in_strom(codec: Codec) -> None:
    records = _sample_records(200)
    out = bytearray()
    next_offset = 0
    for chunk in (records[:90], records[90:]):
        builder = MemoryRecordsBuilder(
            magic=2, compression_type=int(codec), batch_size=1 << 20, offset=next_offset
        )
        builder.set_producer_state(
            producer_id=99, producer_epoch=4, base_sequence=next_offset, is_transactional=True
        )
        for r in chunk:
            builder.append(timestamp=r.timestamp, key=r.key, value=r.value, headers=list(r.headers))
        builder.close()
        out += builder.buffer()
        next_offset = builder.next_offset()
    it = iter_batches(out, allow_partial=False, check_crc=True)
    headers = [h for h, _ in it]
    # kafka-python writes baseOffset 0 and the offsets as deltas; the broker rebases them.
    assert [h.next_offset for h in headers] == [90, 200]
    assert all(
        h.is_transactional and h.producer_id == 99 and h.producer_epoch == 4 for h in headers
    )
    assert [h.base_sequence for h in headers] == [0, 90]
    assert _as_tuples(read_records(out).records) == _as_tuples(records)


@SETTINGS
@given(records=record_lists(base_offset=50), codec=codecs)
def test_strom_batches_decode_in_kafka_python(records: list[Record], codec: Codec) -> None:
    batch = bytes(
        build_batch(
            records, base_offset=50, codec=codec, producer_id=1, producer_epoch=2, base_sequence=3
        )
    )
    theirs = DefaultRecordBatch(batch)
    assert theirs.validate_crc()
    assert theirs.compression_type == int(codec)
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (1, 2, 3)
    assert theirs.next_offset == records[-1].offset + 1
    assert _as_tuples(list(theirs)) == _as_tuples(records)


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_strom_record_set_reads_in_memory_records(codec: Codec) -> None:
    records = _sample_records(40)
    buf = bytes(
        build_batch(records[:25], codec=codec)
        + build_batch(records[25:], base_offset=25, codec=codec)
    )
    memory = MemoryRecords(buf)
    seen = []
    while memory.has_next():
        seen.extend(memory.next_batch())
    assert _as_tuples(seen) == _as_tuples(records)
    assert memory.valid_bytes() == len(buf)


def test_strom_control_batch_reads_in_kafka_python() -> None:
    batch = bytes(
        build_control_batch(
            EndTxnMarker(ControlType.COMMIT, 12),
            producer_id=5,
            producer_epoch=1,
            timestamp=77,
            base_offset=9,
        )
    )
    theirs = DefaultRecordBatch(batch)
    assert theirs.validate_crc()
    assert theirs.is_control_batch
    assert theirs.is_transactional
    (record,) = list(theirs)
    assert record.commit
    assert record.offset == 9
    assert BatchHeader.parse(batch).is_control
