"""KRaft metadata records: the frame around one record, and v2 batches of them.

Every metadata record is framed the way Kafka's metadata serde frames it::

    frameVersion   unsigned varint   always 1 (0 was the 2.8 preview; refused)
    apiKey         unsigned varint   the record type (RegisterBrokerRecord 0,
                                     TopicRecord 2, PartitionRecord 3, ...)
    version        unsigned varint   the record's schema version
    body                             the record encoded at `version`

Nothing may follow the body. In the metadata log a framed record is one Raft entry's
payload (`raft_entries`). In KRaft's checkpoint format (`kraft_checkpoint`), and in the
metadata log older Strom versions kept on a single node (`single_node_log`), it is the
*value* of one record in a v2 RecordBatch (key null, no headers): batch fields producer id
-1, CreateTime, no compression, partitionLeaderEpoch = the epoch; `encode_batch` and
`decode_batch` are that mapping.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from functools import cache
from typing import NamedTuple

from strom.wire.errors import ProtocolError
from strom.wire.formats.metadata import FORMATS
from strom.wire.message import Message
from strom.wire.primitives import Buffer, read_uvarint, uvarint
from strom.wire.records import BatchHeader, Record, build_batch
from strom.wire.records import decode_batch as wire_decode_batch

FRAME_VERSION = 1


class MetadataError(Exception):
    """Bytes or records that cannot be part of a valid metadata log."""


_TYPE_CLASSES: dict[int, tuple[str, str]] = {
    type_id: (module, name) for name, (module, type_id) in FORMATS.items() if type_id is not None
}
"""Record type id (apiKey) -> module and name of its generated record class."""

RECORD_TYPE_IDS = frozenset(_TYPE_CLASSES)


@cache
def record_type(type_id: int) -> type[Message] | None:
    """The generated class of a record type, or None if unknown.

    Its module is imported on first use: a log holds a handful of the record
    types, and importing all of them would add to every start-up.
    """
    found = _TYPE_CLASSES.get(type_id)
    if found is None:
        return None
    module, name = found
    cls: type[Message] = getattr(importlib.import_module(module), name)
    return cls

_WRITE_VERSIONS: dict[str, int] = {"PartitionRecord": 0, "PartitionChangeRecord": 0}
"""Versions Strom writes where the newest needs data it does not track (log directories)."""
ELR_RECORD_VERSION = 2
"""PartitionRecord / PartitionChangeRecord version whose tagged fields carry the eligible
leader replicas and last known ELR (KIP-966); written only for a record that sets them (so a
cluster without `eligible.leader.replicas.version` writes what it always has). Strom tracks no
log directories: a v2 PartitionRecord's Directories array is empty."""


def write_version(record: Message) -> int:
    """The schema version a record is written at: the newest, except as noted above."""
    version = _WRITE_VERSIONS.get(record.NAME)
    if version is None:
        return record.MAX_VERSION
    if (
        getattr(record, "eligible_leader_replicas", None) is not None
        or getattr(record, "last_known_elr", None) is not None
    ):
        return ELR_RECORD_VERSION
    return version


def encode_record(record: Message, version: int | None = None) -> bytes:
    """Frame one metadata record (see the module docstring)."""
    if record.API_KEY is None or record_type(record.API_KEY) is not type(record):
        raise TypeError(f"{type(record).__name__} is not a metadata record")
    v = write_version(record) if version is None else version
    return uvarint(FRAME_VERSION) + uvarint(record.API_KEY) + uvarint(v) + record.encode(v)


def decode_record(value: Buffer) -> tuple[Message, int]:
    """Unframe one metadata record: `(record, version)`; MetadataError if malformed."""
    view = memoryview(value)
    try:
        frame, pos = read_uvarint(view, 0)
        if frame != FRAME_VERSION:
            raise MetadataError(f"unknown metadata record frame version {frame}")
        type_id, pos = read_uvarint(view, pos)
        version, pos = read_uvarint(view, pos)
        cls = record_type(type_id)
        if cls is None:
            raise MetadataError(f"unknown metadata record type {type_id}")
        record, end = cls.decode_from(view, pos, version)
    except ProtocolError as exc:
        raise MetadataError(f"malformed metadata record: {exc}") from exc
    if end != len(view):
        raise MetadataError(f"{len(view) - end} byte(s) of garbage after {cls.NAME}")
    return record, version


class MetadataBatch(NamedTuple):
    """One decoded batch: where it sits, its Raft epoch, and its records.

    Control batches (snapshot header/footer, leader change) have `control`
    set and no metadata records; they still occupy their offsets.
    """

    base_offset: int
    last_offset: int
    epoch: int
    timestamp: int
    records: list[Message]
    control: bool
    size: int


def encode_batch(
    records: Sequence[Message], *, base_offset: int, epoch: int, timestamp: int
) -> bytearray:
    """One data batch holding `records` at consecutive offsets from `base_offset`."""
    if not records:
        raise ValueError("a metadata batch needs at least one record")
    return build_batch(
        [Record(None, encode_record(r), (), timestamp) for r in records],
        base_offset=base_offset,
        partition_leader_epoch=epoch,
    )


def decode_batch(batch: Buffer) -> MetadataBatch:
    """Validate one whole batch (CRC included) and unframe its records."""
    try:
        header, raw = wire_decode_batch(batch)
    except ProtocolError as exc:
        raise MetadataError(f"corrupt metadata batch: {exc}") from exc
    return _batch(header, raw)


def _batch(header: BatchHeader, raw: list[Record]) -> MetadataBatch:
    records: list[Message] = []
    if not header.is_control:
        for item in raw:
            if item.value is None:
                raise MetadataError(f"null metadata record at offset {item.offset}")
            records.append(decode_record(item.value)[0])
    return MetadataBatch(
        header.base_offset,
        header.last_offset,
        header.partition_leader_epoch,
        header.max_timestamp,
        records,
        header.is_control,
        header.size,
    )
