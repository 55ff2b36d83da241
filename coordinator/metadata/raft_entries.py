"""How metadata records ride the Raft log: entries and snapshot data, encoded and decoded. Pure.

**Records are entries.** A controller command's records become consecutive Raft entries, one
record each, so a record's offset is its entry's offset and a broker's epoch is the offset of
its RegisterBrokerRecord, as in Kafka. Entry layout::

    remaining   uvarint   entries of the same command after this one (0: the last)
    timestamp   int64     the leader's wall clock when it proposed the command (ms, big-endian)
    record      bytes     the metadata record, framed as in `metadata_records.encode_record`

A follower may hold part of a command, so a replica applies a command's records together once
its last entry (remaining 0) is committed. The control entry a new leader writes carries no
record.

**Snapshot data** (what the Raft store keeps as a snapshot's opaque bytes)::

    magic       4 bytes   b"SQC1"
    offset      int64     the image's provenance: last record offset
    epoch       int32     ... its epoch
    timestamp   int64     ... its timestamp
    records     repeated: uvarint length, then a framed metadata record
                          (`kraft_checkpoint.image_records`, which rebuild the image from empty)

Bytes that do not decode raise MetadataError.

**Loading a snapshot** decodes a million PartitionRecords for a million partitions, so the
common one (version 0 as `encode_snapshot` writes it: no tagged fields, short arrays) is read
straight into a `PartitionImage`, its topic id shared with its TopicRecord's instead of a
`uuid.UUID` and a generated record object per partition (`_partition_v0`). Anything else, or
anything that does not parse that way, goes through the generated codec, which gives the same
image or the same MetadataError: the bytes are the same either way.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from functools import cache

from strom.coordinator.metadata.delta import MetadataDelta
from strom.coordinator.metadata.image import MetadataImage, PartitionImage, Provenance
from strom.coordinator.metadata.kraft_checkpoint import image_records
from strom.coordinator.metadata.metadata_records import MetadataError, decode_record, encode_record
from strom.wire.errors import ProtocolError
from strom.wire.formats.metadata.partition_record import PartitionRecord
from strom.wire.message import Message
from strom.wire.primitives import read_uvarint, uvarint

_TIMESTAMP = struct.Struct(">q")
_SNAPSHOT_HEADER = struct.Struct(">4sqiq")
_SNAPSHOT_MAGIC = b"SQC1"
_PARTITION_V0 = b"\x01\x03\x00"
"""The frame of a version 0 PartitionRecord: frame version 1, type 3, version 0."""
_PARTITION_HEAD = struct.Struct(">i16s")
_PARTITION_TAIL = struct.Struct(">iiiB")
_MAX_SHORT_ARRAY = 0x7E
"""The longest array whose compact length (entries + 1) is a one-byte uvarint."""
"""leader, leader epoch, partition epoch, and the tagged-field count (a one-byte uvarint)."""


def encode_entries(records: Sequence[Message], timestamp: int, *, after: int = 0) -> list[bytes]:
    """One entry per record; each says how many follow (`after`: entries of the same
    command after these, when a command is encoded a slice at a time)."""
    last = len(records) - 1 + after
    stamp = _TIMESTAMP.pack(timestamp)
    frame = _Framer().frame
    return [uvarint(last - i) + stamp + frame(record) for i, record in enumerate(records)]


def decode_entry(data: bytes) -> tuple[int, int, Message]:
    """(entries of the command after this one, timestamp, record); MetadataError if malformed."""
    try:
        remaining, pos = read_uvarint(data, 0)
        (timestamp,) = _TIMESTAMP.unpack_from(data, pos)
    except (ProtocolError, struct.error) as exc:
        raise MetadataError(f"malformed metadata entry: {exc}") from exc
    record, _version = decode_record(memoryview(data)[pos + _TIMESTAMP.size :])
    return remaining, timestamp, record


class EntryReplay:
    """Replays entries' records into a delta, common PartitionRecords straight from their
    bytes as a snapshot's are (`_partition_v0`), the topic id of consecutive partitions of a
    topic shared: a CreateTopics of 10,000 partitions is 10,000 such entries, on every
    replica."""

    def __init__(self) -> None:
        self._topic: tuple[bytes, uuid.UUID] | None = None

    def replay(self, delta: MetadataDelta, data: bytes) -> tuple[int, int]:
        """Replay the record of entry `data` into `delta`: (entries of the command after this
        one, timestamp); MetadataError if malformed or if the record does not apply."""
        try:
            remaining, pos = read_uvarint(data, 0)
            (timestamp,) = _TIMESTAMP.unpack_from(data, pos)
        except (ProtocolError, struct.error) as exc:
            raise MetadataError(f"malformed metadata entry: {exc}") from exc
        pos += _TIMESTAMP.size
        found = None
        if data.startswith(_PARTITION_V0, pos):
            found = _partition_v0(data, pos + len(_PARTITION_V0), len(data))
        if found is None:
            record, _version = decode_record(memoryview(data)[pos:])
            delta.replay(record)
            return remaining, timestamp
        raw_id, partition = found
        topic = self._topic
        if topic is None or topic[0] != raw_id:
            topic = self._topic = (raw_id, uuid.UUID(bytes=raw_id))
        delta.replay_partitions(topic[1], [partition])
        return remaining, timestamp


def encode_snapshot(image: MetadataImage) -> bytes:
    """The image as Raft snapshot data."""
    p = image.provenance
    parts = [_SNAPSHOT_HEADER.pack(_SNAPSHOT_MAGIC, p.offset, p.epoch, p.timestamp)]
    framer = _Framer()
    for record in image_records(image):
        framed = framer.frame(record)
        parts.append(uvarint(len(framed)) + framed)
    return b"".join(parts)


class _Framer:
    """`encode_record`, with common PartitionRecords (version 0, no tagged fields, arrays of
    fewer than 127 entries) packed in one step, the topic id's bytes taken once per topic:
    the same bytes the generated codec writes, in a fraction of its time."""

    def __init__(self) -> None:
        self._topic: tuple[uuid.UUID, bytes] | None = None

    def frame(self, record: Message) -> bytes:
        if type(record) is not PartitionRecord:
            return encode_record(record)
        r: PartitionRecord = record
        replicas, isr, removing, adding = r.replicas, r.isr, r.removing_replicas, r.adding_replicas
        lengths = (len(replicas), len(isr), len(removing), len(adding))
        if (
            max(lengths) > _MAX_SHORT_ARRAY
            or r.eligible_leader_replicas is not None
            or r.last_known_elr is not None
            or r.leader_recovery_state != 0
            or r.directories
            or r.unknown_tagged_fields
        ):
            return encode_record(record)
        topic = self._topic
        if topic is None or topic[0] is not r.topic_id:
            topic = self._topic = (r.topic_id, r.topic_id.bytes)
        return _partition_shape(*lengths).pack(
            _PARTITION_V0, r.partition_id, topic[1], lengths[0] + 1, *replicas, lengths[1] + 1,
            *isr, lengths[2] + 1, *removing, lengths[3] + 1, *adding, r.leader, r.leader_epoch,
            r.partition_epoch,
        )  # fmt: skip


@cache
def _partition_shape(replicas: int, isr: int, removing: int, adding: int) -> struct.Struct:
    """A framed version 0 PartitionRecord with arrays of these lengths and no tagged field."""
    return struct.Struct(
        f">{len(_PARTITION_V0)}si16sB{replicas}iB{isr}iB{removing}iB{adding}iiiix"
    )


def decode_snapshot(data: bytes) -> tuple[MetadataImage, MetadataDelta]:
    """The image in snapshot data, and the delta that builds it from empty."""
    loader = SnapshotLoader(data)
    while loader.step(len(data)):
        pass
    return loader.result()


class SnapshotLoader:
    """Decodes snapshot data a slice at a time (`step`), so that a host can let its event
    loop run between slices: a million partitions take seconds. MetadataError from the
    constructor (a bad header) or from `step` (bad records)."""

    def __init__(self, data: bytes) -> None:
        try:
            magic, offset, epoch, timestamp = _SNAPSHOT_HEADER.unpack_from(data, 0)
        except struct.error as exc:
            raise MetadataError(f"malformed metadata snapshot: {exc}") from exc
        if magic != _SNAPSHOT_MAGIC:
            raise MetadataError(f"not a metadata snapshot (magic {magic!r})")
        self._data = data
        self._view = memoryview(data)
        self._pos = _SNAPSHOT_HEADER.size
        self._provenance = Provenance(offset, epoch, timestamp)
        self._delta = MetadataImage.EMPTY.delta()
        self._topic_ids: dict[bytes, uuid.UUID] = {}
        self._run_id: bytes | None = None
        """A topic's partitions follow each other: they are replayed together."""
        self._run: list[PartitionImage] = []

    @property
    def position(self) -> int:
        """Bytes of the data decoded so far."""
        return self._pos

    def step(self, max_bytes: int) -> bool:
        """Decode records from about `max_bytes` of the data (whole records, at least one);
        False once every record is decoded."""
        data, view, delta, topic_ids = self._data, self._view, self._delta, self._topic_ids
        pos, end = self._pos, len(data)
        until = min(end, pos + max(1, max_bytes))
        run_id, run = self._run_id, self._run
        while pos < until:
            length = data[pos]
            if length < 0x80:
                pos += 1
            else:
                try:
                    length, pos = read_uvarint(view, pos)
                except ProtocolError as exc:
                    raise MetadataError(f"malformed metadata snapshot: {exc}") from exc
            stop = pos + length
            if stop > end:
                raise MetadataError(
                    f"malformed metadata snapshot: a record of {length} bytes at {pos} runs "
                    f"past its end ({end})"
                )
            if data.startswith(_PARTITION_V0, pos):
                found = _partition_v0(data, pos + len(_PARTITION_V0), stop)
                if found is not None:
                    raw_id, partition = found
                    if raw_id != run_id:
                        _replay_run(delta, topic_ids, run_id, run)
                        run_id, run = raw_id, []
                    run.append(partition)
                    pos = stop
                    continue
            _replay_run(delta, topic_ids, run_id, run)
            run_id, run = None, []
            record, _version = decode_record(view[pos:stop])
            topic_id = getattr(record, "topic_id", None)
            if record.NAME == "TopicRecord" and isinstance(topic_id, uuid.UUID):
                topic_ids[topic_id.bytes] = topic_id
            delta.replay(record)
            pos = stop
        self._pos, self._run_id, self._run = pos, run_id, run
        return pos < end

    def result(self) -> tuple[MetadataImage, MetadataDelta]:
        """The image and the delta that builds it from empty, once `step` returned False."""
        if self._pos < len(self._data):
            raise RuntimeError("the snapshot is not decoded yet")
        _replay_run(self._delta, self._topic_ids, self._run_id, self._run)
        self._run_id, self._run = None, []
        return self._delta.apply(self._provenance), self._delta


