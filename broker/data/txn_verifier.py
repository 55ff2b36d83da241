"""A partition leader asks the transaction coordinator about a transactional write (KIP-890).

Before a producer's first transactional batch of a transaction reaches a partition (a
Produce, or a TxnOffsetCommit's offsets reaching `__consumer_offsets`), the leader asks the
coordinator of its transactional id, as Kafka's AddPartitionsToTxnManager does:

- **verify** (part 1; Produce v0-11, TxnOffsetCommit v0-4): is the partition in the
  producer's ongoing transaction? (AddPartitionsToTxn v4+ with `verify_only`). A partition
  not added is refused, so a late or zombie write cannot start a transaction the coordinator
  does not know of.
- **add** (part 2, transactions v2; Produce v12, TxnOffsetCommit v5): the write itself adds
  the partition to the transaction (`verify_only` false), as a v2 client no longer sends
  AddPartitionsToTxn or AddOffsetsToTxn.

`CoordinatorVerifier` is built once at start-up and installed as the produce path's
verifier. When this node coordinates the id the driver answers in-process; otherwise one
AddPartitionsToTxn v5 request goes to the coordinator on the inter-broker listener. The
answer is per partition, translated as Kafka's leader translates it: PRODUCER_FENCED becomes
INVALID_PRODUCER_EPOCH (what producers expect here), TRANSACTION_ABORTABLE becomes
INVALID_TXN_STATE for a client that predates KIP-1050 (Produce v10 and older, TxnOffsetCommit
v3 and older), and no answer is NETWORK_EXCEPTION. The caller maps the rest (the produce
path: `strom.broker.data.txn_verify.produce_error`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from strom.broker.data.inter_broker import BrokerPeers, by_topic
from strom.broker.data.txn_verify import VerifyRequest
from strom.broker.drivers.peer import PeerUnavailable
from strom.broker.drivers.topics import TRANSACTION_STATE
from strom.wire.errors import ErrorCode
from strom.wire.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)

if TYPE_CHECKING:
    from strom.broker.core_state import BrokerCore

log = logging.getLogger("strom.transactions")

Key = tuple[str, int]
ADD_PARTITIONS_TO_TXN_VERSION = 5
PRODUCE_GENERIC_ERRORS_VERSION = 11
PRODUCE_ADD_VERSION = 12
TXN_OFFSET_COMMIT_GENERIC_ERRORS_VERSION = 4
TXN_OFFSET_COMMIT_ADD_VERSION = 5


class CoordinatorVerifier:
    """This broker's questions to the transaction coordinators (built once at start-up, with
    its connections to them). Installed as the produce path's verifier (`__call__`)."""

    def __init__(self, state: BrokerCore) -> None:
        self._state = state
        self._peers = BrokerPeers(state, f"broker-{state.node_id}-txn-verify")

    async def __call__(self, broker: BrokerCore, request: VerifyRequest) -> dict[Key, ErrorCode]:
        """The produce path's verification hook (`strom.broker.data.txn_verify`)."""
        version = request.produce_version
        return await self.verify(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.partitions,
            add=version >= PRODUCE_ADD_VERSION,
            generic_errors=version == PRODUCE_GENERIC_ERRORS_VERSION,
        )

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[Key],
        *,
        add: bool,
        generic_errors: bool,
    ) -> dict[Key, ErrorCode]:
        """Ask the coordinator (see the module docstring); the error per partition, NONE when
        the write may go ahead."""
        wanted = list(dict.fromkeys(partitions))
        answer = await self._ask(transactional_id, producer_id, producer_epoch, wanted, add)
        out = {}
        for key in wanted:
            error = answer.get(key, ErrorCode.NONE)
            if error == ErrorCode.PRODUCER_FENCED:
                error = ErrorCode.INVALID_PRODUCER_EPOCH
            elif error == ErrorCode.TRANSACTION_ABORTABLE and not generic_errors:
                error = ErrorCode.INVALID_TXN_STATE
            out[key] = error
        return out

    async def _ask(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[Key],
        add: bool,
    ) -> dict[Key, ErrorCode]:
        state = self._state
        driver = state.transaction_coordinator()
        topic = state.image.topic(TRANSACTION_STATE)
        if driver is None or topic is None:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        # the transaction coordinator's modules load with it, on first need (coordinator_start)
        from strom.coordinator.groups.records import partition_for

        index = partition_for(transactional_id, len(topic.partitions))
        leader = state.image.partition(TRANSACTION_STATE, index)
        if leader is None or leader.leader < 0:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if leader.leader == state.node_id:
            error = driver.coordinator_error(transactional_id)
            if error:
                return dict.fromkeys(partitions, error)
            if add:
                added = await driver.add_partitions(
                    transactional_id, producer_id, producer_epoch, partitions, client_tv=2
                )
                return dict.fromkeys(partitions, added)
            return driver.verify_partitions(
                transactional_id, producer_id, producer_epoch, partitions
            )
        return await self._ask_remote(
            leader.leader, transactional_id, producer_id, producer_epoch, partitions, add
        )

    async def _ask_remote(
        self,
        coordinator: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[Key],
        add: bool,
    ) -> dict[Key, ErrorCode]:
        request = AddPartitionsToTxnRequest(
            transactions=[
                AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
                    transactional_id=transactional_id,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    verify_only=not add,
                    topics=[
                        AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name, indexes)
                        for name, indexes in by_topic(partitions).items()
                    ],
                )
            ]
        )
        try:
            response = await self._peers.request(
                coordinator, request, ADD_PARTITIONS_TO_TXN_VERSION
            )
        except PeerUnavailable as exc:
            log.info(
                "verifying %s with broker %d: no answer (%s)", transactional_id, coordinator, exc
            )
            return dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)
        assert isinstance(response, AddPartitionsToTxnResponse)
        if response.error_code:
            top = ErrorCode(response.error_code)
            if top == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
                top = ErrorCode.INVALID_TXN_STATE  # not the client's to see (Kafka's rule)
            return dict.fromkeys(partitions, top)
        out: dict[Key, ErrorCode] = {}
        for result in response.results_by_transaction:
            if result.transactional_id != transactional_id:
                continue
            for answered in result.topic_results:
                for p in answered.results_by_partition:
                    out[(answered.name, p.partition_index)] = ErrorCode(p.partition_error_code)
        return out

    async def aclose(self) -> None:
        await self._peers.aclose()
