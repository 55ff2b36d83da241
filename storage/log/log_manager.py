"""All partition logs of this broker, across its data directories (log.dirs).

Per data directory::

    <topic>-<partition>/               one PartitionLog (see strom.storage.log.log_loader)
    <topic>-<partition>.<hex>-delete/  a deleted partition not yet removed
    <topic>-<partition>.<hex>-stray/   a log found at start-up that the cluster metadata does
                                       not place here: set aside, never deleted (as Kafka's
                                       stray logs), for the operator to remove
    recovery-point-offset-checkpoint   `topic partition offset`: flushed up to here
    log-start-offset-checkpoint        `topic partition offset`: DeleteRecords/retention
    cleaner-offset-checkpoint          `topic partition offset`: the log cleaner's first
                                       dirty offset (written by `checkpoint_cleaner`)
    replication-offset-checkpoint      `topic partition offset`: the high watermark (Kafka's
                                       file): a replicated log reopens with it, not its end
    .kafka_cleanshutdown               clean-shutdown marker, JSON
                                       {"version":0,"brokerEpoch":N} (Kafka's file): N is
                                       the broker epoch of the process that wrote it (-1:
                                       never registered)

The checkpoints use Kafka's text format (strom.storage.log.checkpoint). Crash recovery:
the marker is written last by `close()` after every log of the directory has
been flushed and checkpointed, and removed by `load()` once the directory is
open, before any append; without it each log scans the segments past its
recovery point. Checkpoints are rewritten by `checkpoint()` (the trio layer
calls it every log.flush.offset.checkpoint.interval.ms, in a worker thread)
and on close; a lost or stale checkpoint only costs a longer scan (recovery
point) or brings back records below a not-yet-checkpointed log start offset,
exactly as in Kafka. The marker's broker epoch is what the next start sends as
BrokerRegistration's PreviousBrokerEpoch (`previous_broker_epoch`: -1 unless every directory
had a marker naming the same epoch): the controller takes a mismatch for an unclean shutdown
(KIP-966). `__cluster_metadata-*` directories belong to the KRaft
layer and are skipped.

Storage failures: a log whose write, flush or swap failed is offline (it refuses
appends, still serves reads). A directory is offline when it cannot be loaded or
its checkpoints cannot be written (`fail_dir`): every log in it goes offline with
it, until the broker restarts. A partition this broker should host but cannot
open (EMFILE, no online dir) is `unopened`. `offline_partitions` lists all three,
for the broker's report to the controller (strom.broker.replication.partitions).
"""

from __future__ import annotations

import collections
import functools
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Container, Iterable, Sequence
from pathlib import Path

from strom.storage import disk
from strom.storage.durable import atomic_replace, fsync_dir
from strom.storage.log.checkpoint import write_offsets
from strom.storage.log.datadir import (
    CLEAN_SHUTDOWN_FILE,
    CLEANER_FILE,
    DELETE_SUFFIX,
    HIGH_WATERMARK_FILE,
    LOG_START_FILE,
    RECOVERY_POINT_FILE,
    STRAY_SUFFIX,
    TopicPartition,
    scan_data_dir,
)
from strom.storage.log.deleter import DirectoryDeleter
from strom.storage.log.log_config import LogConfig
from strom.storage.log.partition import PartitionLog
from strom.storage.log_errors import KafkaStorageError, LogError

log = logging.getLogger(__name__)


