"""This broker's requests to other brokers on the inter-broker listener, one connection each.

The transaction coordinator writes markers through partition leaders (WriteTxnMarkers) and
partition leaders verify transactions with their coordinators (AddPartitionsToTxn v4+), as
Kafka's brokers do over `inter.broker.listener.name`. `BrokerPeers` keeps one lazily opened
`PeerConnection` per node, following the node's registered endpoint, secured as that listener
asks (TLS, and SASL with `sasl.mechanism.inter.broker.protocol`), as replica fetches are.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import TYPE_CHECKING

from strom.broker.drivers.peer import PeerConnection, PeerUnavailable
from strom.broker.security.peer import PeerSecurity
from strom.config.quorum import Address
from strom.wire.message import Message

if TYPE_CHECKING:
    from strom.broker.core_state import BrokerCore

REQUEST_TIMEOUT_S = 30.0
Key = tuple[str, int]
"""Kafka's request.timeout.ms default, bounding one inter-broker request."""


def by_topic(partitions: Iterable[Key]) -> dict[str, list[int]]:
    """(topic, partition) pairs as the per-topic lists requests carry, in first-seen order."""
    out: dict[str, list[int]] = {}
    for topic, index in partitions:
        out.setdefault(topic, []).append(index)
    return out


class BrokerPeers:
    def __init__(self, state: BrokerCore, client_id: str) -> None:
        self._state = state
        self._client_id = client_id
        self._connections: dict[int, PeerConnection] = {}
        self._security = PeerSecurity.to_brokers(state.config)
        self._correlation = itertools.count(1)

    def address(self, node_id: int) -> Address | None:
        """The node's endpoint on the inter-broker listener, None if it has none registered."""
        registration = self._state.image.broker(node_id)
        if registration is None:
            return None
        endpoint = registration.endpoint(self._state.config.inter_broker_listener)
        return None if endpoint is None else Address(endpoint.host, endpoint.port)

    async def request(
        self, node_id: int, body: Message, version: int, timeout_s: float = REQUEST_TIMEOUT_S
    ) -> Message:
        """Send `body` to `node_id` and return its response; PeerUnavailable if none came."""
        address = self.address(node_id)
        if address is None:
            raise PeerUnavailable(f"broker {node_id} has no endpoint on the inter-broker listener")
        connection = self._connections.get(node_id)
        if connection is None or connection.address != address:
            if connection is not None:
                await connection.aclose()
            connection = self._connections[node_id] = PeerConnection(
                address, self._client_id, self._security
            )
        return await connection.request(body, version, next(self._correlation), timeout_s)

    async def aclose(self) -> None:
        for connection in self._connections.values():
            await connection.aclose()
        self._connections.clear()
