"""A 3-node cluster whose every listener is TLS with mutual authentication: Raft between the
controllers, registration and heartbeats, forwarded admin requests and replica fetches all run
over mTLS, and a stock client (confluent-kafka) produces with acks=all to a topic replicated
three times (min.insync.replicas=3: every follower fetches over TLS) and reads it back."""

from __future__ import annotations

import ssl
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.broker.testing.certs import PASSWORD, TlsFiles
from strom.broker.testing.pytest_plugin import StartCluster

TIMEOUT_S = 30


def tls_overrides(files: TlsFiles) -> dict[str, str]:
    return {
        "listener.security.protocol.map": "PLAINTEXT:SSL,CONTROLLER:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(files.pem_keystore()),
        "ssl.key.password": PASSWORD,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(files.ca_pem),
        "ssl.client.auth": "required",
        "replica.fetch.backoff.ms": "200",
    }


def test_three_nodes_over_mutual_tls(strom_cluster: StartCluster, tmp_path: Path) -> None:
    files = TlsFiles.make(tmp_path / "certs")
    harness = ssl.create_default_context(cafile=str(files.ca_pem))
    harness.load_cert_chain(str(files.client("CN=harness").write_pem(tmp_path / "h.pem")))
    cluster = strom_cluster(combined=3, overrides=tls_overrides(files), client_ssl=harness)
    client = files.client("CN=app")
    key, cert = tmp_path / "app.key", tmp_path / "app.crt"
    key.write_text(client.key_pem())
    cert.write_text(client.cert_pem)
    common = {
        "bootstrap.servers": cluster.bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(files.ca_pem),
        "ssl.certificate.location": str(cert),
        "ssl.key.location": str(key),
    }
    admin = AdminClient(common)
    futures = admin.create_topics([NewTopic("replicated", 1, 3, config={"min.insync.replicas": "3"})])
    futures["replicated"].result(TIMEOUT_S)
    producer = Producer({**common, "acks": "all", "message.timeout.ms": TIMEOUT_S * 1000})
    for i in range(200):
        producer.produce("replicated", f"v{i}".encode())
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({**common, "group.id": "tls-cluster", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("replicated", 0, 0)])
        seen: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(seen) < 200 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            value = message.value()
            assert value is not None
            seen.append(value)
        assert seen == [f"v{i}".encode() for i in range(200)]
    finally:
        consumer.close()
