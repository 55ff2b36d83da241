"""Reading the partitions of one Fetch: limits, errors and epochs, as Kafka's readFromLog.

`read_partitions` walks the partitions in order with the request's byte
budget: each gets min(partition_max_bytes, what is left); until the first
partition that returns data, a partition may exceed both limits by its whole
first batch (KIP-74), so a consumer never gets stuck behind a batch larger
than its limits. Reads return `ReadResult`s (file ranges, no copy), so a
long-polling fetch can re-check cheaply. A range of SENDFILE_MIN_BYTES or more
is never copied: the response carries it as a `FileChunk` and the server sends
it with `os.sendfile` straight from the page cache (`broker/network/send.py`); smaller
ranges are copied when the response is built, which costs fewer syscalls than
splitting the response around them. A partition of
a topic with compression.type=zstd answers UNSUPPORTED_COMPRESSION_TYPE to
Fetch v4-v9, which predate zstd, as Kafka's does.

read_committed (isolation level 1): a consumer reads up to the last stable offset, and
each partition carries the aborted transactions overlapping the batches read
(`PartitionLog.read(aborted=True)`, from the segments' `.txnindex`), [] when none; the
consumer drops those transactions' batches. A log with no aborted transaction from the
fetched segment on answers [] without touching an index, so read_committed costs what
read_uncommitted does (bench/read_committed.py). read_uncommitted carries null.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Set
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from strom.broker import runtime
from strom.broker.data.fetch_sessions import CachedPartition
from strom.broker.data.file_chunk import FileChunk
from strom.broker.data.lookup import Located, locate
from strom.broker.replication.divergence import diverging_epoch
from strom.broker.replication.replica_set import StaleFetch
from strom.broker.replication.replication_manager import ReplicationManager
from strom.storage import LogError, ReadResult
from strom.wire.errors import ErrorCode
from strom.wire.message import Records
from strom.wire.messages.fetch import FetchResponse
from strom.wire.primitives import ZERO_UUID

if TYPE_CHECKING:
    from strom.broker.core_state import BrokerCore
    from strom.coordinator.metadata.image import MetadataImage
    from strom.storage import PartitionLog

READ_COMMITTED = 1
FIRST_ZSTD_FETCH = 10
THREAD_COPY_BYTES = 1 << 20
SENDFILE_MIN_BYTES = 16 * 1024
PartitionData = FetchResponse.PartitionData


@dataclass
class PartitionRead:
    """One partition's outcome; `result` holds the records' file range when there are any."""

    part: CachedPartition
    topic: str | None
    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    result: ReadResult | None = None
    diverging: tuple[int, int] | None = None
    records: bytes | None = None
    readable: bool = True
    """False for partitions refused before any read (unknown topic id, unknown partition)."""
    zstd_topic: bool = False
    """compression.type=zstd: Kafka refuses such partitions to Fetch below v10."""
    preferred_read_replica: int = -1
    """KIP-392: the follower the consumer should fetch from instead (no records then)."""
    log: PartitionLog | None = None
    """The log read (None when refused before reading)."""

    @property
    def size(self) -> int:
        return 0 if self.result is None else self.result.size

    @property
    def sendfile(self) -> bool:
        """Whether the records go out by sendfile rather than being copied."""
        result = self.result
        return result is not None and result.file is not None and result.size >= SENDFILE_MIN_BYTES

    def load(self) -> None:
        """Copy the records into memory (a worker thread may call this for big responses)."""
        if self.sendfile:
            return
        if self.result is not None and self.result.size and self.records is None:
            try:
                self.records = self.result.read_bytes()
            except OSError:
                self.error, self.records = ErrorCode.KAFKA_STORAGE_ERROR, b""
                self.high_watermark = self.last_stable_offset = self.log_start_offset = -1

    def to_response(self, version: int, isolation_level: int) -> PartitionData:
        if self.zstd_topic and version < FIRST_ZSTD_FETCH and self.error == ErrorCode.NONE:
            self.error, self.result = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, None
            self.high_watermark = self.last_stable_offset = self.log_start_offset = -1
        self.load()
        error = self.error
        if error == ErrorCode.KAFKA_STORAGE_ERROR and version <= 5:
            error = ErrorCode.NOT_LEADER_OR_FOLLOWER  # older clients do not retry storage errors
        data = PartitionData(
            partition_index=self.part.partition,
            error_code=error,
            high_watermark=self.high_watermark,
            last_stable_offset=self.last_stable_offset,
            log_start_offset=self.log_start_offset,
            aborted_transactions=None,
            preferred_read_replica=-1 if error else self.preferred_read_replica,
            records=b"",
        )
        if error in _NOT_READ:
            data.aborted_transactions = []  # Kafka's answer for a partition it never reads
        if error != ErrorCode.NONE:
            return data
        if isolation_level == READ_COMMITTED:
            aborted = self.result.aborted_transactions if self.result is not None else None
            data.aborted_transactions = [
                FetchResponse.AbortedTransaction(t.producer_id, t.first_offset)
                for t in aborted or ()
            ]
        if self.diverging is not None:
            data.diverging_epoch = FetchResponse.EpochEndOffset(*self.diverging)
        if self.sendfile:
            assert self.result is not None
            # An opaque sized chunk: the encoder only takes its len() (wire.message.SizedChunk).
            data.records = cast(Records, FileChunk(self.result))
        else:
            data.records = self.records or b""
        return data


_NOT_READ = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID)
"""Errors Kafka answers before reading (an empty aborted-transactions list, not null)."""


@dataclass(frozen=True, slots=True)
class Replica:
    """A follower replica's fetch: its broker id and the broker epoch it names (-1: none).
    `quiet_since_ms`: in a follower's session, a partition read now that was not read before
    had the follower caught up at that time (`strom.broker.data.follower_sessions`)."""

    replica_id: int
    broker_epoch: int = -1
    quiet_since_ms: int = -1


@dataclass(frozen=True, slots=True)
class Consumer:
    """A consumer's Fetch v11+ (KIP-392): it may be served by a follower, and the leader may
    name a preferred read replica for its `rack_id` on the request's `listener`."""

    rack_id: str
    listener: str


