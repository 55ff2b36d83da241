"""Security of the broker's connections: TLS contexts, principals (and next: SASL, ACLs).

- `tls`: SSLContexts from Kafka's ssl.* settings, for listeners and for node-to-node clients.
- `principal`: who a connection is (`KafkaPrincipal`), from its TLS certificate.

Imports `strom.config` and below; the network layer and the drivers' peer connections use it.
"""
