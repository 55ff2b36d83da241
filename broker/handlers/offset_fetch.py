"""OffsetFetch (key 9).

Behavior:
- Returns each requested partition's committed offset, leader epoch and
  metadata; a partition without a commit (or an unknown group) gets offset
  -1, epoch -1 and metadata "". Null topics (v2+) means every partition the
  group has committed.
- A group this node does not coordinate (it does not lead the group's
  `__consumer_offsets` partition) is NOT_COORDINATOR; one whose partition is
  still loading COORDINATOR_LOAD_IN_PROGRESS.
- `require_stable` (v7+): a partition for which a transaction's offsets
  (TxnOffsetCommit) wait for its marker is UNSTABLE_OFFSET_COMMIT with offset
  -1, so the consumer retries once the transaction ended; without it the
  last committed offset is answered, as Kafka does.

Version notes: v2 null topics and a top-level error; v3 throttle time; v5
leader epoch; v6 flexible; v7 require_stable; v8 several groups per request;
v9 member id and epoch (only checked for KIP-848 groups, ignored for classic
ones). v0 is gone in Kafka 4.0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.handlers.group_common import group_driver, may_group, may_topic
from strom.coordinator.groups.model import OffsetEntry
from strom.coordinator.metadata.acls import AclOperation
from strom.wire.errors import ErrorCode
from strom.wire.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 9
MIN_VERSION = 1
MAX_VERSION = 9

TOP_LEVEL_ERROR_VERSION = 2
Fetched = list[tuple[str, list[tuple[int, OffsetEntry | None]]]]
Unstable = set[tuple[str, int]]


async def handle(
    broker: BrokerState, request: RequestContext, body: OffsetFetchRequest
) -> OffsetFetchResponse:
    if request.api_version >= 8:
        groups = []
        for group in body.groups:
            wanted = (
                None
                if group.topics is None
                else [(t.name, list(t.partition_indexes)) for t in group.topics]
            )
            error, fetched, refused, unstable = _fetch(
                broker, request, group.group_id, wanted, body.require_stable
            )
            if error == ErrorCode.GROUP_AUTHORIZATION_FAILED:
                fetched = []
            groups.append(
                OffsetFetchResponse.OffsetFetchResponseGroup(
                    group_id=group.group_id,
                    topics=_topics_v8(fetched, refused, unstable),
                    error_code=error,
                )
            )
        return OffsetFetchResponse(groups=groups)
    topics = body.topics
    wanted = None if topics is None else [(t.name, list(t.partition_indexes)) for t in topics]
    error, fetched, refused, unstable = _fetch(
        broker, request, body.group_id, wanted, body.require_stable
    )
    if error == ErrorCode.GROUP_AUTHORIZATION_FAILED and request.api_version >= TOP_LEVEL_ERROR_VERSION:
        fetched = []  # Kafka's answer: the top-level error alone, nothing about the topics
    # v1 has no top-level error: each partition carries the group's (Kafka's getErrorResponse)
    partition_error = error if request.api_version < TOP_LEVEL_ERROR_VERSION else ErrorCode.NONE
    return OffsetFetchResponse(
        topics=[
            OffsetFetchResponse.OffsetFetchResponseTopic(
                name=name,
                partitions=[
                    OffsetFetchResponse.OffsetFetchResponsePartition(
                        p, *_values(None if (name, p) in unstable else entry),
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED if name in refused
                        else ErrorCode.UNSTABLE_OFFSET_COMMIT if (name, p) in unstable
                        else partition_error,
                    )
                    for p, entry in parts
                ],
            )
            for name, parts in fetched
        ],
        error_code=error,
    )


def _fetch(
    broker: BrokerState,
    request: RequestContext,
    group_id: str,
    wanted: list[tuple[str, list[int]]] | None,
    require_stable: bool,
) -> tuple[ErrorCode, Fetched, set[str], Unstable]:
    """(the group's error, the offsets, the named topics refused, the partitions whose offsets
    a transaction still holds when `require_stable`). Topics it may not DESCRIBE are left out
    of "all offsets"; named, their partitions carry TOPIC_AUTHORIZATION_FAILED and no offset,
    in every version."""
    if not may_group(broker, request, AclOperation.DESCRIBE, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, _none(wanted), set(), set()
    error, fetched = _fetch_authorized(broker, group_id, wanted)
    driver = group_driver(broker)
    unstable: Unstable = set()
    if require_stable and not error and driver is not None:
        unstable = driver.machine.unstable_offsets(group_id)
    refused = {
        name for name, _ in fetched if not may_topic(broker, request, AclOperation.DESCRIBE, name)
    }
    if wanted is None:
        return error, [(n, parts) for n, parts in fetched if n not in refused], set(), unstable
    return error, [
        (n, [(p, None) for p, _ in parts] if n in refused else parts) for n, parts in fetched
    ], refused, unstable


def _fetch_authorized(
    broker: BrokerState, group_id: str, wanted: list[tuple[str, list[int]]] | None
) -> tuple[ErrorCode, Fetched]:
    driver = group_driver(broker)
    if driver is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, _none(wanted)
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID, _none(wanted)
    error = driver.coordinator_error(group_id)
    if error:
        return error, _none(wanted)
    return ErrorCode.NONE, driver.machine.fetch_offsets(group_id, wanted)


def _none(wanted: list[tuple[str, list[int]]] | None) -> Fetched:
    return [(name, [(p, None) for p in parts]) for name, parts in wanted or []]


def _values(entry: OffsetEntry | None) -> tuple[int, int, str]:
    if entry is None:
        return -1, -1, ""
    return entry.offset, entry.leader_epoch, entry.metadata


def _topics_v8(
    fetched: Fetched, refused: set[str], unstable: Unstable
) -> list[OffsetFetchResponse.OffsetFetchResponseTopics]:
    return [
        OffsetFetchResponse.OffsetFetchResponseTopics(
            name=name,
            partitions=[
                OffsetFetchResponse.OffsetFetchResponsePartitions(
                    p, *_values(None if (name, p) in unstable else entry),
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED if name in refused
                    else ErrorCode.UNSTABLE_OFFSET_COMMIT if (name, p) in unstable
                    else ErrorCode.NONE,
                )
                for p, entry in parts
            ],
        )
        for name, parts in fetched
    ]
