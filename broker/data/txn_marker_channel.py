"""How the transaction coordinator's markers reach the partitions (Kafka's
TransactionMarkerChannelManager's sending half), and what a leader does with them.

- `write_markers_here`: the WriteTxnMarkers work of a partition leader, for the handler and
  for this node's own partitions: the marker is appended through the data path
  (`strom.broker.data.txn_markers.write_txn_markers`: acks=all, so NONE means the ISR holds
  it), and on a `__consumer_offsets` partition the group coordinator then commits or drops
  the producer's transactional offsets of that partition's groups.
- `BrokerMarkerChannel`: the coordinator's `MarkerChannel`. Partitions are grouped by their
  leader in the metadata image; this node's own are written in-process, others' through
  one WriteTxnMarkers (v1) request per leader on the inter-broker listener. A partition
  whose topic or partition no longer exists is NONE (Kafka drops it: nothing can read its
  marker); one without a leader, or whose leader did not answer, is NOT_LEADER_OR_FOLLOWER
  and NETWORK_EXCEPTION, which the coordinator retries.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

import trio

from strom.broker.data.inter_broker import BrokerPeers, by_topic
from strom.broker.data.txn_markers import write_txn_markers
from strom.broker.drivers.peer import PeerUnavailable
from strom.broker.drivers.topics import CONSUMER_OFFSETS
from strom.coordinator.transactions.txn_api import MarkerSend
from strom.wire.errors import ErrorCode
from strom.wire.messages.write_txn_markers import WriteTxnMarkersRequest, WriteTxnMarkersResponse

if TYPE_CHECKING:
    from strom.broker.core_state import BrokerCore
    from strom.broker.data.lookup import MinIsrCache
    from strom.broker.data.waiters import DataWaiters
    from strom.broker.replication.replication_manager import ReplicationManager

log = logging.getLogger("strom.transactions")

Key = tuple[str, int]
WRITE_TXN_MARKERS_VERSION = 1
MARKER_TRANSACTION_VERSION = 0
"""The transaction version partition leaders check markers under. WriteTxnMarkers v1 does
not carry the transaction's version, so leaders hold every marker to Kafka 4.0's rule: its
epoch may not be older than the producer's (a transactions v2 marker carries the bumped
epoch, which passes)."""


async def write_markers_here(
    state: BrokerCore,
    replication: ReplicationManager,
    waiters: DataWaiters,
    min_isr: MinIsrCache,
    partitions: Iterable[Key],
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    commit: bool,
) -> dict[Key, ErrorCode]:
    """Write one marker to each partition this broker leads and wait for its ISR; then end
    the producer's transactional offsets on `__consumer_offsets` partitions."""
    results = await write_txn_markers(
        state,
        replication,
        waiters,
        min_isr,
        partitions,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        coordinator_epoch=coordinator_epoch,
        commit=commit,
        transaction_version=MARKER_TRANSACTION_VERSION,
    )
    groups = state.groups
    for (topic, index), error in results.items():
        if topic == CONSUMER_OFFSETS and error == ErrorCode.NONE and groups is not None:
            groups.complete_transaction(index, producer_id, commit)
    return results


class BrokerMarkerChannel:
    """The transaction coordinator's `MarkerChannel` over this broker."""

    def __init__(
        self,
        state: BrokerCore,
        replication: ReplicationManager,
        waiters: DataWaiters,
        min_isr: MinIsrCache,
    ) -> None:
        self._state = state
        self._replication = replication
        self._waiters = waiters
        self._min_isr = min_isr
        self._peers = BrokerPeers(state, f"broker-{state.node_id}-txn-markers")

    async def write(self, send: MarkerSend) -> dict[Key, ErrorCode] | None:
        image = self._state.image
        results: dict[Key, ErrorCode] = {}
        by_leader: dict[int, list[Key]] = {}
        for key in sorted(send.partitions):
            partition = image.partition(*key)
            if partition is None:
                log.info(
                    "transactional id %s: %s-%d no longer exists; its marker is not needed",
                    send.transactional_id, *key,
                )  # fmt: skip
                results[key] = ErrorCode.NONE
            elif partition.leader < 0:
                results[key] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                by_leader.setdefault(partition.leader, []).append(key)

        async def to_leader(leader: int, keys: list[Key]) -> None:
            results.update(await self._write_via(leader, keys, send))

        async with trio.open_nursery() as nursery:
            for leader, keys in by_leader.items():
                nursery.start_soon(to_leader, leader, keys)
        return results

    async def _write_via(self, leader: int, keys: list[Key], send: MarkerSend) -> dict[Key, ErrorCode]:
        if leader == self._state.node_id:
            return await write_markers_here(
                self._state,
                self._replication,
                self._waiters,
                self._min_isr,
                keys,
                producer_id=send.producer_id,
                producer_epoch=send.producer_epoch,
                coordinator_epoch=send.coordinator_epoch,
                commit=send.commit,
            )
        request = WriteTxnMarkersRequest(
            markers=[
                WriteTxnMarkersRequest.WritableTxnMarker(
                    producer_id=send.producer_id,
                    producer_epoch=send.producer_epoch,
                    transaction_result=send.commit,
                    topics=[
                        WriteTxnMarkersRequest.WritableTxnMarkerTopic(topic, indexes)
                        for topic, indexes in by_topic(keys).items()
                    ],
                    coordinator_epoch=send.coordinator_epoch,
                )
            ]
        )
        try:
            response = await self._peers.request(leader, request, WRITE_TXN_MARKERS_VERSION)
        except PeerUnavailable as exc:
            log.info("markers to broker %d: no answer (%s); retrying", leader, exc)
            return dict.fromkeys(keys, ErrorCode.NETWORK_EXCEPTION)
        assert isinstance(response, WriteTxnMarkersResponse)
        results = dict.fromkeys(keys, ErrorCode.NETWORK_EXCEPTION)
        for marker in response.markers:
            if marker.producer_id != send.producer_id:
                continue
            for answered in marker.topics:
                for p in answered.partitions:
                    if (answered.name, p.partition_index) in results:
                        results[(answered.name, p.partition_index)] = ErrorCode(p.error_code)
        return results

    async def aclose(self) -> None:
        await self._peers.aclose()