class LogManager:
    """Creates, loads, flushes, checkpoints and deletes partition logs."""

    def __init__(
        self,
        dirs: Sequence[Path],
        clock: Callable[[], int],
        *,
        topic_config: Callable[[str], LogConfig] | None = None,
    ) -> None:
        if not dirs:
            raise ValueError("LogManager needs at least one log directory")
        self.dirs = [Path(d) for d in dirs]
        self.clock = clock
        self._topic_config = topic_config or (lambda _topic: LogConfig())
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._flush_candidates: set[PartitionLog] = set()
        """Logs that rolled or appended under a finite flush policy: all `flush_due` looks at,
        so its cost follows the traffic rather than the partition count."""
        self.on_flush_wanted: Callable[[], None] | None = None
        """Told when the first log becomes a flush candidate (from any thread): the broker's
        flush loop sleeps while there is none."""
        self._dir_of: dict[TopicPartition, Path] = {}
        self._per_dir: collections.Counter[Path] = collections.Counter()
        """Logs per directory, kept with `_dir_of`: a create picks the emptiest in O(dirs)."""
        self.offline_dirs: set[Path] = set()
        self.unopened: dict[TopicPartition, str] = {}
        """Partitions to host that could not be opened, with the reason (retried by the
        broker on the next metadata change)."""
        self._cleaner_lock = threading.Lock()
        self._deleter = DirectoryDeleter()
        self.broker_epoch = -1
        """This process's broker epoch, written into the clean-shutdown markers by `close`."""
        self.previous_broker_epoch = -1
        """The epoch the markers `load` found named (-1: an unclean shutdown, or none)."""
        self._marker_epochs: list[int] = []

    # --- start-up ---------------------------------------------------------------------------

    def load(self) -> None:
        """Open every partition directory, recovering those without a clean-shutdown marker."""
        self._marker_epochs = []
        for directory in self.dirs:
            try:
                self._load_dir(directory)
            except (OSError, LogError) as exc:
                log.error("log dir %s is offline: %s", directory, exc)
                self.offline_dirs.add(directory)
        epochs = set(self._marker_epochs)
        if len(self._marker_epochs) == len(self.dirs) and len(epochs) == 1:
            self.previous_broker_epoch = epochs.pop()

    def _load_dir(self, directory: Path) -> None:
        scan = scan_data_dir(directory)
        todo: list[tuple[Path, TopicPartition]] = []
        for child, tp in scan.partitions:
            if tp in self._logs:
                log.error("%s duplicates %s; ignoring it", child, self._dir_of[tp])
            else:
                todo.append((child, tp))
        started = time.monotonic()
        log.info(
            "loading %d logs from %s (%s)",
            len(todo),
            directory,
            "clean shutdown" if scan.clean else "unclean shutdown" if todo else "no logs yet",
        )
        for n, (child, tp) in enumerate(todo, 1):
            opened = PartitionLog.open(
                child,
                tp[0],
                tp[1],
                self._topic_config(tp[0]),
                clock=self.clock,
                clean=scan.clean,
                recovery_point=scan.recovery_points.get(tp, 0),
                log_start_offset=scan.log_starts.get(tp),
                high_watermark=scan.high_watermarks.get(tp),
            )
            opened.clean_offset = scan.clean_offsets.get(tp)
            # after an unclean shutdown its entry in `directory` may still be only in the page
            # cache (a kill -9 keeps that, a later power cut does not): the first flush syncs it
            opened.parent_unsynced = not scan.clean
            opened.checkpointed_high_watermark = scan.high_watermarks.get(
                tp, opened.log_start_offset
            )
            if not scan.clean and opened.flush_owed():
                # The tail past the recovery point may be only in the page cache (written by
                # the last incarnation, or its fsync failed). With flush.messages asking for it,
                # sync it before this replica reports it: a follower's first fetch would
                # otherwise count it toward the ISR, and a power cut then loses it.
                try:
                    opened.flush()
                except KafkaStorageError as exc:
                    log.error("%s", exc)  # the log is offline now and reported as such
            self.adopt(directory, opened)
            if n % 100 == 0 or n == len(todo):
                log.info("loaded %d/%d logs from %s", n, len(todo), directory)
        if scan.clean:
            self._marker_epochs.append(_marker_epoch(directory / CLEAN_SHUTDOWN_FILE))
            disk.unlink(directory / CLEAN_SHUTDOWN_FILE)
            fsync_dir(directory)
        log.info("log dir %s ready in %.3fs", directory, time.monotonic() - started)

    # --- lookup -----------------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def partitions(self, topics: Container[str] | None = None) -> Iterable[PartitionLog]:
        """Every log, or those of `topics`."""
        if topics is None:
            return list(self._logs.values())
        return [p for (topic, _index), p in self._logs.items() if topic in topics]

    def offline_partitions(self) -> list[TopicPartition]:
        """Partitions hosted here that cannot serve: failed logs (an offline dir's included)
        and partitions that could not be opened."""
        failed = [tp for tp, p in list(self._logs.items()) if p.failed is not None]
        return failed + [tp for tp in list(self.unopened) if tp not in self._logs]

    def is_offline(self, topic: str, partition: int) -> bool:
        """Hosted here but unable to serve (see `offline_partitions`)."""
        found = self._logs.get((topic, partition))
        return (topic, partition) in self.unopened if found is None else found.failed is not None

    def dir_of(self, topic: str, partition: int) -> Path | None:
        """The data directory holding a partition (DescribeLogDirs)."""
        return self._dir_of.get((topic, partition))

    # --- create / delete --------------------------------------------------------------------

    def create(self, topic: str, partition: int, config: LogConfig) -> PartitionLog:
        """The partition's log, created in the data dir with the fewest partitions if missing."""
        existing = self._logs.get((topic, partition))
        if existing is not None:
            return existing
        directory = self.place()
        return self.adopt(directory, self.open_new(directory, topic, partition, config))

    def place(self, planned: collections.Counter[Path] | None = None) -> Path:
        """The online data dir holding the fewest logs, counting `planned` ones (a batch of
        creations in flight), which it then counts the choice in."""
        online = [d for d in self.dirs if d not in self.offline_dirs]
        if not online:
            raise OSError("no online log directory")
        extra = planned if planned is not None else collections.Counter()
        directory = min(online, key=lambda d: self._per_dir[d] + extra[d])
        extra[directory] += 1
        return directory

    def open_new(
        self, directory: Path, topic: str, partition: int, config: LogConfig
    ) -> PartitionLog:
        """Open (creating if missing) a log's files without registering it: touches no
        manager state, so a worker thread may run it while the event loop serves."""
        path = directory / f"{topic}-{partition}"
        fresh = not disk.exists(path)
        new = PartitionLog.open(path, topic, partition, config, clock=self.clock, clean=fresh)
        new.parent_unsynced = fresh  # its first flush fsyncs `directory` (off the loop)
        return new

    def cannot_open(self, topic: str, partition: int, reason: str) -> bool:
        """Record that a partition to host could not be opened; True the first time."""
        new = (topic, partition) not in self.unopened
        self.unopened[(topic, partition)] = reason
        return new

    def fail_dir(self, directory: Path, reason: str) -> None:
        """Take a data directory offline (Kafka's log dir failure): its logs stop taking
        appends, checkpoints skip it, nothing new is placed in it, until a restart."""
        if directory in self.offline_dirs:
            return
        self.offline_dirs.add(directory)
        log.error(
            "log dir %s is offline: %s; its partitions are reported offline until a restart "
            "(fix or free the disk, then restart)",
            directory, reason,
        )  # fmt: skip
        for tp, p in list(self._logs.items()):
            if self._dir_of.get(tp) == directory and p.failed is None:
                p.failed = f"log dir {directory} is offline: {reason}"

    def adopt(self, directory: Path, partition_log: PartitionLog) -> PartitionLog:
        """Register a log from `open_new` (event loop); one already there wins."""
        tp = (partition_log.topic, partition_log.partition)
        self.unopened.pop(tp, None)
        existing = self._logs.get(tp)
        if existing is not None:
            partition_log.close(clean=False)
            return existing
        self._logs[tp] = self._track(partition_log)
        self._dir_of[tp] = directory
        self._per_dir[directory] += 1
        return partition_log

    def delete(self, topic: str, partition: int) -> None:
        """Close the log, rename it to `<name>.<hex>-delete`; the deleter thread removes it."""
        # durable or not: a reappearing log is deleted again
        target = self._close_and_rename(topic, partition, DELETE_SUFFIX)
        if target is not None:
            self._deleter.remove(target)

    def set_aside(self, topic: str, partition: int) -> Path | None:
        """Close the log and rename it to `<name>.<hex>-stray`, where it is kept, unserved:
        what the metadata does not know at start-up (a wiped or foreign metadata log, a topic
        deleted while this node was down) is not proof enough to delete data. Returns the
        new directory (None if the log was not open)."""
        # if the rename is lost to a crash, the next start sets it aside again
        return self._close_and_rename(topic, partition, STRAY_SUFFIX)

    def _close_and_rename(self, topic: str, partition: int, suffix: str) -> Path | None:
        """Stop tracking the partition, close its log and rename its directory to
        `<name>.<hex><suffix>` (not synced); the new path, or None if it was not open."""
        tp = (topic, partition)
        self.unopened.pop(tp, None)
        closing = self._logs.pop(tp, None)
        directory = self._dir_of.pop(tp, None)
        if directory is not None:
            self._per_dir[directory] -= 1
        if closing is None or directory is None:
            return None
        closing.close(clean=False)
        target = closing.directory.with_name(f"{closing.directory.name}.{uuid.uuid4().hex}{suffix}")
        disk.replace(closing.directory, target)
        return target

    def wait_for_deletions(self) -> None:
        """Block until deleted partitions' directories are removed (tests)."""
        self._deleter.wait()

    # --- durability -------------------------------------------------------------------------

    def _track(self, partition_log: PartitionLog) -> PartitionLog:
        partition_log.on_flush_wanted = functools.partial(self._want_flush, partition_log)
        return partition_log

    def _want_flush(self, partition_log: PartitionLog) -> None:
        first = not self._flush_candidates
        self._flush_candidates.add(partition_log)
        if first and self.on_flush_wanted is not None:
            self.on_flush_wanted()

    def has_flush_candidates(self) -> bool:
        """Whether any log may want a flush (`flush_due` has something to look at)."""
        return bool(self._flush_candidates)

    def flush_due(self, now_ms: int) -> list[PartitionLog]:
        """Logs whose flush.messages / flush.ms policy (or a segment roll) wants a flush now."""
        due = []
        for p in list(self._flush_candidates):
            if p.failed is not None or p.closed or p.log_end_offset <= p.recovery_point:
                self._flush_candidates.discard(p)  # nothing to flush until it appends again
            elif p.flush_due(now_ms):
                due.append(p)
        return due

    def checkpoint(self) -> None:
        """Rewrite every dir's recovery-point and log-start checkpoints (worker thread)."""
        for directory in self.dirs:
            if directory not in self.offline_dirs:
                try:
                    self._checkpoint_dir(directory)
                except OSError as exc:
                    self.fail_dir(directory, f"checkpoint failed: {exc}")

    def _checkpoint_dir(self, directory: Path) -> None:
        # list(): a worker thread runs this while the event loop may add or drop logs
        logs = {tp: p for tp, p in list(self._logs.items()) if self._dir_of.get(tp) == directory}
        write_offsets(
            directory / RECOVERY_POINT_FILE, {tp: p.recovery_point for tp, p in logs.items()}
        )
        write_offsets(
            directory / LOG_START_FILE, {tp: p.log_start_offset for tp, p in logs.items()}
        )
        write_offsets(
            directory / HIGH_WATERMARK_FILE, {tp: p.high_watermark for tp, p in logs.items()}
        )

    def truncate_to(
        self, topic: str, partition: int, offset: int, *, checkpoint: bool = True
    ) -> None:
        """Truncate a log and persist its checkpoints at once.

        Truncating below the log start offset lowers it; the log-start checkpoint
        must say so before anything is written past the new end, or recovery after
        a crash would take the stale, higher start and hide those records.

        A checkpoint rewrites every partition of the directory, so one per truncated log is
        quadratic when many are cut together (a follower's first fetch after a failover).
        Such a caller passes `checkpoint=False` and calls `checkpoint_partitions` once for
        all of them before its next schedule point, as Kafka's LogManager.truncateTo takes a
        map of partitions and checkpoints each directory once.
        """
        found = self._logs.get((topic, partition))
        if found is None:
            raise KeyError(f"no log for {topic}-{partition}")
        found.truncate_to(offset)
        if checkpoint:
            self.checkpoint_partitions([(topic, partition)])

    def checkpoint_partitions(self, keys: Iterable[TopicPartition]) -> None:
        """Persist the checkpoints of each directory that holds one of `keys`, once."""
        directories = {self._dir_of.get(key) for key in keys}
        for directory in directories:
            if directory is not None and directory not in self.offline_dirs:
                self._checkpoint_dir(directory)

    def checkpoint_cleaner(self, partition: PartitionLog) -> None:
        """Rewrite the cleaner-offset-checkpoint of the partition's directory (cleaner thread)."""
        directory = self._dir_of.get((partition.topic, partition.partition))
        if directory is None or directory in self.offline_dirs:
            return
        with self._cleaner_lock:
            offsets = {
                tp: p.clean_offset
                for tp, p in list(self._logs.items())
                if self._dir_of.get(tp) == directory and p.clean_offset is not None
            }
            try:
                write_offsets(directory / CLEANER_FILE, offsets)
            except OSError as exc:
                log.warning("could not write %s in %s: %s", CLEANER_FILE, directory, exc)

    def enforce_retention(self, now_ms: int) -> int:
        """Apply retention.ms / retention.bytes to every log; segments deleted."""
        return sum(p.enforce_retention(now_ms) for p in self._logs.values() if p.failed is None)

    def close(self) -> None:
        """Flush and close every log, write checkpoints, then the clean-shutdown markers."""
        for directory in self.dirs:
            if directory in self.offline_dirs:
                continue
            ok = True
            for tp, p in self._logs.items():
                if self._dir_of.get(tp) != directory:
                    continue
                try:
                    p.close()
                except (OSError, LogError) as exc:
                    log.error("closing %s failed: %s", p.name, exc)
                    ok = False
                ok = ok and p.failed is None
            try:
                self._checkpoint_dir(directory)
                if ok:
                    marker = directory / CLEAN_SHUTDOWN_FILE
                    body = {"version": 0, "brokerEpoch": self.broker_epoch}
                    atomic_replace(marker, json.dumps(body, separators=(",", ":")).encode())
            except OSError as exc:
                log.error("could not checkpoint %s: %s", directory, exc)
        for p in self._logs.values():
            p.close(clean=False)


def _marker_epoch(path: Path) -> int:
    """The broker epoch a clean-shutdown marker names (-1 if it names none or is unreadable)."""
    try:
        value = json.loads(disk.read_file(path)).get("brokerEpoch", -1)
    except (OSError, ValueError, AttributeError):
        return -1
    return value if isinstance(value, int) and not isinstance(value, bool) else -1
