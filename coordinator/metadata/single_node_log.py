"""The metadata log older Strom versions wrote on a single node, read once to migrate it. Pure.

Until the single node became a one-voter Raft quorum it kept its own log in
`<metadata.log.dir>/__cluster_metadata-0/`, which `strom.storage.raft.single_node_log` finds
(log segments or snapshots, no `quorum-state`) and hands over as bytes:

- segments `<20-digit base offset>.log`: v2 RecordBatches back to back, one batch per
  controller command, each record's value a framed metadata record (`metadata_records`),
  partitionLeaderEpoch the epoch of the start that wrote it, CreateTime the append time;
- snapshots `<20-digit end offset>-<10-digit epoch>.checkpoint` in KRaft's checkpoint format
  (`kraft_checkpoint`), the image as of offset `end - 1`.

`image_of` rebuilds the image the old start-up would have: the newest snapshot, then every
batch from its end on; a log that ends before the snapshot is ignored (the old loader restarted
the log there), one that starts after it has lost records (MetadataError). The image's
provenance (last offset, epoch, timestamp) is the last batch's, or the snapshot's. The caller
makes it the Raft snapshot the one-voter quorum starts from, and the old files go.
"""

from __future__ import annotations

from collections.abc import Iterable

from strom.coordinator.metadata.image import MetadataImage, Provenance
from strom.coordinator.metadata.kraft_checkpoint import decode_checkpoint
from strom.coordinator.metadata.metadata_records import MetadataError, decode_batch
from strom.storage.raft.raft_store import SnapshotId
from strom.wire.primitives import Buffer


def image_of(
    snapshot: tuple[SnapshotId, Buffer] | None, batches: Iterable[Buffer]
) -> MetadataImage:
    """The image the old log holds: `snapshot` (its id and checkpoint bytes; None if there is
    none), then `batches` (every batch of the log, in offset order)."""
    image, start = MetadataImage.EMPTY, 0
    if snapshot is not None:
        snapshot_id, data = snapshot
        records, timestamp = decode_checkpoint(
            data, f"{snapshot_id.end_offset}-{snapshot_id.epoch}"
        )
        provenance = Provenance(snapshot_id.end_offset - 1, snapshot_id.epoch, timestamp)
        image, start = MetadataImage.EMPTY.apply_all(records, provenance), snapshot_id.end_offset
    delta, provenance, first = image.delta(), image.provenance, True
    for data in batches:
        batch = decode_batch(data)
        if first and batch.base_offset > start:
            raise MetadataError(
                f"the metadata log starts at {batch.base_offset} but the latest snapshot ends "
                f"at {start}: records in between are missing"
            )
        first = False
        if batch.last_offset < start:
            continue
        for record in batch.records:
            delta.replay(record)
        provenance = Provenance(batch.last_offset, batch.epoch, batch.timestamp)
    return delta.apply(provenance)