def _replay_run(
    delta: MetadataDelta,
    topic_ids: dict[bytes, uuid.UUID],
    raw_id: bytes | None,
    partitions: list[PartitionImage],
) -> None:
    """Replay consecutive partitions of one topic, in order."""
    if raw_id is None or not partitions:
        return
    topic_id = topic_ids.get(raw_id)
    if topic_id is None:  # no TopicRecord before it: the delta refuses it as replay would
        topic_id = uuid.UUID(bytes=raw_id)
    delta.replay_partitions(topic_id, partitions)


@cache
def _int32s(count: int) -> struct.Struct:
    return struct.Struct(f">{count}i")


def _partition_v0(data: bytes, pos: int, stop: int) -> tuple[bytes, PartitionImage] | None:
    """The body of a version 0 PartitionRecord in `data[pos:stop]` as (raw topic id,
    partition), or None if it is not in the common form (the generated codec decodes it)."""
    try:
        partition_id, raw_id = _PARTITION_HEAD.unpack_from(data, pos)
        pos += _PARTITION_HEAD.size
        # replicas, isr, removing, adding: compact arrays of int32, each counted by a
        # one-byte uvarint of length + 1 (0 would be null; 0x80 and up a longer uvarint)
        count = data[pos] - 1
        if not 0 <= count <= _MAX_SHORT_ARRAY:
            return None
        replicas = _int32s(count).unpack_from(data, pos + 1)
        pos += 1 + 4 * count
        count = data[pos] - 1
        if not 0 <= count <= _MAX_SHORT_ARRAY:
            return None
        isr = _int32s(count).unpack_from(data, pos + 1)
        pos += 1 + 4 * count
        if data[pos] == 1 and data[pos + 1] == 1:  # no replicas being removed or added
            removing = adding = ()
            pos += 2
        else:
            count = data[pos] - 1
            if not 0 <= count <= _MAX_SHORT_ARRAY:
                return None
            removing = _int32s(count).unpack_from(data, pos + 1)
            pos += 1 + 4 * count
            count = data[pos] - 1
            if not 0 <= count <= _MAX_SHORT_ARRAY:
                return None
            adding = _int32s(count).unpack_from(data, pos + 1)
            pos += 1 + 4 * count
        leader, leader_epoch, partition_epoch, tagged = _PARTITION_TAIL.unpack_from(data, pos)
    except (struct.error, IndexError):
        return None
    if tagged or pos + _PARTITION_TAIL.size != stop:
        return None
    return raw_id, PartitionImage(
        partition_id, replicas, isr, leader, leader_epoch, partition_epoch, removing, adding
    )
