"""Reading `__consumer_offsets` back at start-up (blocking: run it in a worker thread)."""

from __future__ import annotations

import logging

from strom.broker.drivers.coordinator_topic import read_batches
from strom.coordinator.groups.records import LoadedRecord, TxnMarker, parse_record
from strom.storage import PartitionLog
from strom.wire.errors import ProtocolError
from strom.wire.records import ControlType, parse_end_txn_marker

log = logging.getLogger("strom.groups")
READ_BYTES = 5 * 1024 * 1024
"""offsets.load.buffer.size's default."""


def read_partition(partition_log: PartitionLog, read_bytes: int = READ_BYTES) -> list[LoadedRecord]:
    """Every group record of one partition, in log order, with the transaction markers that
    decide whether transactional offsets count."""
    out: list[LoadedRecord] = []
    for header, records in read_batches(partition_log, read_bytes):
        if header.is_control:
            try:
                marker = parse_end_txn_marker(records[0]) if records else None
            except ProtocolError:
                marker = None  # another control type: nothing for the groups
            if marker is not None:
                out.append(TxnMarker(header.producer_id, marker.control_type is ControlType.COMMIT))
            continue
        producer = header.producer_id if header.is_transactional else -1
        for record in records:
            try:
                parsed = parse_record(record.key, record.value, producer)
            except ProtocolError as exc:
                log.warning("%s: skipping an unreadable record: %s", partition_log.name, exc)
                continue
            if parsed is not None:
                out.append(parsed)
    return out
