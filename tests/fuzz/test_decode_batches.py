"""Record batches as a producer could send them, corrupted, through the broker's append checks.

`tests/records/test_records_malformed.py` fuzzes every codec entry point of
`wire/records`; this file fuzzes what Produce runs before a byte reaches the log,
`storage.validate.validate_records`: it must raise only `LogAppendError` (with a
Kafka error code), whatever the bytes, and what it accepts must decode. Batches are v2 (any codec, sometimes with
a producer id), corrupted, and often given a fresh CRC so the corruption reaches
the records and the compressed payload.
"""

from __future__ import annotations

import random

from hypothesis import example, given, settings
from hypothesis import strategies as st

from strom.storage.log.log_config import LogConfig
from strom.storage.log.validate import AppendOrigin, validate_records
from strom.storage.log_errors import LogAppendError
from strom.wire.errors import ErrorCode, ProtocolError
from strom.wire.records import Codec, Record, build_batch, decode_batch, iter_batches
from tests.records.records_strategies import FUZZ, codecs, fix_crc, raw_batch, record_lists

BATCH_FUZZ = settings(FUZZ, max_examples=120)
"""Fewer than tests/records' fuzzers: they already run every decoder on such bytes."""
NOW_MS = 1_700_000_000_000
CONFIGS = (
    LogConfig(),
    LogConfig(cleanup_policy=("compact",)),
    LogConfig(message_timestamp_before_max_ms=3_600_000, max_message_bytes=4096),
)


def _corrupt(rng: random.Random, data: bytearray) -> None:
    for _ in range(rng.randint(1, 4)):
        action = rng.choice(("flip", "set", "cut", "insert", "delete", "count"))
        index = rng.randrange(max(1, len(data)))
        if action == "flip" and data:
            data[index] ^= 1 << rng.randrange(8)
        elif action == "set" and data:
            data[index] = rng.choice((0, 0xFF, 0x7F, 0x80, rng.randrange(256)))
        elif action == "cut":
            del data[index:]
        elif action == "insert":
            data[index:index] = rng.randbytes(rng.randint(1, 8))
        elif action == "delete":
            del data[index : index + rng.randint(1, 8)]
        elif action == "count" and len(data) >= 61:
            data[57:61] = rng.choice(
                (b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x00\x00\x00\x00")
            )


@st.composite
def produced_batches(draw: st.DrawFn) -> bytes:
    """One or two v2 batches a producer could send, then corrupted."""
    rng = draw(st.randoms(use_true_random=False))
    data = bytearray()
    for _ in range(draw(st.integers(1, 2))):
        records = [
            Record(r.key, r.value, r.headers, NOW_MS, i)
            for i, r in enumerate(draw(record_lists(max_size=5)))
        ]
        producer = draw(st.sampled_from([(-1, -1, -1), (7, 0, 0)]))
        data += build_batch(
            records,
            codec=draw(codecs),
            producer_id=producer[0],
            producer_epoch=producer[1],
            base_sequence=producer[2],
        )
    _corrupt(rng, data)
    if draw(st.booleans()):
        fix_crc(data)
    return bytes(data)


def _validate(data: bytes, config: LogConfig) -> bool:
    """True when the append would be accepted; LogAppendError is the one allowed failure."""
    try:
        validate_records(bytearray(data), config, NOW_MS, AppendOrigin.CLIENT)
    except LogAppendError as exc:
        error = exc.error
    else:
        return True
    assert isinstance(error, ErrorCode)
    assert error is not ErrorCode.NONE
    return False


@BATCH_FUZZ
@given(data=produced_batches(), config=st.sampled_from(CONFIGS))
def test_append_checks_raise_only_log_append_error(data: bytes, config: LogConfig) -> None:
    _validate(data, config)


@BATCH_FUZZ
@given(data=st.binary(max_size=300), config=st.sampled_from(CONFIGS))
def test_append_checks_on_random_bytes(data: bytes, config: LogConfig) -> None:
    _validate(data, config)


@BATCH_FUZZ
@given(data=produced_batches())
@example(data=bytes(raw_batch(b"\x7f")))  # valid CRC, a record whose length is -64
def test_an_accepted_append_decodes(data: bytes) -> None:
    """Kafka's LogValidator walks every record: what it accepts, a consumer can read."""
    if not _validate(data, LogConfig()):
        return
    for _, batch in iter_batches(data, allow_partial=False, check_crc=True):
        try:
            decode_batch(batch)
        except ProtocolError as exc:
            raise AssertionError(f"accepted a batch that does not decode: {exc}") from exc


def test_codecs_are_all_fuzzed() -> None:
    assert set(Codec) == {Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD}
