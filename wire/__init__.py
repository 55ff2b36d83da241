"""The Kafka protocol, sans-IO: primitives, headers, generated message classes, the RecordBatch
codec, compression, connection framing. No trio, no sockets, no clock; imports nothing of Strom.
Message classes are generated from Kafka's JSON definitions in `kafka-protocol/`.
"""
