"""KIP-612's connection creation rate: the acceptor's token bucket, on a fake clock, and the
key (broker-wide and per listener)."""

from __future__ import annotations

from strom.broker.network.server import TokenBucket
from strom.config import load_config
from strom.config.values import INT_MAX


def test_a_burst_then_one_per_interval() -> None:
    now = [0.0]
    bucket = TokenBucket(4, lambda: now[0])
    assert [bucket.take() for _ in range(4)] == [0.0] * 4  # a one-second burst
    assert bucket.take() == 0.25  # the fifth waits a quarter second
    now[0] += 1.0
    assert bucket.take() == 0.0
    assert TokenBucket(INT_MAX, lambda: 0.0).take() == 0.0  # Kafka's default: unlimited


def test_the_key_broker_wide_and_per_listener() -> None:
    config = load_config(extra={
        "listeners": "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "max.connection.creation.rate": "100",
        "listener.name.external.max.connection.creation.rate": "10",
    })  # fmt: skip
    assert config.listener_value("PLAINTEXT", "max.connection.creation.rate") == 100
    assert config.listener_value("EXTERNAL", "max.connection.creation.rate") == 10
