"""Records inside a v2 batch (varint codec) and control records (transaction markers).

Record layout (zigzag varints throughout; lengths of -1 mean null)::

    length          varint   bytes of the rest of this record
    attributes      int8     unused, written as 0
    timestampDelta  varlong  from the batch's baseTimestamp
    offsetDelta     varint   from the batch's baseOffset
    keyLength       varint   then key bytes
    valueLength     varint   then value bytes
    headerCount     varint   then per header: keyLength varint, key (UTF-8,
                             never null), valueLength varint, value (may be null)

A control batch holds one control record whose key is `version int16, type
int16`; commit/abort markers carry the value `version int16, coordinatorEpoch
int32`.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from strom.wire.errors import ProtocolError, truncated
from strom.wire.primitives import Buffer, read_varint, read_varlong, varint, varlong
from strom.wire.records.batch import NO_TIMESTAMP, TIMESTAMP_TYPE_MASK, BatchHeader

Header = tuple[str, bytes | None]
"""A record header: UTF-8 key and nullable value."""


class Record(NamedTuple):
    """One record; offsets and timestamps are absolute.

    For encoding, `offset=-1` means "one past the previous record" and the
    timestamp is used as given (-1 for none, as Kafka).
    """

    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    timestamp: int = NO_TIMESTAMP
    offset: int = -1


# --- encoding -----------------------------------------------------------------------------

_NULL = b"\x01"  # zigzag varint of -1


def encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: Buffer | None,
    value: Buffer | None,
    headers: tuple[Header, ...] | list[Header] = (),
) -> None:
    """Append one record to `out`; ValueError for out-of-range deltas or lengths."""
    body = bytearray(b"\x00")  # attributes
    body += varlong(timestamp_delta)
    body += varint(offset_delta)
    _put_bytes(body, key)
    _put_bytes(body, value)
    body += varint(len(headers))
    for header_key, header_value in headers:
        raw_key = header_key.encode("utf-8", "surrogateescape")
        body += varint(len(raw_key))
        body += raw_key
        _put_bytes(body, header_value)
    out += varint(len(body))
    out += body


def _put_bytes(out: bytearray, data: Buffer | None) -> None:
    if data is None:
        out += _NULL
    else:
        out += varint(len(data))
        out += data


# --- decoding -----------------------------------------------------------------------------


def _read_varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """Zigzag varint of at most 5 bytes, within `end`; the one-byte case inline."""
    if pos < end:
        byte = data[pos]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), pos + 1
    return read_varint(data, pos, end)


def _read_varlong(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """Zigzag varlong of at most 10 bytes, within `end`."""
    return read_varlong(data, pos, end)


def _read_bytes(data: bytes, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    length, pos = _read_varint(data, pos, end)
    if length < 0:
        if length != -1:
            raise ProtocolError(f"negative {what} length {length}")
        return None, pos
    if length > end - pos:
        raise truncated(what)
    return data[pos : pos + length], pos + length


def decode_records(header: BatchHeader, payload: Buffer) -> list[Record]:
    """Decode exactly `header.record_count` records filling all of `payload`.

    `payload` is the (decompressed) bytes after the 61-byte header. With
    LogAppendTime every record reports the batch's maxTimestamp, as in Kafka.
    """
    data = payload if isinstance(payload, bytes) else bytes(payload)
    count = header.record_count
    if count < 0:
        raise ProtocolError(f"negative record count {count}")
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    append_time = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_MASK else None
    end = len(data)
    pos = 0
    records: list[Record] = []
    for _ in range(count):
        length, pos = _read_varint(data, pos, end)
        if length < 0 or length > end - pos:
            raise ProtocolError(f"record length {length} is negative or past the batch end")
        record_end = pos + length
        if pos >= record_end:
            raise truncated("record attributes")
        pos += 1  # attributes: unused
        timestamp_delta, pos = _read_varlong(data, pos, record_end)
        offset_delta, pos = _read_varint(data, pos, record_end)
        key, pos = _read_bytes(data, pos, record_end, "record key")
        value, pos = _read_bytes(data, pos, record_end, "record value")
        header_count, pos = _read_varint(data, pos, record_end)
        headers: tuple[Header, ...] = ()
        if header_count:
            if header_count < 0:
                raise ProtocolError(f"negative header count {header_count}")
            header_list: list[Header] = []
            for _ in range(header_count):
                raw_key, pos = _read_bytes(data, pos, record_end, "header key")
                if raw_key is None:
                    raise ProtocolError("null header key")
                header_value, pos = _read_bytes(data, pos, record_end, "header value")
                header_list.append((raw_key.decode("utf-8", "surrogateescape"), header_value))
            headers = tuple(header_list)
        if pos != record_end:
            raise ProtocolError(f"record has {record_end - pos} bytes past its fields")
        timestamp = base_timestamp + timestamp_delta if append_time is None else append_time
        records.append(Record(key, value, headers, timestamp, base_offset + offset_delta))
    if pos != end:
        raise ProtocolError(f"{end - pos} bytes remain after {count} records")
    return records


# --- control records ----------------------------------------------------------------------


class ControlType(IntEnum):
    """Control record types (key field `type`); Kafka also defines KRaft ones."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")


def control_key(control_type: int, version: int = 0) -> bytes:
    """The key of a control record: version int16, type int16."""
    return _CONTROL_KEY.pack(version, control_type)


def parse_control_key(key: Buffer | None) -> tuple[int, int]:
    """`(version, type)` of a control record key; the type may be one we don't know."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise ProtocolError("control record key is null or shorter than 4 bytes")
    version, control_type = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise ProtocolError(f"negative control record version {version}")
    return version, control_type


class EndTxnMarker(NamedTuple):
    """A transaction commit/abort marker, the payload of a control batch."""

    control_type: ControlType
    coordinator_epoch: int
    version: int = 0


def end_txn_marker_record(marker: EndTxnMarker, timestamp: int = NO_TIMESTAMP) -> Record:
    """The control record for `marker` (COMMIT or ABORT)."""
    if marker.control_type not in (ControlType.COMMIT, ControlType.ABORT):
        raise ValueError(
            f"an end-transaction marker is COMMIT or ABORT, not {marker.control_type!r}"
        )
    key = control_key(marker.control_type)
    value = _END_TXN_VALUE.pack(marker.version, marker.coordinator_epoch)
    return Record(key, value, (), timestamp)


def parse_end_txn_marker(record: Record) -> EndTxnMarker:
    """Read a commit/abort marker; newer versions may append fields, which are ignored."""
    _, control_type = parse_control_key(record.key)
    if control_type not in (ControlType.COMMIT, ControlType.ABORT):
        raise ProtocolError(f"control record type {control_type} is not an end-transaction marker")
    value = record.value
    if value is None or len(value) < _END_TXN_VALUE.size:
        raise ProtocolError("end-transaction marker value is null or shorter than 6 bytes")
    version, coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
    if version < 0:
        raise ProtocolError(f"negative end-transaction marker version {version}")
    return EndTxnMarker(ControlType(control_type), coordinator_epoch, version)
