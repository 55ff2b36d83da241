"""Legacy message sets (magic 0 and 1), decode only.

Each message, big-endian::

    offset      int64
    size        int32    bytes after this field
    crc         uint32   zlib CRC-32 of magic..end
    magic       int8     0 or 1
    attributes  int8     bits 0-2 codec (none/gzip/snappy/lz4), bit 3
                         LogAppendTime (magic 1 only)
    timestamp   int64    magic 1 only
    key         int32 length (-1 null) + bytes
    value       int32 length (-1 null) + bytes

A compressed "wrapper" message's value is a whole inner message set. With
magic 1 the inner offsets are relative and the wrapper carries the absolute
offset of the last inner message (0 from some producers: then the inner
offsets stand as they are). Old data must never crash the broker, so every
defect is a `ProtocolError`.
"""

from __future__ import annotations

import struct
import zlib

from strom.wire.errors import ProtocolError, truncated
from strom.wire.primitives import INT32, Buffer
from strom.wire.records.batch import NO_TIMESTAMP
from strom.wire.records.compression import DEFAULT_MAX_DECOMPRESSED, Codec, decompress
from strom.wire.records.record import Record

_V0 = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_V1 = struct.Struct(">qiIbbq")  # ... timestamp
_CRC_START = 16  # the crc covers magic..end
MIN_SIZE_V0 = 14  # crc + magic + attributes + key length + value length
MIN_SIZE_V1 = 22  # ... + timestamp
_LOG_OVERHEAD = 12


class _Message:
    """One parsed legacy message (internal)."""

    __slots__ = ("attributes", "key", "magic", "offset", "timestamp", "value")

    def __init__(
        self,
        offset: int,
        magic: int,
        attributes: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
    ) -> None:
        self.offset = offset
        self.magic = magic
        self.attributes = attributes
        self.timestamp = timestamp
        self.key = key
        self.value = value


def _read_bytes(view: memoryview, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    if end - pos < 4:
        raise truncated(f"{what} length")
    (length,) = INT32.unpack_from(view, pos)
    pos += 4
    if length < 0:
        if length != -1:
            raise ProtocolError(f"negative {what} length {length}")
        return None, pos
    if length > end - pos:
        raise truncated(what)
    return bytes(view[pos : pos + length]), pos + length


def _parse_message(view: memoryview, check_crc: bool) -> _Message:
    """Parse exactly one message filling `view`."""
    if len(view) < _LOG_OVERHEAD + MIN_SIZE_V0:
        raise truncated("legacy message")
    magic = view[_CRC_START]
    if magic == 0:
        offset, size, crc, magic, attributes = _V0.unpack_from(view)
        timestamp, pos = NO_TIMESTAMP, _V0.size
    elif magic == 1:
        if len(view) < _LOG_OVERHEAD + MIN_SIZE_V1:
            raise truncated("legacy message")
        offset, size, crc, magic, attributes, timestamp = _V1.unpack_from(view)
        pos = _V1.size
    else:
        raise ProtocolError(f"legacy message magic is {magic}, expected 0 or 1")
    if size != len(view) - _LOG_OVERHEAD:
        raise ProtocolError(
            f"legacy message size {size} does not match its {len(view) - _LOG_OVERHEAD} bytes"
        )
    if check_crc and zlib.crc32(view[_CRC_START:]) != crc:
        raise ProtocolError("legacy message CRC mismatch")
    end = len(view)
    key, pos = _read_bytes(view, pos, end, "message key")
    value, pos = _read_bytes(view, pos, end, "message value")
    if pos != end:
        raise ProtocolError(f"legacy message has {end - pos} bytes past its value")
    return _Message(offset, magic, attributes, timestamp, key, value)


def _split(view: memoryview) -> list[memoryview]:
    """Cut an inner message set into messages; a partial one is corrupt here."""
    pieces = []
    pos, end = 0, len(view)
    while pos < end:
        if end - pos < _LOG_OVERHEAD:
            raise truncated("inner legacy message")
        (size,) = INT32.unpack_from(view, pos + 8)
        if size < MIN_SIZE_V0 or size > end - pos - _LOG_OVERHEAD:
            raise ProtocolError(f"inner legacy message size {size} is invalid")
        pieces.append(view[pos : pos + _LOG_OVERHEAD + size])
        pos += _LOG_OVERHEAD + size
    return pieces


def decode_legacy_message(
    entry: Buffer,
    *,
    check_crc: bool = True,
    max_bytes: int = DEFAULT_MAX_DECOMPRESSED,
) -> list[Record]:
    """Decode one whole legacy message: one record, or the inner set of a wrapper."""
    outer = _parse_message(memoryview(entry), check_crc)
    codec_id = outer.attributes & 0x07
    if codec_id == 0:
        return [Record(outer.key, outer.value, (), outer.timestamp, outer.offset)]
    if codec_id > Codec.LZ4:
        raise ProtocolError(f"codec id {codec_id} is invalid for a magic {outer.magic} message")
    if outer.value is None:
        raise ProtocolError("compressed legacy message has a null value")
    inner_set = decompress(Codec(codec_id), outer.value, max_bytes, legacy_lz4=outer.magic == 0)
    inner = [_parse_message(piece, check_crc) for piece in _split(memoryview(inner_set))]
    if not inner:
        raise ProtocolError("compressed legacy message has no inner messages")
    for message in inner:
        if message.magic != outer.magic:
            raise ProtocolError(
                f"inner message magic {message.magic} differs from wrapper magic {outer.magic}"
            )
        if message.attributes & 0x07:
            raise ProtocolError("legacy message is compressed twice")
    base = 0
    if outer.magic == 1 and outer.offset != 0:
        last_inner = inner[-1].offset
        if outer.offset < last_inner:
            raise ProtocolError(f"wrapper offset {outer.offset} is below inner offset {last_inner}")
        base = outer.offset - last_inner
    append_time = outer.magic == 1 and bool(outer.attributes & 0x08)
    return [
        Record(m.key, m.value, (), outer.timestamp if append_time else m.timestamp, base + m.offset)
        for m in inner
    ]
