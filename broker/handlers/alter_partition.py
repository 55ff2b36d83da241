"""AlterPartition (key 56): a partition leader asks the controller to change its ISR.

Behavior:
- Answered only on a controller listener (`controller.listener.names`); on a client listener
  the connection closes, as Kafka's SocketServer does for an API the listener does not enable.
- The active controller validates each partition in Kafka's order
  (`strom.coordinator.controller.isr`: STALE_BROKER_EPOCH for the whole request, then
  UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, NOT_CONTROLLER for epochs newer than it knows,
  FENCED_LEADER_EPOCH, INVALID_REQUEST for a non-leader, INVALID_UPDATE_VERSION for an old
  partition epoch, INVALID_REQUEST for a bad ISR, INELIGIBLE_REPLICA for a fenced or
  re-registered member) and writes one PartitionChangeRecord per changed ISR; each partition
  answers its state after the change (leader, leader epoch, ISR, partition epoch).
- A controller that is not the active one answers NOT_CONTROLLER in the top-level error code,
  so the leader's sender retries at the active controller.
- Brokers send it from `strom.broker.replication.replication_manager` when a follower falls out of the
  ISR (replica.lag.time.max.ms) or catches up.

Version notes: v2 flexible, topic ids (v0-v1, by topic name, are gone from Kafka 4); v3
new_isr_with_epochs (KIP-903: each member's broker epoch, so a follower that restarted since
the leader saw it is INELIGIBLE_REPLICA).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.wire.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 56
MIN_VERSION = 2
MAX_VERSION = 3


async def handle(
    broker: BrokerState, request: RequestContext, body: AlterPartitionRequest
) -> AlterPartitionResponse:
    return await broker.controller.alter_partition(body, request.api_version)
