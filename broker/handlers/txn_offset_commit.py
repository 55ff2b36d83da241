"""TxnOffsetCommit (key 28).

Behavior:
- A transactional producer commits a consumer group's offsets as part of its transaction
  (`sendOffsetsToTransaction`): they are written to the group's `__consumer_offsets`
  partition as the producer's transactional batch and stay invisible (OffsetFetch with
  `require_stable` answers UNSTABLE_OFFSET_COMMIT for them) until the transaction's COMMIT
  marker reaches that partition; an ABORT drops them. The answer is sent once they are
  written.
- First the transaction coordinator is asked about the group's partition (KIP-890), as for
  a transactional produce: v0-4 verify it was added by AddOffsetsToTxn (else
  INVALID_TXN_STATE; v4 TRANSACTION_ABORTABLE); v5 (transactions v2) add it. Coordinator
  errors the client should retry are COORDINATOR_NOT_AVAILABLE (as Kafka's group
  coordinator normalizes them), a fenced producer INVALID_PRODUCER_EPOCH. The question is
  asked under the group partition's verification guard, and the offsets are appended under
  it: if the transaction's marker reaches the partition between the answer and the append
  (a late request, answered by a coordinator that had not yet heard), the append is
  INVALID_TXN_STATE instead of opening a transaction nobody will end, which would hold the
  partition's last stable offset (and `require_stable` offset fetches) back forever. When the
  transaction already has offsets on the partition, the coordinator is not asked (as Kafka
  skips a partition whose transaction is ongoing), and the append is refused the same way
  should the marker come first.
- Authorization first, as Kafka: WRITE on the transactional id
  (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group (GROUP_AUTHORIZATION_FAILED) and
  on each topic (TOPIC_AUTHORIZATION_FAILED). Partitions of unknown topics are
  UNKNOWN_TOPIC_OR_PARTITION and never reach the coordinators. The group checks are Kafka's transactional ones: a missing group is created
  for generation -1 and is ILLEGAL_GENERATION otherwise; given a member or a generation,
  UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID and ILLEGAL_GENERATION (a commit for a group in
  another generation); a rebalance in progress does not refuse it. Metadata longer than
  `offset.metadata.max.bytes` is OFFSET_METADATA_TOO_LARGE. NOT_COORDINATOR /
  COORDINATOR_LOAD_IN_PROGRESS when this broker does not coordinate the group.

Version notes: v1 same as v0; v2 committed leader epoch; v3 generation, member id and group
instance id (and their errors), flexible; v4 TRANSACTION_ABORTABLE (KIP-1050); v5 the
commit adds the group's partition to the transaction (transactions v2; a v5 request while
transaction.version is below 2 is verified as v4).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.drivers.topics import CONSUMER_OFFSETS
from strom.broker.handlers.group_common import committable_partitions, group_driver
from strom.broker.handlers.txn_common import transactions_v2
from strom.broker.security.authorization import allowed
from strom.coordinator.groups.api import CommitPartition, TxnCommitRequest
from strom.coordinator.metadata.acls import AclOperation, ResourceType
from strom.storage import LogAppendError
from strom.storage.log.producer_state import SENTINEL, VerificationGuard
from strom.wire.errors import ErrorCode
from strom.wire.messages.txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from strom.wire.records import NO_SEQUENCE

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 28
MIN_VERSION = 0
MAX_VERSION = 5

GENERIC_ERRORS_VERSION = 4
ADDS_PARTITION_VERSION = 5
RETRIABLE_VERIFICATION = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)
Key = tuple[str, int]


async def handle(
    broker: BrokerState, request: RequestContext, body: TxnOffsetCommitRequest
) -> TxnOffsetCommitResponse:
    valid: list[CommitPartition] = []
    errors: dict[Key, ErrorCode]
    if not allowed(
        broker, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id
    ):
        refused = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        errors = {(t.name, p.partition_index): refused for t in body.topics for p in t.partitions}
    else:
        valid, errors = committable_partitions(broker, request, body.group_id, body.topics)
    if valid:
        errors.update(await _commit(broker, body, request.api_version, valid))
    return TxnOffsetCommitResponse(
        topics=[
            TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(
                        p.partition_index, errors[(topic.name, p.partition_index)]
                    )
                    for p in topic.partitions
                ],
            )
            for topic in body.topics
        ]
    )


async def _commit(
    broker: BrokerState, body: TxnOffsetCommitRequest, version: int, valid: list[CommitPartition]
) -> dict[Key, ErrorCode]:
    keys = [(p.topic, p.partition) for p in valid]
    driver = group_driver(broker)
    if driver is None:
        return dict.fromkeys(keys, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not body.group_id:
        return dict.fromkeys(keys, ErrorCode.INVALID_GROUP_ID)
    error = await driver.ready(body.group_id)
    if error:
        return dict.fromkeys(keys, error)
    error, guard = await _verify(broker, body, version, driver.partition_for(body.group_id))
    if error:
        return dict.fromkeys(keys, error)
    req = TxnCommitRequest(
        group_id=body.group_id,
        producer_id=body.producer_id,
        producer_epoch=body.producer_epoch,
        partitions=valid,
        generation=body.generation_id,
        member_id=body.member_id,
        group_instance_id=body.group_instance_id,
    )
    return await driver.txn_commit(req, guard)


async def _verify(
    broker: BrokerState, body: TxnOffsetCommitRequest, version: int, partition: int
) -> tuple[ErrorCode, VerificationGuard | None]:
    """Ask the transaction coordinator about the group's partition (see the docstring):
    the error, or NONE and the guard to append under (None: nothing to guard)."""
    add = version >= ADDS_PARTITION_VERSION and transactions_v2(broker)
    if not add and not broker.effective_config.transaction_partition_verification_enable:
        return ErrorCode.NONE, None
    key = (CONSUMER_OFFSETS, partition)
    guard = None
    log = broker.logs.get(*key)
    if log is not None:
        try:
            guard = log.start_verification(
                body.producer_id, NO_SEQUENCE, body.producer_epoch, supports_epoch_bump=add
            )
        except LogAppendError as exc:  # a stale epoch, or its previous transaction still open
            if exc.error == ErrorCode.INVALID_PRODUCER_EPOCH:
                return exc.error, None
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if guard is None:  # its transaction is ongoing here: nothing to ask, as for a produce,
            return ErrorCode.NONE, SENTINEL  # but the append must still find it ongoing
    answer = await broker.txn_verifier.verify(
        body.transactional_id,
        body.producer_id,
        body.producer_epoch,
        [key],
        add=add,
        generic_errors=version >= GENERIC_ERRORS_VERSION,
    )
    error = answer.get(key, ErrorCode.NONE)
    if error in RETRIABLE_VERIFICATION:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
    return error, guard
