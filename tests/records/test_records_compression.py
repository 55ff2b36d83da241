"""Codecs: interop with other encoders, both snappy framings, lz4 quirks, and the size bound."""

from __future__ import annotations

import gzip
import io
import os
import struct

import cramjam
import lz4.frame
import pytest
import xxhash
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.records import Codec, compress, decompress
from strom.wire.records.compression import XERIAL_MAGIC, codec_from_id

from .records_kafka_python import kafka_codec
from .records_strategies import SETTINGS

PAYLOAD = b"".join(b"record %d payload; " % i for i in range(5000)) + os.urandom(3000)


@SETTINGS
@given(data=st.binary(max_size=200_000), codec=st.sampled_from(list(Codec)))
def test_round_trip(data: bytes, codec: Codec) -> None:
    assert bytes(decompress(codec, compress(codec, data))) == data


@pytest.mark.parametrize("codec", list(Codec))
def test_round_trip_large_and_levels(codec: Codec) -> None:
    for level in (None, 1, 9):
        assert bytes(decompress(codec, compress(codec, PAYLOAD, level))) == PAYLOAD


def test_snappy_decodes_raw_and_xerial() -> None:
    raw = bytes(cramjam.snappy.compress_raw(PAYLOAD))
    assert bytes(decompress(Codec.SNAPPY, raw)) == PAYLOAD
    xerial = kafka_codec.snappy_encode(PAYLOAD, xerial_compatible=True)
    assert xerial.startswith(XERIAL_MAGIC)
    assert bytes(decompress(Codec.SNAPPY, xerial)) == PAYLOAD
    assert bytes(decompress(Codec.SNAPPY, XERIAL_MAGIC + struct.pack(">ii", 1, 1))) == b""


def test_snappy_encodes_xerial_like_java() -> None:
    encoded = compress(Codec.SNAPPY, PAYLOAD)
    assert encoded[:16] == XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    assert kafka_codec.snappy_decode(encoded) == PAYLOAD


def test_lz4_decodes_other_encoders() -> None:
    for linked in (True, False):
        for checksum in (True, False):
            frame = lz4.frame.compress(
                PAYLOAD, block_linked=linked, content_checksum=checksum, store_size=checksum
            )
            assert bytes(decompress(Codec.LZ4, frame)) == PAYLOAD
    assert bytes(decompress(Codec.LZ4, bytes(cramjam.lz4.compress(PAYLOAD)))) == PAYLOAD


def test_lz4_encodes_like_java() -> None:
    encoded = compress(Codec.LZ4, PAYLOAD)
    flg, bd = encoded[4], encoded[5]
    assert encoded[:4] == b"\x04\x22\x4d\x18"
    assert (flg, bd) == (0x60, 0x40)  # independent blocks, no checksums, 64 KiB blocks
    assert encoded[6] == (xxhash.xxh32(encoded[4:6]).intdigest() >> 8) & 0xFF
    assert lz4.frame.decompress(encoded) == PAYLOAD
    incompressible = os.urandom(200_000)
    assert lz4.frame.decompress(compress(Codec.LZ4, incompressible)) == incompressible


def test_legacy_lz4_header_checksum_is_repaired() -> None:
    old = kafka_codec.lz4_encode_old_kafka(PAYLOAD)
    assert bytes(decompress(Codec.LZ4, old, legacy_lz4=True)) == PAYLOAD
    with pytest.raises(ProtocolError):
        decompress(Codec.LZ4, old)
    proper = compress(Codec.LZ4, PAYLOAD)
    assert bytes(decompress(Codec.LZ4, proper, legacy_lz4=True)) == PAYLOAD



def test_gzip_and_zstd_from_other_encoders() -> None:
    assert bytes(decompress(Codec.GZIP, gzip.compress(PAYLOAD))) == PAYLOAD
    assert bytes(decompress(Codec.GZIP, kafka_codec.gzip_encode(PAYLOAD))) == PAYLOAD
    one_shot = zstandard.ZstdCompressor().compress(PAYLOAD)  # declares its content size
    assert bytes(decompress(Codec.ZSTD, one_shot)) == PAYLOAD
    stream = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(stream, closefd=False) as writer:
        writer.write(PAYLOAD)  # streaming, like Java: no content size
    assert bytes(decompress(Codec.ZSTD, stream.getvalue())) == PAYLOAD


@pytest.mark.parametrize("codec", [c for c in Codec if c is not Codec.NONE])
def test_bound_on_decompressed_size(codec: Codec) -> None:
    bomb = compress(codec, bytes(4 * 1024 * 1024))
    with pytest.raises(ProtocolError) as info:
        decompress(codec, bomb, max_bytes=1024 * 1024)
    assert info.value.error is ErrorCode.MESSAGE_TOO_LARGE
    exact = compress(codec, bytes(1024 * 1024))
    assert len(decompress(codec, exact, max_bytes=1024 * 1024)) == 1024 * 1024


def test_uncompressed_bound() -> None:
    with pytest.raises(ProtocolError) as info:
        decompress(Codec.NONE, b"abc", max_bytes=2)
    assert info.value.error is ErrorCode.MESSAGE_TOO_LARGE


@pytest.mark.parametrize("codec", [c for c in Codec if c is not Codec.NONE])
def test_growth_past_first_guess(codec: Codec) -> None:
    # Zeros compress far beyond the first-guess ratio, and lying hints are ignored.
    data = bytes(20 * 1024 * 1024)
    assert bytes(decompress(codec, compress(codec, data))) == data


def test_lying_size_hints_are_harmless() -> None:
    gz = bytearray(gzip.compress(PAYLOAD))
    gz[-4:] = (3).to_bytes(4, "little")  # ISIZE claims 3 bytes
    with pytest.raises(ProtocolError):  # the gzip trailer check catches the lie
        decompress(Codec.GZIP, bytes(gz))
    zs = bytearray(zstandard.ZstdCompressor().compress(PAYLOAD))
    assert bytes(decompress(Codec.ZSTD, bytes(zs), max_bytes=len(PAYLOAD))) == PAYLOAD


@pytest.mark.parametrize("codec", [c for c in Codec if c is not Codec.NONE])
@pytest.mark.parametrize(
    "garbage",
    [
        b"",
        b"\xff",
        b"garbage in, garbage out" * 3,
        XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01\x7f",
    ],
)
def test_garbage_is_corrupt_message(codec: Codec, garbage: bytes) -> None:
    with pytest.raises(ProtocolError) as info:
        decompress(codec, garbage)
    assert info.value.error is ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("codec", [c for c in Codec if c is not Codec.NONE])
def test_truncated_stream_is_corrupt_message(codec: Codec) -> None:
    packed = compress(codec, PAYLOAD)
    for cut in (len(packed) // 2, len(packed) - 1):
        with pytest.raises(ProtocolError) as info:
            decompress(codec, packed[:cut])
        assert info.value.error is ErrorCode.CORRUPT_MESSAGE


def test_bad_xerial_block_lengths() -> None:
    head = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    for tail in (b"\x00\x00", struct.pack(">i", -1), struct.pack(">i", 100) + b"ab"):
        with pytest.raises(ProtocolError):
            decompress(Codec.SNAPPY, head + tail)


def test_codec_from_id() -> None:
    assert codec_from_id(3) is Codec.LZ4
    for bad in (5, 6, 7, -1):
        with pytest.raises(ProtocolError):
            codec_from_id(bad)
