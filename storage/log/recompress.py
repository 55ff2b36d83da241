"""Produce-time recompression: a topic's compression.type wins over the producer's codec.

As in Kafka's LogValidator: `producer` stores batches in whatever codec they
came in; any other value (`uncompressed`, `gzip`, `snappy`, `lz4`, `zstd`)
names the codec every stored data batch must use, so a batch in another codec
is decompressed and rebuilt in the topic's codec (at the topic's
compression.<codec>.level) before offsets are assigned. The rebuilt batch keeps
the records (keys, values, headers, timestamps), their order and the
producer's id, epoch, base sequence and transactional flag; record offsets are
renumbered from 0 like any client batch. Control batches are never touched.
Because the size changes, max.message.bytes (MESSAGE_TOO_LARGE) and
segment.bytes (RECORD_LIST_TOO_LARGE) are checked again on the result.
"""

from __future__ import annotations

from strom.storage.log.log_config import LogConfig
from strom.storage.log_errors import LogAppendError
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.records import BatchHeader, Codec, Record, build_batch, decode_batch

TOPIC_CODECS = {
    "uncompressed": Codec.NONE,
    "gzip": Codec.GZIP,
    "snappy": Codec.SNAPPY,
    "lz4": Codec.LZ4,
    "zstd": Codec.ZSTD,
}
DEFAULT_LZ4_LEVEL = 9
"""Kafka's default lz4 level; Strom then uses lz4's fast mode, as Java's client does."""

Batches = list[tuple[int, BatchHeader]]


def target_codec(config: LogConfig) -> Codec | None:
    """The codec stored batches must have, or None for `producer` (keep theirs)."""
    return TOPIC_CODECS.get(config.compression_type)


def codec_level(config: LogConfig, codec: Codec) -> int | None:
    """The topic's compression.<codec>.level, None meaning the codec's default."""
    if codec is Codec.GZIP and config.compression_gzip_level != -1:
        return config.compression_gzip_level
    if codec is Codec.LZ4 and config.compression_lz4_level != DEFAULT_LZ4_LEVEL:
        return config.compression_lz4_level
    if codec is Codec.ZSTD:
        return config.compression_zstd_level
    return None


def recompress(buf: bytearray, batches: Batches, config: LogConfig) -> tuple[bytearray, Batches]:
    """`buf` and its batches, rebuilt in the topic's codec where they differ (else as given)."""
    target = target_codec(config)
    if target is None or all(h.is_control or h.codec is target for _, h in batches):
        return buf, batches
    view = memoryview(buf)
    out = bytearray()
    rebuilt: Batches = []
    for pos, header in batches:
        batch = view[pos : pos + header.size]
        data = (
            batch
            if header.is_control or header.codec is target
            else _rebuild(batch, header, target, config)
        )
        rebuilt.append((len(out), BatchHeader.parse(data)))
        out += data
    for _, header in rebuilt:
        if header.size > config.max_message_bytes:
            raise LogAppendError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"batch of {header.size} bytes after recompression to {target.name.lower()} "
                f"exceeds max.message.bytes {config.max_message_bytes}",
            )
    if len(out) > config.segment_bytes:
        raise LogAppendError(
            ErrorCode.RECORD_LIST_TOO_LARGE,
            f"{len(out)} bytes of records exceed segment.bytes {config.segment_bytes}",
        )
    return out, rebuilt


def _rebuild(batch: memoryview, header: BatchHeader, codec: Codec, config: LogConfig) -> bytearray:
    try:
        records = decode_batch(batch, header, check_crc=False)[1]
    except ProtocolError as exc:
        raise LogAppendError(exc.error, str(exc)) from exc
    return build_batch(
        [Record(r.key, r.value, r.headers, r.timestamp) for r in records],
        codec=codec,
        compression_level=codec_level(config, codec),
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        transactional=header.is_transactional,
        partition_leader_epoch=header.partition_leader_epoch,
    )
