"""KRaft's checkpoint format: a whole image (or a few records) as bytes, and back. Pure.

Used for `bootstrap.checkpoint` (the feature levels and first SCRAM users `strom format`
writes) and to read the snapshots of the single-node metadata log older Strom versions wrote
(`single_node_log`).
The bytes are v2 RecordBatches with offsets counting from 0 and partitionLeaderEpoch = the
snapshot epoch::

    control batch   one control record: key (version 0, type 3 SNAPSHOT_HEADER),
                    value SnapshotHeaderRecord v0 (version 0, lastContainedLogTimestamp)
    data batches    metadata records (at most RECORDS_PER_BATCH each), framed as in
                    `metadata_records`
    control batch   one control record: key (version 0, type 4 SNAPSHOT_FOOTER),
                    value SnapshotFooterRecord v0

A file in this format is written whole or not at all (`strom.storage.durable.atomic_replace`),
so bytes that fail to decode (header, footer or CRC) are damage: `decode_checkpoint` raises
MetadataError naming the file rather than guess.

`image_records` lists the records that rebuild an image from empty, in an order replay accepts:
feature levels (metadata.version first), broker registrations, each topic's TopicRecord and
PartitionRecords, ConfigRecords, one ProducerIdsRecord, then the SCRAM credentials
(UserScramCredentialRecord), client quotas (ClientQuotaRecord) and ACLs
(AccessControlEntryRecord). The Raft snapshot of `raft_entries` carries the same records.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple

from strom.coordinator.metadata.image import METADATA_VERSION, MetadataImage
from strom.coordinator.metadata.metadata_records import MetadataError, encode_batch
from strom.coordinator.metadata.metadata_records import decode_batch as decode_metadata_batch
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

RECORDS_PER_BATCH = 1000


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


def encode_checkpoint(records: Iterable[Message], epoch: int, timestamp: int) -> bytes:
    """`records` in the checkpoint format above."""
    parts: list[Buffer] = [
        _control_batch(
            ControlType.SNAPSHOT_HEADER, SnapshotHeaderRecord(0, timestamp), 0, epoch, timestamp
        )
    ]
    offset = 1
    chunk: list[Message] = []
    for record in (*records, None):
        if record is not None:
            chunk.append(record)
        if chunk and (record is None or len(chunk) == RECORDS_PER_BATCH):
            parts.append(encode_batch(chunk, base_offset=offset, epoch=epoch, timestamp=timestamp))
            offset += len(chunk)
            chunk = []
    parts.append(
        _control_batch(
            ControlType.SNAPSHOT_FOOTER, SnapshotFooterRecord(0), offset, epoch, timestamp
        )
    )
    return b"".join(parts)


def decode_checkpoint(data: Buffer, name: str) -> tuple[list[Message], int]:
    """The records of checkpoint bytes and the header's lastContainedLogTimestamp;
    MetadataError naming `name` (the file) if they are damaged."""
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
        raise MetadataError(f"snapshot {name} is corrupt: {exc}") from exc
    if header is None or not footer:
        raise MetadataError(f"snapshot {name} lacks its header or footer")
    return records, header.last_contained_log_timestamp


# --- bootstrap.checkpoint ------------------------------------------------------------------


class Bootstrap(NamedTuple):
    """What `bootstrap.checkpoint` holds: the feature levels a new cluster starts with, and the
    first users' SCRAM credentials (`strom format --add-scram`); the first active controller
    writes both into the metadata log."""

    levels: dict[str, int]
    scram: list[UserScramCredentialRecord]


def encode_bootstrap(
    features: Mapping[str, int], timestamp: int, scram: Sequence[UserScramCredentialRecord] = ()
) -> bytes:
    """`bootstrap.checkpoint` (epoch 0): the feature levels, metadata.version first, then the
    SCRAM credentials."""
    names = sorted(features, key=lambda name: (name != METADATA_VERSION, name))
    records: list[Message] = [FeatureLevelRecord(n, features[n]) for n in names]
    return encode_checkpoint([*records, *scram], 0, timestamp)


def decode_bootstrap(data: Buffer, name: str) -> Bootstrap:
    """What `bootstrap.checkpoint` bytes hold; MetadataError if they hold anything else or are
    damaged."""
    records, _ = decode_checkpoint(data, name)
    bootstrap = Bootstrap({}, [])
    for record in records:
        if isinstance(record, FeatureLevelRecord):
            bootstrap.levels[record.name] = record.feature_level
        elif isinstance(record, UserScramCredentialRecord):
            bootstrap.scram.append(record)
        else:
            raise MetadataError(
                f"{name} holds a {record.NAME}; only feature levels and SCRAM credentials "
                "belong there"
            )
    return bootstrap
