"""Kafka record batches, sans-IO: header fast path, record codec, compression, legacy sets.

`batch` is the one home of the RecordBatch byte layout: other packages read unparsed
fields through its `peek_*` helpers and never restate an offset. `walk` checks every
record of a produced batch (Kafka's LogValidator walk) without building records.

Every decoder raises only `strom.wire.errors.ProtocolError` for bad bytes (usually
CORRUPT_MESSAGE; MESSAGE_TOO_LARGE past a decompression bound). Builders raise
ValueError for bad arguments, which are programming errors rather than input.
"""

from strom.wire.records.batch import (
    CODEC_MASK,
    DELETE_HORIZON_MASK,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    PEEK_CODEC_SIZE,
    PEEK_MAGIC_SIZE,
    TRANSACTIONAL_MASK,
    BatchHeader,
    TimestampType,
    compute_crc,
    peek_attributes,
    peek_length,
    peek_magic,
    peek_producer,
    validate_batch,
    verify_crc,
    write_crc,
)
from strom.wire.records.builder import batch_payload, build_batch, build_control_batch, decode_batch
from strom.wire.records.compression import (
    DEFAULT_MAX_DECOMPRESSED,
    Codec,
    compress,
    decompress,
    decompress_chunks,
)
from strom.wire.records.iterate import BatchIterator, iter_batches
from strom.wire.records.legacy import decode_legacy_message
from strom.wire.records.patch import patch_base_offset, patch_leader_epoch, set_max_timestamp
from strom.wire.records.reader import RecordSet, read_records
from strom.wire.records.record import (
    ControlType,
    EndTxnMarker,
    Header,
    Record,
    control_key,
    decode_records,
    encode_record,
    end_txn_marker_record,
    parse_control_key,
    parse_end_txn_marker,
)
from strom.wire.records.walk import check_records

__all__ = [
    "CODEC_MASK",
    "DEFAULT_MAX_DECOMPRESSED",
    "DELETE_HORIZON_MASK",
    "HEADER",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "PEEK_CODEC_SIZE",
    "PEEK_MAGIC_SIZE",
    "TRANSACTIONAL_MASK",
    "BatchHeader",
    "BatchIterator",
    "Codec",
    "ControlType",
    "EndTxnMarker",
    "Header",
    "Record",
    "RecordSet",
    "TimestampType",
    "batch_payload",
    "build_batch",
    "build_control_batch",
    "check_records",
    "compress",
    "compute_crc",
    "control_key",
    "decode_batch",
    "decode_legacy_message",
    "decode_records",
    "decompress",
    "decompress_chunks",
    "encode_record",
    "end_txn_marker_record",
    "iter_batches",
    "parse_control_key",
    "parse_end_txn_marker",
    "patch_base_offset",
    "patch_leader_epoch",
    "peek_attributes",
    "peek_length",
    "peek_magic",
    "peek_producer",
    "read_records",
    "set_max_timestamp",
    "validate_batch",
    "verify_crc",
    "write_crc",
]