def read_partitions(
    broker: BrokerCore,
    replication: ReplicationManager,
    image: MetadataImage,
    parts: list[CachedPartition],
    uses_topic_ids: bool,
    max_bytes: int,
    isolation_level: int,
    replica: Replica | Consumer | None = None,
    authorized: Callable[[str], bool] | None = None,
    *,
    min_one: bool = True,
) -> list[PartitionRead]:
    """Read every partition in order within `max_bytes` (see the module docstring); a
    partition of a topic `authorized` refuses is TOPIC_AUTHORIZATION_FAILED, unread; a
    follower `replica` reads up to the log end and its fetch offsets feed the leader's
    `ReplicationManager`; a v11+ `Consumer` may read a follower replica here (up to its high
    watermark) and may be told to read elsewhere (`preferred_read_replica`). `min_one`
    False: other partitions of the answer already hold records (no KIP-74 overshoot)."""
    out: list[PartitionRead] = []
    budget = max_bytes
    for part in parts:
        read = _read_one(
            broker, replication, image, part, uses_topic_ids, budget, min_one, isolation_level,
            replica, authorized,
        )  # fmt: skip
        if read.size > 0:
            min_one = False
        budget = max(0, budget - read.size)
        out.append(read)
    return out


def reread_changed(
    broker: BrokerCore,
    replication: ReplicationManager,
    image: MetadataImage,
    reads: list[PartitionRead],
    changed: Set[tuple[str, int]],
    uses_topic_ids: bool,
    max_bytes: int,
    isolation_level: int,
    replica: Replica | Consumer | None = None,
    authorized: Callable[[str], bool] | None = None,
) -> list[PartitionRead]:
    """A parked fetch woken for the `changed` partitions: read those again, in place, and keep
    the other reads (nothing they depend on changed). Each re-read partition gets what the
    others leave of `max_bytes`, and may exceed it by its first batch (KIP-74) when no other
    partition returns data."""
    out = list(reads)
    for i, read in enumerate(out):
        if read.topic is None or (read.topic, read.part.partition) not in changed:
            continue
        others = sum(r.size for j, r in enumerate(out) if j != i)
        out[i] = _read_one(
            broker, replication, image, read.part, uses_topic_ids, max(0, max_bytes - others),
            others == 0, isolation_level, replica, authorized,
        )  # fmt: skip
    return out


