"""Checks a produce request's records must pass before any byte reaches the log.

Mirrors what Kafka's UnifiedLog and LogValidator enforce for magic-2 batches,
with Kafka's error codes: framing/CRC -> CORRUPT_MESSAGE, a batch over
max.message.bytes -> MESSAGE_TOO_LARGE, the whole append over segment.bytes ->
RECORD_LIST_TOO_LARGE, other magic / bad offsets or counts / control batches
from clients / missing keys on compacted topics -> INVALID_RECORD, CreateTime
outside message.timestamp.before/after.max.ms -> INVALID_TIMESTAMP.

Every record of every batch is walked first, as LogValidator iterates them
(`strom.wire.records.walk`): a record whose framing is wrong (overlong varint,
a length that overruns, offset deltas that are not 0, 1, 2..., a record count
other than the header's) is INVALID_RECORD without record_errors, as Kafka's
InvalidRecordException; a compressed payload that does not decompress is
CORRUPT_MESSAGE (Kafka answers UNKNOWN_SERVER_ERROR there, from its generic
"Failed to decompress record stream"); one that inflates past 64 MiB is
MESSAGE_TOO_LARGE, refused while streaming, never held. The walk builds no
records; they are only decoded when a check needs their values (compacted
topic, a finite before.max.ms, or an out-of-range max timestamp to pin down
which records failed).
"""

from __future__ import annotations

from enum import Enum

from strom.storage.log.log_config import LONG_MAX, LogConfig
from strom.storage.log_errors import LogAppendError
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_TIMESTAMP,
    PEEK_MAGIC_SIZE,
    BatchHeader,
    Record,
    TimestampType,
    check_records,
    decode_batch,
    peek_length,
    peek_magic,
    validate_batch,
)


