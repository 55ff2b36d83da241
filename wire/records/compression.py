"""Batch payload compression: gzip, snappy, lz4 and zstd, all through cramjam.

Decoding is bounded: every codec decompresses into a buffer of at most
`max_bytes`, so a small hostile payload (a "zip bomb") costs at most that much
memory and never more CPU than filling it. Garbage raises `ProtocolError`
(CORRUPT_MESSAGE); output past the bound raises MESSAGE_TOO_LARGE, which makes
the Java producer split the batch and retry rather than retry it forever.

Wire quirks handled here:
- snappy: Java's SnappyOutputStream writes xerial framing (magic, two ints,
  then `[int32 length][raw snappy block]`...); librdkafka writes plain raw
  snappy. Both decode; encoding writes xerial with 32 KiB blocks like Java.
- lz4: the LZ4 frame format. Encoding mirrors Java's KafkaLZ4BlockOutputStream
  (independent 64 KiB blocks, no checksums) so every client can read it.
  Magic-0 messages carry a header checksum computed wrongly by old Kafka;
  `legacy_lz4=True` repairs it before decoding.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from enum import IntEnum

import cramjam
import xxhash

from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.primitives import Buffer

DEFAULT_MAX_DECOMPRESSED = 64 * 1024 * 1024
"""Default bound on one batch's decompressed size (bytes)."""


class Codec(IntEnum):
    """Compression codec ids: bits 0-2 of a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


def codec_from_id(codec_id: int) -> Codec:
    """The codec for an attributes id, or CORRUPT_MESSAGE for ids 5-7."""
    if 0 <= codec_id <= 4:
        return Codec(codec_id)
    raise ProtocolError(f"unknown compression codec id {codec_id}")


XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_INT32 = struct.Struct(">i")

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_FLG = 0x60  # version 01, independent blocks, no checksums, no content size
_LZ4_BD = 0x40  # 64 KiB max block size
_LZ4_BLOCK = 64 * 1024
_UINT32_LE = struct.Struct("<I")
_UINT64_LE = struct.Struct("<Q")

# cramjam says this when the output buffer is full (Rust's io::ErrorKind::WriteZero).
_BUFFER_FULL = "failed to write whole buffer"
_MIN_GUESS = 64 * 1024
_MAX_RATIO_GUESS = 256


def _corrupt(codec: Codec, exc: BaseException | None = None) -> ProtocolError:
    detail = f": {exc}" if exc is not None else ""
    return ProtocolError(f"corrupt {codec.name.lower()} payload{detail}")


def _too_large(max_bytes: int) -> ProtocolError:
    return ProtocolError(
        f"decompressed batch is larger than {max_bytes} bytes", ErrorCode.MESSAGE_TOO_LARGE
    )


# --- compression --------------------------------------------------------------------------


def compress(codec: Codec, data: Buffer, level: int | None = None) -> bytes:
    """Compress a batch payload; `level` is the codec's own level (None: default)."""
    if codec is Codec.NONE:
        return bytes(data)
    if codec is Codec.GZIP:
        return bytes(cramjam.gzip.compress(data, level=level))
    if codec is Codec.SNAPPY:
        return _xerial_compress(data)
    if codec is Codec.LZ4:
        return _lz4_frame_compress(data, level)
    if codec is Codec.ZSTD:
        return bytes(cramjam.zstd.compress(data, level=3 if level is None else level))
    raise ValueError(f"unknown codec {codec!r}")


def _header_checksum(descriptor: bytes) -> int:
    """The LZ4 frame header checksum: the second byte of the descriptor's xxHash32."""
    return (xxhash.xxh32_intdigest(descriptor) >> 8) & 0xFF


def _xerial_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _lz4_frame_compress(data: Buffer, level: int | None) -> bytes:
    view = memoryview(data)
    descriptor = bytes((_LZ4_FLG, _LZ4_BD))
    out = bytearray(_LZ4_MAGIC)
    out += descriptor
    out.append(_header_checksum(descriptor))
    for start in range(0, len(view), _LZ4_BLOCK):
        chunk = view[start : start + _LZ4_BLOCK]
        if level:
            packed = cramjam.lz4.compress_block(
                chunk, store_size=False, mode="high_compression", compression=level
            )
        else:
            packed = cramjam.lz4.compress_block(chunk, store_size=False)
        block = bytes(packed)
        if len(block) < len(chunk):
            out += _UINT32_LE.pack(len(block))
            out += block
        else:  # incompressible: store raw, flagged by the high bit
            out += _UINT32_LE.pack(len(chunk) | 0x80000000)
            out += chunk
    out += b"\x00\x00\x00\x00"
    return bytes(out)


# --- decompression ------------------------------------------------------------------------


