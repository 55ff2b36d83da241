"""KIP-890 part 1: a transactional produce is verified with the transaction coordinator first.

Kafka (`transaction.partition.verification.enable`, default true, and always for Produce
v12) asks the coordinator, before a producer's first transactional batch of a
transaction reaches a partition, whether that partition was added to the producer's
ongoing transaction (AddPartitionsToTxn v4+ with `verify_only`). A partition that was
not added answers INVALID_TXN_STATE and nothing is written, so a late or zombie batch can
never start a transaction the coordinator does not know about (a "hanging transaction").

How the pieces meet:

1. The produce path asks the log for a guard: `PartitionLog.start_verification(producer
   id, base sequence, epoch)` returns None when the producer already has a transaction
   ongoing on that partition at that epoch (its first batch was verified then; nothing to
   ask), else the partition's `VerificationGuard` for that producer (made on first use);
   it refuses a stale epoch (INVALID_PRODUCER_EPOCH) and a batch of a newer epoch while
   the producer's previous transaction is still open there (CONCURRENT_TRANSACTIONS,
   answered as NOT_ENOUGH_REPLICAS like the coordinator's: the client retries until the
   previous transaction's marker has been written).
2. It calls the installed `TransactionVerifier` once for all such partitions of the
   request and maps its errors as Kafka's ReplicaManager does (`produce_error`).
3. It appends with the guard: the log refuses (INVALID_TXN_STATE) a transactional
   batch that starts a transaction unless the guard is still the producer's current
   one. A marker, or the first transactional batch, clears the guard, so a verification
   answered before an abort marker was written cannot let the batch in after it (the
   ABA race Kafka's VerificationGuard closes).

The transaction coordinator fills in the hook: `BrokerState.txn_verification.verifier =
its_function` (the broker builds the `TransactionVerification` once at start-up). Until one is installed, transactional batches are appended unverified,
which is what Kafka does with verification disabled.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from strom.storage.log.producer_state import SENTINEL, VerificationGuard
from strom.storage.log_errors import LogAppendError
from strom.wire.errors import ErrorCode

if TYPE_CHECKING:
    from strom.broker.core_state import BrokerCore

Key = tuple[str, int]

SUPPORTS_EPOCH_BUMP_VERSION = 12
"""Produce v12 comes from transactions v2 clients (KIP-890 part 2)."""


@dataclass(frozen=True)
class VerifyRequest:
    """What the coordinator is asked: are these partitions part of the ongoing transaction?"""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: list[Key]
    produce_version: int
    """The Produce request's version: v12 clients support transactions v2 (KIP-890 part 2),
    and v11+ understand the generic TRANSACTION_ABORTABLE (KIP-1050)."""


class TransactionVerifier(Protocol):
    """The coordinator's side of the hook: an error per partition (NONE: verified).

    Return the coordinator's own answer (INVALID_TXN_STATE for a partition not in the
    transaction, PRODUCER_FENCED / INVALID_PRODUCER_EPOCH, NOT_COORDINATOR,
    COORDINATOR_NOT_AVAILABLE, CONCURRENT_TRANSACTIONS, ...); the produce path maps it to
    what Produce answers. A partition missing from the result counts as NONE.
    """

    def __call__(
        self, broker: BrokerCore, request: VerifyRequest
    ) -> Awaitable[dict[Key, ErrorCode]]: ...


class TransactionVerification:
    """This broker's installed verifier (None: transactional batches are not verified)."""

    def __init__(self) -> None:
        self.verifier: TransactionVerifier | None = None


RETRIABLE_AS_NOT_ENOUGH_REPLICAS = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)
"""Coordinator errors older clients may not retry: Kafka answers them as NOT_ENOUGH_REPLICAS,
which makes every client retry the produce without a metadata refresh."""


def produce_error(error: ErrorCode) -> tuple[ErrorCode, str | None]:
    """Kafka's translation of a verification error into a Produce partition error and the
    error message it carries (ReplicaManager's postVerificationCallback)."""
    if error == ErrorCode.INVALID_TXN_STATE:
        return error, "Partition was not added to the transaction"
    if error in RETRIABLE_AS_NOT_ENOUGH_REPLICAS:
        return ErrorCode.NOT_ENOUGH_REPLICAS, (
            "Unable to verify the partition has been added to the transaction. "
            f"Underlying error: {error.name}"
        )
    return error, None


@dataclass(frozen=True)
class Refused:
    """A partition the coordinator did not verify: what Produce answers for it."""

    error: ErrorCode
    message: str | None


async def verify_partitions(
    broker: BrokerCore,
    verification: TransactionVerification,
    transactional_id: str,
    produce_version: int,
    batches: dict[Key, tuple[int, int, int]],
) -> dict[Key, VerificationGuard | Refused]:
    """The produce path's hook, before appending transactional batches: `batches` maps each
    partition to its first batch's (producer id, epoch, base sequence). Per partition, the
    guard to append under (SENTINEL when its transaction is already ongoing there) or the
    refusal to answer; a partition missing from the result (no verifier installed, or no
    log here, which the append then reports) is appended without verification."""
    verifier = verification.verifier
    if verifier is None or not batches:
        return {}
    out: dict[Key, VerificationGuard | Refused] = {}
    asking: list[Key] = []
    producer_id, producer_epoch = -1, -1
    for key, (producer_id, producer_epoch, sequence) in batches.items():
        log = broker.logs.get(*key)
        if log is None:
            continue
        try:
            guard = log.start_verification(
                producer_id,
                sequence,
                producer_epoch,
                supports_epoch_bump=produce_version >= SUPPORTS_EPOCH_BUMP_VERSION,
            )
        except LogAppendError as e:  # a stale epoch, or the previous transaction still open
            out[key] = Refused(*produce_error(e.error))
            continue
        if guard is None:
            out[key] = SENTINEL
        else:
            out[key] = guard
            asking.append(key)
    if asking:
        request = VerifyRequest(
            transactional_id, producer_id, producer_epoch, asking, produce_version
        )
        errors = await verifier(broker, request)
        for key in asking:
            error = errors.get(key, ErrorCode.NONE)
            if error != ErrorCode.NONE:
                out[key] = Refused(*produce_error(error))
    return out