def refresh_offsets(reads: list[PartitionRead]) -> None:
    """Set each read partition's high watermark, last stable offset and log start to the log's
    now (a follower's parked fetch is not woken by high watermark moves; its answer carries
    the current ones)."""
    for read in reads:
        if read.error == ErrorCode.NONE and read.log is not None and read.diverging is None:
            _set_offsets(read, read.log)


def _resolve(image: MetadataImage, part: CachedPartition, uses_topic_ids: bool) -> str | None:
    if not uses_topic_ids:
        return part.topic
    topic = image.topic_by_id(part.topic_id) if part.topic_id != ZERO_UUID else None
    part.topic = None if topic is None else topic.name
    return part.topic


def _read_one(
    broker: BrokerCore,
    replication: ReplicationManager,
    image: MetadataImage,
    part: CachedPartition,
    uses_topic_ids: bool,
    budget: int,
    min_one: bool,
    isolation_level: int,
    replica: Replica | Consumer | None = None,
    authorized: Callable[[str], bool] | None = None,
) -> PartitionRead:
    name = _resolve(image, part, uses_topic_ids)
    if name is None:
        return PartitionRead(part, None, ErrorCode.UNKNOWN_TOPIC_ID, readable=False)
    if authorized is not None and not authorized(name):
        return PartitionRead(part, name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, readable=False)
    if image.partition(name, part.partition) is None:
        return PartitionRead(part, name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, readable=False)
    consumer = replica if isinstance(replica, Consumer) else None
    found = locate(
        broker, name, part.partition, part.current_leader_epoch, image,
        require_leader=consumer is None,
    )  # fmt: skip
    if not isinstance(found, Located):
        return PartitionRead(part, name, found)
    log = found.log
    if isinstance(replica, Replica):
        return _read_replica(
            replication, image, found, name, part, budget, min_one, replica
        )
    read = PartitionRead(
        part, name, ErrorCode.NONE, log.high_watermark, log.last_stable_offset, log.log_start_offset
    )
    read.log = log
    read.zstd_topic = log.config.compression_type == "zstd"
    if consumer is not None and found.image.leader == broker.node_id:
        read.preferred_read_replica = replication.preferred_read_replica(
            (name, part.partition), part.fetch_offset, consumer.rack_id, consumer.listener
        )
        if read.preferred_read_replica >= 0:
            return read  # Kafka skips the read: the consumer goes to that replica
    try:
        if part.last_fetched_epoch >= 0 and _diverged(read, log, part):
            return read
        committed = isolation_level == READ_COMMITTED
        limit = read.last_stable_offset if committed else read.high_watermark
        max_bytes = max(0, min(part.max_bytes, budget))
        read.result = log.read(part.fetch_offset, max_bytes, min_one, limit, aborted=committed)
    except LogError as exc:
        return PartitionRead(part, name, exc.error)
    except OSError:
        return PartitionRead(part, name, ErrorCode.KAFKA_STORAGE_ERROR)
    if consumer is not None and read.size > 0 and found.image.leader != broker.node_id:
        replication.served_consumer((name, part.partition))
    return read