def decompress(
    codec: Codec,
    data: Buffer,
    max_bytes: int = DEFAULT_MAX_DECOMPRESSED,
    *,
    legacy_lz4: bool = False,
) -> bytes | bytearray:
    """Decompress a batch payload, at most `max_bytes` of output.

    Raises ProtocolError: CORRUPT_MESSAGE for bad input, MESSAGE_TOO_LARGE past
    the bound. `legacy_lz4` repairs the magic-0 lz4 header checksum first.
    """
    try:
        if codec is Codec.NONE:
            if len(data) > max_bytes:
                raise _too_large(max_bytes)
            return bytes(data)
        if codec is Codec.SNAPPY:
            return _snappy_decompress(memoryview(data), max_bytes)
        if codec is Codec.GZIP:
            return _bounded(cramjam.gzip.decompress_into, codec, data, max_bytes, _gzip_hint(data))
        if codec is Codec.LZ4:
            if legacy_lz4:
                data = _fix_legacy_lz4_header(data)
            return _bounded(cramjam.lz4.decompress_into, codec, data, max_bytes, _lz4_hint(data))
        if codec is Codec.ZSTD:
            return _bounded(cramjam.zstd.decompress_into, codec, data, max_bytes, _zstd_hint(data))
    except ProtocolError:
        raise
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as exc:  # cramjam raises assorted types (a Rust panic too)
        raise _corrupt(codec, exc) from exc
    raise ProtocolError(f"unknown compression codec {codec!r}")


def _bounded(
    into: Callable[[Buffer, bytearray], int],
    codec: Codec,
    data: Buffer,
    max_bytes: int,
    hint: int | None,
) -> bytearray:
    """Decompress into a growing buffer, never larger than `max_bytes`."""
    guess = hint if hint is not None else 8 * len(data)
    # A size hint in the payload may lie: never trust it past a generous ratio.
    size = min(max_bytes, max(_MIN_GUESS, min(guess, _MAX_RATIO_GUESS * len(data) + _MIN_GUESS)))
    while True:
        out = bytearray(size)
        try:
            written = into(data, out)
        except Exception as exc:
            if _BUFFER_FULL not in str(exc):
                raise _corrupt(codec, exc) from exc
            if size >= max_bytes:
                raise _too_large(max_bytes) from exc
            size = min(max_bytes, size * 4)
            continue
        del out[written:]
        return out


def _snappy_decompress(view: memoryview, max_bytes: int) -> bytes | bytearray:
    if len(view) < 16 or view[:8] != XERIAL_MAGIC:
        return _raw_snappy(view, max_bytes)
    out = bytearray()
    pos, end = 16, len(view)
    while pos < end:
        if end - pos < 4:
            raise ProtocolError("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or length > end - pos:
            raise ProtocolError(f"bad xerial snappy block length {length}")
        out += _raw_snappy(view[pos : pos + length], max_bytes - len(out))
        pos += length
    return out


def _raw_snappy(view: memoryview, max_bytes: int) -> bytes:
    declared = cramjam.snappy.decompress_raw_len(view)
    if declared > max_bytes:
        raise _too_large(max_bytes)
    return bytes(cramjam.snappy.decompress_raw(view))


# --- size hints: cheap reads of sizes some formats declare up front ------------------------


def _gzip_hint(data: Buffer) -> int | None:
    # ISIZE: the last 4 bytes, uncompressed size mod 2**32 (single-member streams).
    if len(data) < 18:
        return None
    return int(_UINT32_LE.unpack_from(data, len(data) - 4)[0])


def _lz4_hint(data: Buffer) -> int | None:
    # Content size: 8 bytes after FLG/BD when FLG bit 3 is set.
    if len(data) < 14 or bytes(data[:4]) != _LZ4_MAGIC or not data[4] & 0x08:
        return None
    return int(_UINT64_LE.unpack_from(data, 6)[0])


def _zstd_hint(data: Buffer) -> int | None:
    # Frame_Content_Size from the frame header descriptor, when present.
    if len(data) < 6 or bytes(data[:4]) != b"\x28\xb5\x2f\xfd":
        return None
    fhd = data[4]
    single_segment = (fhd >> 5) & 1
    fcs_size = (0 if not single_segment else 1, 2, 4, 8)[fhd >> 6]
    pos = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[fhd & 3]
    if fcs_size == 0 or len(data) < pos + fcs_size:
        return None
    value = int.from_bytes(data[pos : pos + fcs_size], "little")
    return value + 256 if fcs_size == 2 else value


def _fix_legacy_lz4_header(data: Buffer) -> bytes:
    """Recompute the header checksum old Kafka wrote over the magic too."""
    raw = bytes(data)
    if len(raw) < 7 or raw[:4] != _LZ4_MAGIC:
        return raw  # let the decoder report it
    end = 6 + (8 if raw[4] & 0x08 else 0) + (4 if raw[4] & 0x01 else 0)
    if len(raw) <= end:
        return raw
    checksum = _header_checksum(raw[4:end])
    return raw[:end] + bytes((checksum,)) + raw[end + 1 :]
