"""What the group state machine hands out and waits on: released replies and writes in flight.

Membership and the offset store both park responses and stage records; `Outbox` is the one
place they go through, so the caller sees a single ordered stream of writes (`take_writes`)
and replies (`take_replies`) whichever half produced them. Each write carries the callback
that applies it once its outcome comes back (`complete`); until then it is in flight.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from strom.coordinator.groups.api import KeyValue, PartitionKey, Released, Reply, Write
from strom.wire.errors import ErrorCode

log = logging.getLogger("strom.groups")

OnWritten = Callable[[int, ErrorCode], None]
"""What to do once a write's outcome is known: (now, the error to report, NONE if written)."""


def storage_error(error: ErrorCode) -> ErrorCode:
    """How a failed append is reported to clients: Kafka's coordinator mapping.

    (GroupCoordinatorService / GroupMetadataManager: a partition that is not
    there, not replicated enough before or after the append, or whose ISR did
    not acknowledge the write within offsets.commit.timeout.ms ->
    COORDINATOR_NOT_AVAILABLE, so the client retries; not the leader or a failed disk -> NOT_COORDINATOR, so it looks
    the coordinator up again; a batch too large -> UNKNOWN_SERVER_ERROR; any
    other error as it is.)
    """
    if error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.INVALID_FETCH_SIZE,
    ):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


def ignore_outcome(now: int, error: ErrorCode) -> None:
    """A write nobody waits for (its failure is logged by `Outbox.complete`)."""


@dataclass
class InFlight:
    """A write handed out and not yet reported back."""

    write: Write
    on_written: OnWritten
    offsets: tuple[PartitionKey, ...] = ()
    """Offsets it commits, so a group deletion staged meanwhile tombstones them too."""


class Outbox:
    def __init__(self) -> None:
        self._replies: list[Reply] = []
        self._writes: list[Write] = []
        self._in_flight: dict[int, InFlight] = {}
        self._tokens = itertools.count(1)
        self._abandoned: set[int] = set()
        """Writes handed out whose groups were unloaded before their outcome came back."""

    def reply(self, waiter: int | None, result: Released) -> None:
        if waiter is not None:
            self._replies.append((waiter, result))

    def take_replies(self) -> list[Reply]:
        out, self._replies = self._replies, []
        return out

    def write(
        self,
        group_id: str,
        batch: list[KeyValue],
        on_written: OnWritten,
        offsets: tuple[PartitionKey, ...] = (),
        producer: tuple[int, int] | None = None,
    ) -> None:
        """Stage one batch for the group's partition; `on_written` runs with its outcome.
        `producer`: the transaction whose batch it is (TxnOffsetCommit)."""
        write = Write(next(self._tokens), group_id, batch, producer)
        self._writes.append(write)
        self._in_flight[write.token] = InFlight(write, on_written, offsets)

    def take_writes(self) -> list[Write]:
        out, self._writes = self._writes, []
        return out

    def complete(self, now: int, token: int, error: ErrorCode) -> str | None:
        """Apply a write's outcome; the group it was for, or None if it was abandoned."""
        written = self._in_flight.pop(token, None)
        if written is None:
            if token in self._abandoned:  # its group was unloaded meanwhile: already answered
                self._abandoned.discard(token)
                return None
            raise ValueError(f"write {token} is not outstanding")
        group_id = written.write.group_id
        if error:
            log.warning(
                "group %s: writing %d records failed: %s",
                group_id, len(written.write.records), error.name,
            )  # fmt: skip
        written.on_written(now, storage_error(error) if error else ErrorCode.NONE)
        return group_id

    def in_flight(self) -> Iterator[InFlight]:
        return iter(list(self._in_flight.values()))

    def has_writes_in_flight(self, group_id: str) -> bool:
        return any(p.write.group_id == group_id for p in self._in_flight.values())

    def abandon(self, now: int, doomed: Callable[[str], bool]) -> None:
        """Fail the writes of the groups `doomed` selects with NOT_COORDINATOR; writes not
        yet handed out are dropped, those handed out have their late outcome ignored."""
        failing = [t for t, f in self._in_flight.items() if doomed(f.write.group_id)]
        while failing:  # a failed write's handler may stage another: fail that one too
            for token in failing:
                self._abandoned.add(token)
                self._in_flight.pop(token).on_written(now, ErrorCode.NOT_COORDINATOR)
            failing = [t for t, f in self._in_flight.items() if doomed(f.write.group_id)]
        untaken = {w.token for w in self._writes if doomed(w.group_id)}
        self._abandoned -= untaken  # never handed out: no outcome will come back
        self._writes = [w for w in self._writes if not doomed(w.group_id)]