def _read_replica(
    replication: ReplicationManager,
    image: MetadataImage,
    found: Located,
    name: str,
    part: CachedPartition,
    budget: int,
    min_one: bool,
    replica: Replica,
) -> PartitionRead:
    """A follower's fetch from this leader: checked against the assignment and the follower's
    broker epoch, answered with a diverging epoch or records up to the log END, and recorded
    (the high watermark may move) before the answer's high watermark is taken."""
    partition, log = found
    if replica.replica_id not in partition.replicas:
        return PartitionRead(part, name, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    registration = image.broker(replica.replica_id)
    if replica.broker_epoch >= 0 and (
        registration is None or replica.broker_epoch < registration.epoch
    ):  # a fetch from an older incarnation of the follower (Kafka: stale fetch state)
        return PartitionRead(part, name, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    read = PartitionRead(part, name, ErrorCode.NONE, log=log)
    try:
        if part.last_fetched_epoch >= 0 and _diverged(read, log, part):
            _set_offsets(read, log)
            return read
        if not log.log_start_offset <= part.fetch_offset <= log.log_end_offset:
            raise LogError(ErrorCode.OFFSET_OUT_OF_RANGE, "fetch offset outside the log")
        replication.follower_fetched(
            (name, part.partition), replica.replica_id, part.fetch_offset,
            part.follower_log_start, replica.broker_epoch, replica.quiet_since_ms,
        )  # fmt: skip
        max_bytes = max(0, min(part.max_bytes, budget))
        read.result = log.read(part.fetch_offset, max_bytes, min_one, None)
    except LogError as exc:
        return PartitionRead(part, name, exc.error)
    except StaleFetch:  # an older incarnation than one this leader heard from (KIP-903)
        return PartitionRead(part, name, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    except OSError:
        return PartitionRead(part, name, ErrorCode.KAFKA_STORAGE_ERROR)
    _set_offsets(read, log)
    return read


def _set_offsets(read: PartitionRead, log: PartitionLog) -> None:
    read.high_watermark = log.high_watermark
    read.last_stable_offset = log.last_stable_offset
    read.log_start_offset = log.log_start_offset


def _diverged(read: PartitionRead, log: PartitionLog, part: CachedPartition) -> bool:
    """v12+ LastFetchedEpoch: whether the log diverged from the fetcher (then `read` says where).

    Raises OffsetOutOfRange-like LogErrors the way Kafka's readRecords does.
    """
    diverging = diverging_epoch(log, part.fetch_offset, part.last_fetched_epoch)
    if part.fetch_offset < log.log_start_offset or (
        diverging is not None and min(diverging) < 0
    ):
        raise LogError(ErrorCode.OFFSET_OUT_OF_RANGE, "cannot place the last fetched epoch")
    if diverging is None:
        return False
    read.diverging = diverging
    return True


async def load_records(reads: list[PartitionRead]) -> None:
    """Copy the records of `reads`; beyond THREAD_COPY_BYTES in a worker thread, so a
    50 MiB response never stalls the event loop (1 MiB of page-cache preads is ~0.25 ms)."""
    if sum(r.size for r in reads if not r.sendfile) > THREAD_COPY_BYTES:
        await runtime.to_thread(_load_all, reads)
    else:
        for r in reads:
            r.load()


def _load_all(reads: list[PartitionRead]) -> None:
    for r in reads:
        r.load()


def topic_responses(
    reads: list[PartitionRead], version: int, isolation_level: int
) -> list[FetchResponse.FetchableTopicResponse]:
    """Group consecutive partitions of the same topic, as Kafka's FetchResponse.of does."""
    topics: list[FetchResponse.FetchableTopicResponse] = []
    last: tuple[str, uuid.UUID] | None = None
    for read in reads:
        key = (read.part.topic or "", read.part.topic_id)
        if key != last or not topics:
            topics.append(
                FetchResponse.FetchableTopicResponse(
                    topic=read.part.topic or "", topic_id=read.part.topic_id
                )
            )
            last = key
        topics[-1].partitions.append(read.to_response(version, isolation_level))
    return topics
