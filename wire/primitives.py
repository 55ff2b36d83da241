"""Kafka's primitive types: fixed-width integers, varints, strings, uuids.

Generated message code inlines `struct` calls for fixed-width fields; the
variable-length pieces live here. Readers take a buffer and a position and
return `(value, new_position)`; they raise `ProtocolError` (never IndexError or
struct.error) when the input is truncated or malformed.
"""

from __future__ import annotations

import struct
import uuid

from strom.wire.errors import ErrorCode, ProtocolError, truncated

Buffer = bytes | bytearray | memoryview
"""What the readers accept: anything `memoryview()` can wrap."""

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")

ZERO_UUID = uuid.UUID(int=0)

# Single-byte unsigned varints, the common case for lengths and tag counts.
_SMALL_UVARINTS = [bytes([i]) for i in range(128)]


def _read_unsigned(
    buf: Buffer, pos: int, max_bytes: int, what: str, end: int | None
) -> tuple[int, int]:
    view = memoryview(buf)
    result = 0
    shift = 0
    if end is None or end > len(view):
        end = len(view)
    limit = 7 * max_bytes
    while True:
        if pos >= end:
            raise truncated(what)
        byte = view[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= limit:
            raise ProtocolError(f"{what} is longer than {max_bytes} bytes", ErrorCode.CORRUPT_MESSAGE)


def read_uvarint(buf: Buffer, pos: int, end: int | None = None) -> tuple[int, int]:
    """Read an unsigned varint (at most 5 bytes, 32 bits) at `pos`, before `end`."""
    return _read_unsigned(buf, pos, 5, "varint", end)


def read_uvarlong(buf: Buffer, pos: int, end: int | None = None) -> tuple[int, int]:
    """Read an unsigned varlong (at most 10 bytes, 64 bits) at `pos`, before `end`."""
    return _read_unsigned(buf, pos, 10, "varlong", end)


def read_varint(buf: Buffer, pos: int, end: int | None = None) -> tuple[int, int]:
    """Read a zigzag-encoded signed 32-bit varint at `pos`, before `end`."""
    raw, pos = read_uvarint(buf, pos, end)
    raw &= 0xFFFFFFFF
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf: Buffer, pos: int, end: int | None = None) -> tuple[int, int]:
    """Read a zigzag-encoded signed 64-bit varlong at `pos`, before `end`."""
    raw, pos = read_uvarlong(buf, pos, end)
    raw &= 0xFFFFFFFFFFFFFFFF
    return (raw >> 1) ^ -(raw & 1), pos


def uvarint(value: int) -> bytes:
    """Encode a non-negative integer as an unsigned varint."""
    if 0 <= value < 128:
        return _SMALL_UVARINTS[value]
    if 0 <= value < 16384:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    if value < 0:
        raise ValueError(f"unsigned varint cannot hold {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint(value: int) -> bytes:
    """Encode a signed 32-bit integer as a zigzag varint."""
    if not -(2**31) <= value < 2**31:
        raise ValueError(f"varint out of range: {value}")
    return uvarint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def varlong(value: int) -> bytes:
    """Encode a signed 64-bit integer as a zigzag varlong."""
    if not -(2**63) <= value < 2**63:
        raise ValueError(f"varlong out of range: {value}")
    return uvarint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def decode_utf8(raw: Buffer, what: str) -> str:
    """Decode UTF-8 text from the wire, as a ProtocolError when it is not UTF-8."""
    try:
        return bytes(raw).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"{what} is not valid UTF-8", ErrorCode.INVALID_REQUEST) from exc