class AppendOrigin(Enum):
    """Who is appending, which sets the checks (Kafka's AppendOrigin): clients get them all;
    coordinators may write control batches and have no sequence numbers checked; replication
    (a follower copying its leader, and recovery replaying the log) is checked by no producer
    rule, the leader having checked it."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


def validate_records(
    buf: bytearray, config: LogConfig, now_ms: int, origin: AppendOrigin
) -> list[tuple[int, BatchHeader]]:
    """(position, header) of every batch in `buf`; LogAppendError for the first failing check."""
    if not buf:
        raise LogAppendError(ErrorCode.INVALID_RECORD, "an append needs at least one record batch")
    batches = []
    pos = 0
    view = memoryview(buf)
    while pos < len(buf):
        batches.append((pos, _check_one(view, pos, config, now_ms, origin)))
        pos += batches[-1][1].size
    if len(buf) > config.segment_bytes:
        raise LogAppendError(
            ErrorCode.RECORD_LIST_TOO_LARGE,
            f"{len(buf)} bytes of records exceed segment.bytes {config.segment_bytes}",
        )
    return batches


def validate_replicated(buf: bytearray, log_end_offset: int) -> list[tuple[int, BatchHeader]]:
    """(position, header) of batches a follower copies from its leader, as they are.

    The leader validated the records when it appended them; a follower checks only what
    protects its own log (Kafka's follower append does the same): whole batches of magic 2
    with valid CRCs, and offsets that continue its log and increase (gaps are allowed: a
    compacted leader log has them). Records are not walked nor decompressed.
    """
    batches = []
    pos = 0
    view = memoryview(buf)
    next_offset = log_end_offset
    while pos < len(buf):
        remaining = len(buf) - pos
        if remaining < LOG_OVERHEAD:
            raise LogAppendError(ErrorCode.CORRUPT_MESSAGE, f"truncated batch at byte {pos}")
        size = peek_length(view, pos) + LOG_OVERHEAD
        if size < HEADER_SIZE or size > remaining:
            raise LogAppendError(ErrorCode.CORRUPT_MESSAGE, f"bad batch length at byte {pos}")
        try:
            header = validate_batch(view[pos : pos + size])
        except ProtocolError as exc:
            raise LogAppendError(exc.error, str(exc)) from exc
        if header.base_offset < next_offset or header.last_offset < header.base_offset:
            raise LogAppendError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"replicated batch at offset {header.base_offset} does not continue the log "
                f"at {next_offset}",
            )
        next_offset = header.next_offset
        batches.append((pos, header))
        pos += size
    return batches


def _check_one(
    view: memoryview, pos: int, config: LogConfig, now_ms: int, origin: AppendOrigin
) -> BatchHeader:
    remaining = len(view) - pos
    if remaining < LOG_OVERHEAD:
        raise LogAppendError(ErrorCode.CORRUPT_MESSAGE, f"truncated batch at byte {pos}")
    size = peek_length(view, pos) + LOG_OVERHEAD
    if remaining >= PEEK_MAGIC_SIZE and peek_magic(view, pos) != MAGIC:
        raise LogAppendError(
            ErrorCode.INVALID_RECORD,
            f"batch magic {peek_magic(view, pos)}: only magic 2 is accepted",
        )
    if size < HEADER_SIZE or size > remaining:
        raise LogAppendError(ErrorCode.CORRUPT_MESSAGE, f"bad batch length at byte {pos}")
    if size > config.max_message_bytes:
        raise LogAppendError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"batch of {size} bytes exceeds max.message.bytes {config.max_message_bytes}",
        )
    batch = view[pos : pos + size]
    try:
        header = validate_batch(batch)
    except ProtocolError as exc:
        raise LogAppendError(exc.error, str(exc)) from exc
    if origin is AppendOrigin.CLIENT:
        _check_client_header(header)
    try:
        check_records(batch, header)
    except ProtocolError as exc:
        raise LogAppendError(exc.error, str(exc)) from exc
    if header.is_control:
        return header
    _check_records(batch, header, config, now_ms)
    return header


def _check_client_header(header: BatchHeader) -> None:
    problem = None
    if header.base_offset != 0:
        problem = f"batch base offset must be 0, not {header.base_offset}"
    elif header.record_count <= 0:
        problem = f"batch record count {header.record_count} must be positive"
    elif header.record_count != header.offset_count:
        problem = "batch record count does not match its offset range"
    elif header.is_control:
        problem = "clients may not write control batches"
    elif header.has_producer_id and header.base_sequence < 0:
        problem = f"invalid sequence number {header.base_sequence}"
    elif header.is_transactional and not header.has_producer_id:
        problem = "transactional batch without a producer id"
    if problem is not None:
        raise LogAppendError(ErrorCode.INVALID_RECORD, problem)


def _check_records(batch: memoryview, header: BatchHeader, config: LogConfig, now_ms: int) -> None:
    create_time = not config.log_append_time
    low = now_ms - config.message_timestamp_before_max_ms
    high = now_ms + config.message_timestamp_after_max_ms
    if create_time and header.timestamp_type is TimestampType.LOG_APPEND_TIME:
        raise LogAppendError(
            ErrorCode.INVALID_TIMESTAMP,
            "producers must not set the LogAppendTime timestamp type",
            [(0, "invalid timestamp type LogAppendTime")],
        )
    too_new = create_time and header.max_timestamp != NO_TIMESTAMP and header.max_timestamp > high
    check_low = create_time and config.message_timestamp_before_max_ms != LONG_MAX
    if not (too_new or check_low or config.compact):
        return
    try:
        records = decode_batch(batch, check_crc=False)[1]
    except ProtocolError as exc:
        raise LogAppendError(exc.error, str(exc)) from exc
    _check_decoded(records, create_time, low, high, config.compact)


def _check_decoded(
    records: list[Record], create_time: bool, low: int, high: int, compact: bool
) -> None:
    timestamp_errors: list[tuple[int, str]] = []
    key_errors: list[tuple[int, str]] = []
    for i, record in enumerate(records):
        ts = record.timestamp
        if create_time and ts != NO_TIMESTAMP and not low <= ts <= high:
            timestamp_errors.append((i, f"timestamp {ts} is outside [{low}, {high}]"))
        if compact and record.key is None:
            key_errors.append((i, "compacted topic cannot accept a record without a key"))
    if timestamp_errors:
        raise LogAppendError(ErrorCode.INVALID_TIMESTAMP, timestamp_errors[0][1], timestamp_errors)
    if key_errors:
        raise LogAppendError(ErrorCode.INVALID_RECORD, key_errors[0][1], key_errors)
