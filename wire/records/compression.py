"""Batch payload compression: gzip, snappy, lz4 and zstd, all through cramjam.

Decoding is bounded: every codec decompresses into a buffer of at most
`max_bytes`, so a small hostile payload (a "zip bomb") costs at most that much
memory and never more CPU than filling it. `decompress_chunks` (the produce
path's record walk) goes further: it streams the output in chunks of at most
`CHUNK` bytes and stops once `max_bytes` is passed, so a bomb is refused having
held one chunk, never the output. Garbage raises `ProtocolError`
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
import zlib
from collections.abc import Callable, Iterator
from enum import IntEnum

import cramjam
import lz4.frame
import xxhash
import zstandard

from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.primitives import Buffer

DEFAULT_MAX_DECOMPRESSED = 64 * 1024 * 1024
"""Default bound on one batch's decompressed size (bytes)."""
CHUNK = 256 * 1024
"""Largest piece `decompress_chunks` yields."""


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


def decompress_chunks(
    codec: Codec, data: Buffer, max_bytes: int = DEFAULT_MAX_DECOMPRESSED
) -> Iterator[bytes]:
    """Yield a compressed payload's output in pieces of at most `CHUNK` bytes (a raw
    snappy block comes whole, its declared size checked against the bound first).

    The whole payload must decode: garbage, a truncated stream or trailing bytes
    that are not another stream of the same codec raise CORRUPT_MESSAGE; output
    past `max_bytes` raises MESSAGE_TOO_LARGE as soon as it is produced.
    """
    stream = {
        Codec.GZIP: _gzip_chunks,
        Codec.SNAPPY: _snappy_chunks,
        Codec.LZ4: _lz4_chunks,
        Codec.ZSTD: _zstd_chunks,
    }.get(codec)
    if stream is None:
        raise ProtocolError(f"codec {codec!r} has no compressed stream")
    total = 0
    try:
        for chunk in stream(bytes(data), max_bytes):
            total += len(chunk)
            if total > max_bytes:
                raise _too_large(max_bytes)
            yield chunk
    except ProtocolError:
        raise
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as exc:  # the codec libraries raise assorted types
        raise _corrupt(codec, exc) from exc


def _gzip_chunks(data: bytes, max_bytes: int) -> Iterator[bytes]:
    while True:  # one gzip member per turn; Java's GZIPInputStream reads concatenated ones
        inflater = zlib.decompressobj(31)
        tail = data
        while not inflater.eof:
            out = inflater.decompress(tail, CHUNK)
            if not out and len(inflater.unconsumed_tail) == len(tail):  # no progress
                raise _corrupt(Codec.GZIP, EOFError("truncated gzip stream"))
            tail = inflater.unconsumed_tail
            yield out
        data = inflater.unused_data
        if not data:
            return


_LZ4_BLOCK_MAX = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}


def _lz4_chunks(data: bytes, max_bytes: int) -> Iterator[bytes]:
    """LZ4 frames block by block: each block inflates into a buffer of the frame's declared
    maximum block size (at most 4 MiB), so the bound holds per block. Frames of linked blocks
    (which no Kafka client writes for more than one block) go through python-lz4's decoder."""
    view = memoryview(data)
    pos, end = 0, len(data)
    while True:  # one frame per turn
        if end - pos < 7 or data[pos : pos + 4] != _LZ4_MAGIC:
            raise ValueError("not an lz4 frame")
        flg, bd = data[pos + 4], data[pos + 5]
        block_max = _LZ4_BLOCK_MAX.get(bd >> 4)
        if flg >> 6 != 1 or flg & 0x03 or bd & 0x8F or block_max is None:
            raise ValueError("unsupported lz4 frame descriptor")  # bad version, dict id, ...
        descriptor_end = pos + 6 + (8 if flg & 0x08 else 0)
        if descriptor_end >= end:
            raise EOFError("truncated lz4 frame header")
        if data[descriptor_end] != _header_checksum(data[pos + 4 : descriptor_end]):
            raise ValueError("lz4 frame header checksum mismatch")
        if not flg & 0x20:  # linked blocks
            yield from _lz4_linked_chunks(data[pos:])
            return
        block_checksums, content = flg & 0x10, xxhash.xxh32() if flg & 0x04 else None
        pos = descriptor_end + 1
        out = bytearray(block_max)
        while True:
            if end - pos < 4:
                raise EOFError("truncated lz4 block size")
            (size,) = _UINT32_LE.unpack_from(data, pos)
            pos += 4
            if size == 0:  # end mark
                break
            stored, size = size & 0x80000000, size & 0x7FFFFFFF
            if size > block_max or pos + size + (4 if block_checksums else 0) > end:
                raise ValueError(f"lz4 block of {size} bytes is too large or truncated")
            block = view[pos : pos + size]
            if block_checksums:
                if _UINT32_LE.unpack_from(data, pos + size)[0] != xxhash.xxh32_intdigest(block):
                    raise ValueError("lz4 block checksum mismatch")
                pos += 4
            pos += size
            if stored:
                chunk = bytes(block)
            else:
                chunk = bytes(memoryview(out)[: cramjam.lz4.decompress_block_into(block, out)])
            if content is not None:
                content.update(chunk)
            yield chunk
        if content is not None:
            if end - pos < 4 or _UINT32_LE.unpack_from(data, pos)[0] != content.intdigest():
                raise ValueError("lz4 content checksum mismatch")
            pos += 4
        if pos == end:
            return


