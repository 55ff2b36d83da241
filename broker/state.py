"""Everything a request handler may touch, in one place.

`BrokerState` is this node's `BrokerCore` (identity, configuration, metadata, logs) plus the
services the broker process builds once at start-up (`strom.broker.process.app`) and hands
down as typed fields: replication, the data path's wake-ups, fetch sessions and min.insync
cache, producer ids, transaction verification. Handlers get this object and the
request; they never reach for globals, and two brokers in one process (tests) share nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio

from strom.broker.core_state import BrokerCore
from strom.broker.security.quotas import ClientQuotas

if TYPE_CHECKING:
    from strom.broker.data.fetch_sessions import FetchSessionCache
    from strom.broker.data.lookup import MinIsrCache
    from strom.broker.data.producer_ids import ProducerIdManager
    from strom.broker.data.txn_verifier import CoordinatorVerifier
    from strom.broker.data.txn_verify import TransactionVerification
    from strom.broker.data.waiters import DataWaiters
    from strom.broker.replication.replication_manager import ReplicationManager
    from strom.broker.security.authorization import BrokerAuthorizer
    from strom.broker.security.listeners import ListenerTls


@dataclass(kw_only=True)
class BrokerState(BrokerCore):
    """The services are set by the broker process right after this object is made (each is
    built from it): `strom.broker.process.app.build_services`."""

    replication: ReplicationManager = field(init=False, repr=False)
    """This broker's part in replicating partition data (leaders, followers, the ISR)."""
    waiters: DataWaiters = field(init=False, repr=False)
    """Parked fetches, acks=all produces and DeleteRecords, woken when a partition changes."""
    fetch_sessions: FetchSessionCache = field(init=False, repr=False)
    """Incremental fetch sessions (KIP-227)."""
    min_isr: MinIsrCache = field(init=False, repr=False)
    """min.insync.replicas per topic, for acks=all."""
    producer_ids: ProducerIdManager = field(init=False, repr=False)
    """Producer ids for InitProducerId, in blocks from the controller."""
    txn_verification: TransactionVerification = field(init=False, repr=False)
    """The transaction coordinator's verification hook for transactional produces (KIP-890)."""
    txn_verifier: CoordinatorVerifier = field(init=False, repr=False)
    """This broker's questions to transaction coordinators (installed in `txn_verification`
    once the coordinator runs; TxnOffsetCommit asks it too)."""
    tls: ListenerTls | None = None
    """The TLS contexts of this broker's SSL listeners (set by the broker process)."""
    authorizer: BrokerAuthorizer | None = None
    """ACL decisions when `authorizer.class.name` is set (None: every request is allowed)."""
    quotas: ClientQuotas = field(default_factory=lambda: ClientQuotas(trio.current_time), repr=False)
    """Clients' usage against their quotas (byte rates, request time, controller mutations)."""
