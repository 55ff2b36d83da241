"""Shared hypothesis strategies and byte-crafting helpers for the strom.wire.records tests."""

from __future__ import annotations

import struct
import zlib

import crc32c
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from strom.wire.records import HEADER, Codec, Header, Record, compress

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""Bounded, database-free settings: the suite must stay fast and leave no files."""

FUZZ = settings(SETTINGS, max_examples=300)
"""More examples for the fuzz tests, which are cheap per example."""

codecs = st.sampled_from(list(Codec))
blobs = st.none() | st.binary(max_size=64)
headers: st.SearchStrategy[tuple[Header, ...]] = st.lists(
    st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=16)), max_size=3
).map(tuple)
timestamps = st.integers(-1, 2**41)


@st.composite
def record_lists(draw: st.DrawFn, base_offset: int = 0, max_size: int = 12) -> list[Record]:
    """Records with absolute offsets (gaps allowed, as after compaction) and timestamps."""
    n = draw(st.integers(1, max_size))
    gaps = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    records = []
    offset = base_offset - 1
    for gap in gaps:
        offset += 1 + gap
        records.append(Record(draw(blobs), draw(blobs), draw(headers), draw(timestamps), offset))
    return records


def raw_batch(
    payload: bytes,
    *,
    count: int = 1,
    attributes: int = 0,
    last_offset_delta: int = 0,
    base_offset: int = 0,
    magic: int = 2,
    length: int | None = None,
) -> bytearray:
    """A batch around arbitrary record bytes with a correct CRC (to reach deeper checks)."""
    batch_length = HEADER.size - 12 + len(payload) if length is None else length
    out = bytearray(HEADER.size)
    HEADER.pack_into(
        out, 0, base_offset, batch_length, -1, magic, 0, attributes, last_offset_delta,
        0, 0, -1, -1, -1, count,
    )  # fmt: skip
    out += payload
    fix_crc(out)
    return out


def fix_crc(batch: bytearray) -> None:
    """Recompute a v2 batch's CRC in place, whatever its contents."""
    if len(batch) >= 21:
        struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))


def legacy_message(
    offset: int,
    key: bytes | None,
    value: bytes | None,
    *,
    magic: int = 1,
    attributes: int = 0,
    timestamp: int = 0,
) -> bytes:
    """One legacy message (magic 0 or 1) with a correct zlib CRC."""
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for blob in (key, value):
        body += struct.pack(">i", -1) if blob is None else struct.pack(">i", len(blob)) + blob
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, len(body) + 4, crc) + body


@st.composite
def legacy_sets(draw: st.DrawFn) -> bytes:
    """A legacy message set: plain messages, or one compressed wrapper around them."""
    magic = draw(st.integers(0, 1))
    count = draw(st.integers(1, 4))
    messages = b"".join(
        legacy_message(i, draw(blobs), draw(blobs), magic=magic, timestamp=draw(timestamps))
        for i in range(count)
    )
    codec = draw(st.sampled_from([Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4]))
    if codec is Codec.NONE:
        return messages
    packed = compress(codec, messages)
    return legacy_message(count - 1, None, packed, magic=magic, attributes=int(codec))
