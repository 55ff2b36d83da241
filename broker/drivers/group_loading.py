"""Reading `__consumer_offsets` back at start-up (blocking: run it in a worker thread)."""

from __future__ import annotations

import logging

from strom.coordinator.groups.records import GroupRecord, OffsetRecord, parse_record
from strom.storage import OffsetOutOfRange, PartitionLog
from strom.wire.errors import ProtocolError
from strom.wire.records import decode_batch, iter_batches

log = logging.getLogger("strom.groups")
READ_BYTES = 5 * 1024 * 1024
"""offsets.load.buffer.size's default."""


def read_partition(
    partition_log: PartitionLog, read_bytes: int = READ_BYTES
) -> list[OffsetRecord | GroupRecord]:
    """Every group record of one partition, in log order (control batches skipped)."""
    out: list[OffsetRecord | GroupRecord] = []
    offset = partition_log.log_start_offset
    end = partition_log.log_end_offset
    while offset < end:
        try:
            data = partition_log.read(offset, read_bytes).read_bytes()
        except OffsetOutOfRange:
            break
        if not data:
            break
        for header, view in iter_batches(data):
            offset = header.next_offset
            if header.is_control:
                continue
            for record in decode_batch(view, header)[1]:
                try:
                    parsed = parse_record(record.key, record.value)
                except ProtocolError as exc:
                    log.warning("%s: skipping an unreadable record: %s", partition_log.name, exc)
                    continue
                if parsed is not None:
                    out.append(parsed)
    return out
