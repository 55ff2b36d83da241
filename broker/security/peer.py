"""How a node secures its connection to another node's listener: TLS, then SASL.

A node reaches other nodes on two kinds of listener: the controllers' (the first of
`controller.listener.names`: Raft, registration and heartbeats, forwarded admin requests) and
the inter-broker one (replica fetches). `PeerSecurity.for_listener` reads what that listener
asks for: its security protocol, its ssl.* settings (trust store for the peer, key store as the
client certificate) and, for SASL, the mechanism (`sasl.mechanism.controller.protocol`,
`sasl.mechanism.inter.broker.protocol`) with the user named in the listener's JAAS entry.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from strom.broker.security.sasl_client import SaslClient
from strom.broker.security.tls import peer_context
from strom.config import BrokerConfig


@dataclass(frozen=True)
class PeerSecurity:
    ssl_context: ssl.SSLContext | None
    sasl: Callable[[], SaslClient] | None
    """A fresh client exchange per connection (None: no SASL)."""

    @classmethod
    def for_listener(cls, config: BrokerConfig, listener: str, mechanism: str) -> PeerSecurity | None:
        """What connecting to another node's `listener` takes (None: plaintext, no SASL)."""
        protocol = config.protocol_map.get(listener.upper(), "PLAINTEXT")
        context = peer_context(config, listener)
        sasl = (
            partial(SaslClient.for_listener, config, listener, mechanism)
            if protocol.startswith("SASL_")
            else None
        )
        if context is None and sasl is None:
            return None
        return cls(context, sasl)

    @classmethod
    def to_controllers(cls, config: BrokerConfig) -> PeerSecurity | None:
        names = config.controller_listeners
        if not names:
            return None
        return cls.for_listener(config, names[0], config.sasl_mechanism_controller_protocol)

    @classmethod
    def to_brokers(cls, config: BrokerConfig) -> PeerSecurity | None:
        return cls.for_listener(
            config, config.inter_broker_listener, config.sasl_mechanism_inter_broker_protocol
        )
