"""Stock clients over TLS: kafka-python and confluent-kafka (librdkafka) produce and consume on
an SSL listener with mutual TLS against a `strom serve` process. The fetches are served
without sendfile (a TLS stream), so this is the TLS fetch path end to end, batches of many
sizes included (a large one spans several of the server's 1 MiB read slices)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.kafka_python.kp import KafkaConsumer, KafkaProducer, TopicPartition
from strom.broker.testing.certs import PASSWORD, TlsFiles
from strom.broker.testing.embedded import BrokerProcess

TIMEOUT_S = 30


@pytest.fixture
def tls_broker(tmp_path: Path) -> Iterator[tuple[str, TlsFiles]]:
    files = TlsFiles.make(tmp_path / "certs")
    overrides = {
        "listeners": "SSL://127.0.0.1:0",
        "inter.broker.listener.name": "SSL",
        "num.partitions": "1",
        "message.max.bytes": str(4 * 1024 * 1024),
        **files.pem_listener("ssl", "required"),
    }
    with BrokerProcess(tmp_path / "data", overrides) as broker:
        yield broker.bootstrap, files


def test_kafka_python_over_mutual_tls(tls_broker: tuple[str, TlsFiles]) -> None:
    bootstrap, files = tls_broker
    client_pem = files.client("CN=kafka-python,O=Strom").write_pem(
        files.directory / "kp.pem", PASSWORD
    )
    ssl = {
        "security_protocol": "SSL",
        "ssl_cafile": str(files.ca_pem),
        "ssl_certfile": str(client_pem),
        "ssl_keyfile": str(client_pem),
        "ssl_password": PASSWORD,
    }
    values = [f"value-{i}".encode() * (1 + i % 7) for i in range(300)]
    values.append(b"x" * (3 * 1024 * 1024))  # one batch over three read slices
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", max_request_size=4 << 20, **ssl)
    try:
        for value in values:
            producer.send("tls-topic", value)
        producer.flush(TIMEOUT_S)
    finally:
        producer.close(timeout=TIMEOUT_S)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
        auto_offset_reset="earliest", fetch_max_bytes=8 << 20,
        max_partition_fetch_bytes=8 << 20, request_timeout_ms=TIMEOUT_S * 1000, **ssl,
    )  # fmt: skip
    try:
        consumer.assign([TopicPartition("tls-topic", 0)])
        seen: list[bytes] = []
        for _ in range(60):
            for records in consumer.poll(timeout_ms=500).values():
                seen += [r.value for r in records]
            if len(seen) >= len(values):
                break
        assert seen == values
    finally:
        consumer.close()


def test_confluent_kafka_over_mutual_tls(tls_broker: tuple[str, TlsFiles]) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CkPartition

    bootstrap, files = tls_broker
    client = files.client("CN=librdkafka,O=Strom")
    key = files.directory / "rd.key"
    key.write_text(client.key_pem(PASSWORD))
    cert = files.directory / "rd.crt"
    cert.write_text(client.cert_pem)
    ssl = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(files.ca_pem),
        "ssl.certificate.location": str(cert),
        "ssl.key.location": str(key),
        "ssl.key.password": PASSWORD,
    }
    producer = Producer({**ssl, "acks": "all"})
    for i in range(500):
        producer.produce("rd-tls", f"message-{i}".encode())
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({**ssl, "group.id": "rd-tls", "enable.auto.commit": False})
    try:
        consumer.assign([CkPartition("rd-tls", 0, 0)])
        seen: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(seen) < 500 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            value = message.value()
            assert value is not None
            seen.append(value)
        assert seen == [f"message-{i}".encode() for i in range(500)]
    finally:
        consumer.close()


SCRAM_SECRET = "kp-Secret-4"  # the test user's password


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafka_python_over_sasl_ssl(tmp_path: Path, mechanism: str) -> None:
    """kafka-python's SASL (PLAIN, SCRAM-SHA-256/512) over TLS; the SCRAM user comes from
    `strom format --add-scram`, the PLAIN one from the listener's JAAS users."""
    import subprocess
    import sys

    from strom.broker.testing.embedded import child_environment

    files = TlsFiles.make(tmp_path / "certs")
    data = tmp_path / "data"
    scram_flags = [arg for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")
                   for arg in ("--add-scram", f"{m}=[name=kp,password={SCRAM_SECRET}]")]  # fmt: skip
    subprocess.run([sys.executable, "-m", "strom", "format", "-t", "AAAAAAAAAAAAAAAAAAAAAA",
                    "--override", f"log.dirs={data}", *scram_flags],
                   check=True, capture_output=True, timeout=60, env=child_environment())  # fmt: skip
    prefix = "listener.name.sasl_ssl."
    overrides = {
        "listeners": "SASL_SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        prefix + "plain.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule"
        f' required user_kp="{SCRAM_SECRET}";',
        prefix + "scram-sha-256.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        prefix + "scram-sha-512.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        **files.pem_listener("sasl_ssl"),
    }  # fmt: skip
    with BrokerProcess(data, overrides) as broker:
        sasl = {
            "security_protocol": "SASL_SSL", "ssl_cafile": str(files.ca_pem),
            "sasl_mechanism": mechanism, "sasl_plain_username": "kp",
            "sasl_plain_password": SCRAM_SECRET,
        }  # fmt: skip
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", **sasl)
        try:
            for i in range(50):
                producer.send("kp-sasl", f"m{i}".encode())
            producer.flush(TIMEOUT_S)
        finally:
            producer.close(timeout=TIMEOUT_S)
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                                 auto_offset_reset="earliest", **sasl)  # fmt: skip
        try:
            consumer.assign([TopicPartition("kp-sasl", 0)])
            seen: list[bytes] = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(seen) < 50 and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=500).values():
                    seen += [r.value for r in records]
            assert seen == [f"m{i}".encode() for i in range(50)]
        finally:
            consumer.close()
