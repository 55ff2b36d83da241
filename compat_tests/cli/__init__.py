"""The `strom` command line against Apache Kafka 4.1.1 (it speaks the protocol, so it works there too)."""
