"""Start-up: recover the metadata log and rebuild the image from snapshot + log tail.

The image is the latest snapshot with every later batch replayed on top (or
the whole log when there is no snapshot). If the log ends before the snapshot
does (its tail was lost), the log restarts at the snapshot's end offset, as
KRaft truncates to a snapshot; a log that starts after the snapshot ends has
lost records and refuses to load. Blocking: run it in a worker thread.
"""

from __future__ import annotations

from pathlib import Path

from strom.coordinator.metadata.image import MetadataImage, Provenance
from strom.coordinator.metadata.log import DEFAULT_SEGMENT_BYTES, MetadataLog
from strom.coordinator.metadata.metadata_records import MetadataError
from strom.coordinator.metadata.snapshot import list_snapshots, read_snapshot


def load_metadata(
    metadata_dir: str | Path, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES
) -> tuple[MetadataLog, MetadataImage]:
    """Open the log under `metadata_dir` and build its latest image (see module doc)."""
    metadata_log = MetadataLog.open(metadata_dir, segment_bytes=segment_bytes)
    try:
        snapshots = list_snapshots(metadata_log.directory)
        image, start = MetadataImage.EMPTY, 0
        if snapshots:
            image = read_snapshot(metadata_log.directory, snapshots[-1])
            start = snapshots[-1].end_offset
            if metadata_log.end_offset < start:
                metadata_log.reset(start)
        if metadata_log.start_offset > start:
            raise MetadataError(
                f"metadata log starts at {metadata_log.start_offset} but the latest snapshot "
                f"ends at {start}: records in between are missing"
            )
        delta, provenance = image.delta(), image.provenance
        for batch in metadata_log.read(start):
            for record in batch.records:
                delta.replay(record)
            provenance = Provenance(batch.last_offset, batch.epoch, batch.timestamp)
        return metadata_log, delta.apply(provenance)
    except BaseException:
        metadata_log.close()
        raise
