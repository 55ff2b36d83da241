"""Metadata snapshots: a whole `MetadataImage` as records, in KRaft's checkpoint files.

File name: `<20-digit end offset>-<10-digit epoch>.checkpoint` in the log
directory, where the end offset is one past the last log offset the snapshot
contains and the epoch is that offset's Raft epoch (KRaft's snapshot id).

Contents, v2 RecordBatches with offsets counting from 0 and
partitionLeaderEpoch = the snapshot epoch:

    control batch   one control record: key (version 0, type 3 SNAPSHOT_HEADER),
                    value SnapshotHeaderRecord v0 (version 0,
                    lastContainedLogTimestamp)
    data batches    the image as metadata records, framed as in the log:
                    feature levels (metadata.version first), broker
                    registrations, each topic's TopicRecord and PartitionRecords,
                    ConfigRecords, one ProducerIdsRecord, then the SCRAM
                    credentials (UserScramCredentialRecord) and the ACLs
                    (AccessControlEntryRecord) and client quotas
                    (ClientQuotaRecord)
    control batch   one control record: key (version 0, type 4 SNAPSHOT_FOOTER),
                    value SnapshotFooterRecord v0

Crash safety: a snapshot is replaced atomically and durably (strom.storage.durable)
through `<name>.checkpoint.part` (KRaft's name for a partial snapshot): written,
fsynced, renamed to its final name and the directory fsynced, so a `.checkpoint`
file is always whole; leftover `.part` files are deleted at start-up. A snapshot
that still fails to read (header, footer or CRC) is reported, never guessed at.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from strom.coordinator.metadata.image import METADATA_VERSION, MetadataImage, Provenance
from strom.coordinator.metadata.metadata_records import MetadataError, encode_batch
from strom.coordinator.metadata.metadata_records import decode_batch as decode_metadata_batch
from strom.storage import disk
from strom.storage.durable import atomic_replace, fsync_dir
from strom.wire.errors import ProtocolError
from strom.wire.formats.metadata.access_control_entry_record import AccessControlEntryRecord
from strom.wire.formats.metadata.client_quota_record import ClientQuotaRecord
from strom.wire.formats.metadata.config_record import ConfigRecord
from strom.wire.formats.metadata.feature_level_record import FeatureLevelRecord
from strom.wire.formats.metadata.partition_record import PartitionRecord
from strom.wire.formats.metadata.producer_ids_record import ProducerIdsRecord
from strom.wire.formats.metadata.register_broker_record import RegisterBrokerRecord
from strom.wire.formats.metadata.topic_record import TopicRecord
from strom.wire.formats.metadata.user_scram_credential_record import UserScramCredentialRecord
from strom.wire.formats.protocol.snapshot_footer_record import SnapshotFooterRecord
from strom.wire.formats.protocol.snapshot_header_record import SnapshotHeaderRecord
from strom.wire.message import Message
from strom.wire.primitives import Buffer
from strom.wire.records import (
    ControlType,
    Record,
    build_batch,
    control_key,
    decode_batch,
    iter_batches,
)
from strom.wire.records.record import parse_control_key

SUFFIX = ".checkpoint"
PART = ".part"
"""Appended to a snapshot's name while it is written (KRaft's partial-snapshot suffix)."""
PART_SUFFIX = SUFFIX + PART
RECORDS_PER_BATCH = 1000


class SnapshotId(NamedTuple):
    """KRaft's snapshot id: `end_offset` is exclusive; `epoch` is that of offset end-1."""

    end_offset: int
    epoch: int

    @property
    def file_name(self) -> str:
        return f"{self.end_offset:020d}-{self.epoch:010d}{SUFFIX}"

    @classmethod
    def parse(cls, name: str) -> SnapshotId | None:
        stem = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else ""
        offset, _, epoch = stem.partition("-")
        if len(offset) != 20 or len(epoch) != 10 or not (offset + epoch).isdigit():
            return None
        return cls(int(offset), int(epoch))


def list_snapshots(directory: Path) -> list[SnapshotId]:
    """Complete snapshots in `directory`, oldest first; removes leftover `.part` files."""
    found = []
    for path in directory.iterdir():
        if path.name.endswith(PART_SUFFIX):
            path.unlink()
        elif (snapshot_id := SnapshotId.parse(path.name)) is not None:
            found.append(snapshot_id)
    return sorted(found)