def _lz4_linked_chunks(data: bytes) -> Iterator[bytes]:
    while True:  # one frame per turn
        frame = lz4.frame.LZ4FrameDecompressor()
        out = frame.decompress(data, max_length=CHUNK)
        while True:
            yield out
            if frame.eof:
                break
            if frame.needs_input:
                raise EOFError("truncated lz4 frame")
            out = frame.decompress(b"", max_length=CHUNK)
        data = frame.unused_data or b""
        if not data:
            return


def _zstd_chunks(data: bytes, max_bytes: int) -> Iterator[bytes]:
    _check_zstd_frames(data)  # the reader ends quietly on a truncated frame
    reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
    while True:
        out = reader.read(CHUNK)
        if not out:
            return
        yield out


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE = 0x184D2A50  # ..0x184D2A5F


def _check_zstd_frames(data: bytes) -> None:
    """Walk the frame and block headers (RFC 8878): every frame complete, nothing after."""
    pos, end = 0, len(data)
    if end == 0:
        raise _corrupt(Codec.ZSTD, EOFError("empty zstd payload"))
    while pos < end:
        if end - pos < 8:
            raise _corrupt(Codec.ZSTD, EOFError("truncated zstd frame header"))
        (magic,) = _UINT32_LE.unpack_from(data, pos)
        if magic & 0xFFFFFFF0 == _ZSTD_SKIPPABLE:
            (size,) = _UINT32_LE.unpack_from(data, pos + 4)
            pos += 8 + size
            continue
        if magic != _ZSTD_MAGIC:
            raise _corrupt(Codec.ZSTD, ValueError("not a zstd frame"))
        fhd = data[pos + 4]
        single_segment = (fhd >> 5) & 1
        fcs_size = (single_segment, 2, 4, 8)[fhd >> 6]
        pos += 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[fhd & 3] + fcs_size
        while True:
            if end - pos < 3:
                raise _corrupt(Codec.ZSTD, EOFError("truncated zstd block header"))
            block = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
            kind = (block >> 1) & 3
            pos += 3 + (1 if kind == 1 else block >> 3)
            if kind == 3:
                raise _corrupt(Codec.ZSTD, ValueError("reserved zstd block type"))
            if block & 1:
                break
        pos += 4 if fhd & 0x04 else 0  # content checksum
    if pos != end:
        raise _corrupt(Codec.ZSTD, EOFError("truncated zstd frame"))


def _snappy_chunks(data: bytes, max_bytes: int) -> Iterator[bytes]:
    view = memoryview(data)
    if len(view) < 16 or view[:8] != XERIAL_MAGIC:
        yield _raw_snappy(view, max_bytes)
        return
    pos, end, total = 16, len(view), 0
    while pos < end:
        if end - pos < 4:
            raise ProtocolError("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or length > end - pos:
            raise ProtocolError(f"bad xerial snappy block length {length}")
        block = _raw_snappy(view[pos : pos + length], max_bytes - total)
        total += len(block)
        yield block
        pos += length


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
