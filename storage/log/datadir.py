"""What a data directory (one of log.dirs) holds at start-up, before its logs are opened.

The layout and crash rules are in `strom.storage.log.log_manager`. This reads the directory-level
files (clean-shutdown marker, recovery-point, log-start, cleaner and high-watermark
checkpoints), removes
partitions left half-deleted by a crash, and lists the partition directories to open.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from strom.storage import disk
from strom.storage.log.checkpoint import CheckpointError, read_offsets

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
CLEANER_FILE = "cleaner-offset-checkpoint"
HIGH_WATERMARK_FILE = "replication-offset-checkpoint"
DELETE_SUFFIX = "-delete"
STRAY_SUFFIX = "-stray"
METADATA_TOPIC = "__cluster_metadata"

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


def parse_log_dir_name(name: str) -> TopicPartition | None:
    """(topic, partition) for a partition directory name, None for anything else."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit() or "." in partition:
        return None
    return topic, int(partition)


@dataclass
class DataDirScan:
    clean: bool
    """The clean-shutdown marker is there (and the checkpoints are readable)."""
    recovery_points: dict[TopicPartition, int] = field(default_factory=dict)
    log_starts: dict[TopicPartition, int] = field(default_factory=dict)
    clean_offsets: dict[TopicPartition, int] = field(default_factory=dict)
    high_watermarks: dict[TopicPartition, int] = field(default_factory=dict)
    partitions: list[tuple[Path, TopicPartition]] = field(default_factory=list)


def scan_data_dir(directory: Path) -> DataDirScan:
    """Read a data directory's checkpoints and list its partitions (creating it if new)."""
    disk.makedirs(directory)
    scan = DataDirScan(clean=disk.exists(directory / CLEAN_SHUTDOWN_FILE))
    try:
        scan.recovery_points = read_offsets(directory / RECOVERY_POINT_FILE)
        scan.log_starts = read_offsets(directory / LOG_START_FILE)
    except CheckpointError as exc:
        log.warning("%s; recovering every log in %s", exc, directory)
        scan.recovery_points, scan.log_starts, scan.clean = {}, {}, False
    try:
        scan.clean_offsets = read_offsets(directory / CLEANER_FILE)
    except CheckpointError as exc:  # "everything is dirty", never an error
        log.warning("%s; the cleaner starts over in %s", exc, directory)
    try:
        scan.high_watermarks = read_offsets(directory / HIGH_WATERMARK_FILE)
    except CheckpointError as exc:  # replicated logs start from their log start: safe, slower
        log.warning("%s; high watermarks start at each log start in %s", exc, directory)
    for child in sorted(directory / name for name in disk.listdir(directory)):
        if not disk.is_dir(child):
            continue
        if child.name.endswith(DELETE_SUFFIX):
            log.info("removing partially deleted log %s", child)
            disk.rmtree(child)
            continue
        if child.name.endswith(STRAY_SUFFIX):
            log.warning(
                "%s is a partition log set aside as stray (not in the cluster metadata when it "
                "was found); it is not served: remove it by hand once you no longer need it",
                child,
            )
            continue
        tp = parse_log_dir_name(child.name)
        if tp is not None and tp[0] != METADATA_TOPIC:
            scan.partitions.append((child, tp))
    return scan