def image_records(image: MetadataImage) -> Iterator[Message]:
    """Records that rebuild `image` from empty, in an order replay accepts."""
    features = sorted(image.features.items(), key=lambda kv: (kv[0] != METADATA_VERSION, kv[0]))
    for name, level in features:
        yield FeatureLevelRecord(name, level)
    for b in image.brokers():
        yield RegisterBrokerRecord(
            broker_id=b.broker_id,
            incarnation_id=b.incarnation_id,
            broker_epoch=b.epoch,
            end_points=[
                RegisterBrokerRecord.BrokerEndpoint(e.name, e.host, e.port, e.security_protocol)
                for e in b.endpoints
            ],
            features=[RegisterBrokerRecord.BrokerFeature(*f) for f in b.features],
            rack=b.rack,
            fenced=b.fenced,
            in_controlled_shutdown=b.in_controlled_shutdown,
            log_dirs=list(b.log_dirs),
        )
    for name in image.topic_names():
        topic = image.topics_by_name[name]
        yield TopicRecord(name, topic.topic_id)
        for index in sorted(topic.partitions):
            p = topic.partitions[index]
            yield PartitionRecord(
                partition_id=index, topic_id=topic.topic_id, replicas=list(p.replicas),
                isr=list(p.isr), removing_replicas=list(p.removing_replicas),
                adding_replicas=list(p.adding_replicas), leader=p.leader,
                leader_recovery_state=p.leader_recovery_state, leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch,
                eligible_leader_replicas=list(p.elr) if p.elr else None,
                last_known_elr=list(p.last_known_elr) if p.last_known_elr else None,
            )  # fmt: skip
    for (rtype, rname), values in sorted(image.configs.items()):
        for key in sorted(values):
            yield ConfigRecord(rtype, rname, key, values[key])
    if image.next_producer_id > 0:
        yield ProducerIdsRecord(-1, -1, image.next_producer_id)
    for (user, mechanism), c in sorted(image.scram_credentials.items()):
        yield UserScramCredentialRecord(
            user, mechanism, c.salt, c.stored_key, c.server_key, c.iterations
        )
    for entity, quotas in sorted(image.client_quotas.items(), key=lambda kv: str(kv[0])):
        for key in sorted(quotas):
            yield ClientQuotaRecord(
                [ClientQuotaRecord.EntityData(kind, name) for kind, name in entity],
                key, quotas[key], False,
            )  # fmt: skip
    for acl_id, a in sorted(image.acls.items()):
        yield AccessControlEntryRecord(
            acl_id, a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host,
            a.operation, a.permission,
        )  # fmt: skip


def _control_batch(kind: ControlType, body: Message, offset: int, epoch: int, ts: int) -> bytes:
    record = Record(control_key(kind), body.encode(0), (), ts)
    return bytes(
        build_batch([record], base_offset=offset, control=True, partition_leader_epoch=epoch)
    )


def write_snapshot(directory: Path, image: MetadataImage, snapshot_id: SnapshotId) -> Path:
    """Write `image` as snapshot `snapshot_id` (atomically, fsynced); returns its path."""
    final = directory / snapshot_id.file_name
    write_records(final, image_records(image), snapshot_id.epoch, image.provenance.timestamp)
    return final


def write_records(final: Path, records: Iterable[Message], epoch: int, ts: int) -> None:
    """Write `records` in the checkpoint format above to `final` (atomically, fsynced)."""
    parts: list[Buffer] = [
        _control_batch(ControlType.SNAPSHOT_HEADER, SnapshotHeaderRecord(0, ts), 0, epoch, ts)
    ]
    offset = 1
    chunk: list[Message] = []
    for record in (*records, None):
        if record is not None:
            chunk.append(record)
        if chunk and (record is None or len(chunk) == RECORDS_PER_BATCH):
            parts.append(encode_batch(chunk, base_offset=offset, epoch=epoch, timestamp=ts))
            offset += len(chunk)
            chunk = []
    parts.append(
        _control_batch(ControlType.SNAPSHOT_FOOTER, SnapshotFooterRecord(0), offset, epoch, ts)
    )
    atomic_replace(final, b"".join(parts), temp_suffix=PART)


def read_snapshot(directory: Path, snapshot_id: SnapshotId) -> MetadataImage:
    """Load a snapshot into an image whose provenance is the snapshot's last offset."""
    records, timestamp = read_records(directory / snapshot_id.file_name)
    provenance = Provenance(snapshot_id.end_offset - 1, snapshot_id.epoch, timestamp)
    return MetadataImage.EMPTY.apply_all(records, provenance)


def read_records(path: Path) -> tuple[list[Message], int]:
    """The records of a checkpoint-format file and its header's lastContainedLogTimestamp."""
    data = disk.read_file(path)
    records: list[Message] = []
    header: SnapshotHeaderRecord | None = None
    footer = False
    try:
        for batch_header, view in iter_batches(data, allow_partial=False, check_crc=True):
            if footer:
                raise MetadataError("data after the snapshot footer")
            if not batch_header.is_control:
                if header is None:
                    raise MetadataError("snapshot does not start with a header")
                records.extend(decode_metadata_batch(view).records)
                continue
            for control in decode_batch(view)[1]:
                _, kind = parse_control_key(control.key)
                value = control.value or b""
                if kind == ControlType.SNAPSHOT_HEADER and header is None and not records:
                    header = SnapshotHeaderRecord.decode(value, 0)
                elif kind == ControlType.SNAPSHOT_FOOTER and header is not None:
                    SnapshotFooterRecord.decode(value, 0)
                    footer = True
                else:
                    raise MetadataError(f"unexpected control record type {kind}")
    except (ProtocolError, MetadataError) as exc:
        raise MetadataError(f"snapshot {path.name} is corrupt: {exc}") from exc
    if header is None or not footer:
        raise MetadataError(f"snapshot {path.name} lacks its header or footer")
    return records, header.last_contained_log_timestamp


def delete_snapshots_before(directory: Path, keep: SnapshotId) -> list[Path]:
    """Delete every snapshot older than `keep`; returns what was deleted."""
    gone = []
    for snapshot_id in list_snapshots(directory):
        if snapshot_id < keep:
            path = directory / snapshot_id.file_name
            path.unlink()
            gone.append(path)
    if gone:
        fsync_dir(directory)
    return gone
