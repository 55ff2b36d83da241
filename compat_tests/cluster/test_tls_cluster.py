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
    common: dict[str, str | int | float | bool] = {
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


CONTROLLER_SECRET = "controller-Secret-9"
BROKER_SECRET = "broker-Secret-8"
APP_SECRET = "app-Secret-7"


def sasl_ssl_overrides(files: TlsFiles) -> dict[str, str]:
    """Kafka's recommended shape: controllers authenticate with PLAIN (SCRAM credentials live in
    the metadata the controllers serve), brokers and clients with SCRAM-SHA-512, all over TLS."""
    plain = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
             f'username="controller" password="{CONTROLLER_SECRET}" '
             f'user_controller="{CONTROLLER_SECRET}";')  # fmt: skip
    scram = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
             f'username="broker" password="{BROKER_SECRET}";')  # fmt: skip
    return {
        **tls_overrides(files),
        "listener.security.protocol.map": "PLAINTEXT:SASL_SSL,CONTROLLER:SASL_SSL",
        "ssl.client.auth": "none",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": plain,
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.plaintext.scram-sha-512.sasl.jaas.config": scram,
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
    }


def test_three_nodes_over_sasl_ssl(strom_cluster: StartCluster, tmp_path: Path) -> None:
    """Every node authenticates to every other (PLAIN to the controllers, SCRAM-SHA-512 between
    brokers, the brokers' user seeded by `strom format --add-scram`); a client's SCRAM user is
    added with AlterUserScramCredentials, then produces acks=all to 3 replicas and consumes."""
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    files = TlsFiles.make(tmp_path / "certs")
    harness = ssl.create_default_context(cafile=str(files.ca_pem))
    cluster = strom_cluster(
        combined=3,
        overrides=sasl_ssl_overrides(files),
        client_ssl=harness,
        client_sasl=("SCRAM-SHA-512", "broker", BROKER_SECRET),
        format_args=["--add-scram", f"SCRAM-SHA-512=[name=broker,password={BROKER_SECRET}]"],
    )
    common: dict[str, str | int | float | bool] = {
        "bootstrap.servers": cluster.bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(files.ca_pem),
        "sasl.mechanism": "SCRAM-SHA-512",
    }
    admin = AdminClient({**common, "sasl.username": "broker", "sasl.password": BROKER_SECRET})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    for future in admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("app", info, APP_SECRET.encode())]
    ).values():
        future.result(TIMEOUT_S)
    admin.create_topics([NewTopic("secured", 1, 3, config={"min.insync.replicas": "3"})])[
        "secured"
    ].result(TIMEOUT_S)
    app = {**common, "sasl.username": "app", "sasl.password": APP_SECRET}
    producer = Producer({**app, "acks": "all", "message.timeout.ms": TIMEOUT_S * 1000})
    for i in range(100):
        producer.produce("secured", f"s{i}".encode())
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({**app, "group.id": "sasl-cluster", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("secured", 0, 0)])
        seen: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(seen) < 100 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            value = message.value()
            assert value is not None
            seen.append(value)
        assert seen == [f"s{i}".encode() for i in range(100)]
    finally:
        consumer.close()
    wrong = Producer({**common, "sasl.username": "app", "sasl.password": "not-" + APP_SECRET,
                      "message.timeout.ms": 3000})  # fmt: skip
    errors: list[str] = []
    wrong.produce("secured", b"x", on_delivery=lambda err, _msg: errors.append(str(err)))
    wrong.flush(10)
    assert errors  # not delivered: authentication fails
    _transaction_across_the_nodes(admin, app)


def _transaction_across_the_nodes(admin: AdminClient, app: dict[str, str | int | float | bool]) -> None:
    """A transaction over partitions led by every node: the leaders that are not the
    coordinator verify it, and the coordinator writes their markers, over the secured
    inter-broker listener."""
    admin.create_topics([NewTopic("txn-secured", 6, 3)])["txn-secured"].result(TIMEOUT_S)
    producer = Producer({**app, "transactional.id": "secured-txn"})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    for i in range(60):
        producer.produce("txn-secured", f"t{i}".encode(), partition=i % 6)
    producer.commit_transaction(TIMEOUT_S)
    consumer = Consumer({**app, "group.id": "sasl-cluster-txn", "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    try:
        consumer.assign([TopicPartition("txn-secured", p, 0) for p in range(6)])
        seen: set[bytes] = set()
        deadline = time.monotonic() + TIMEOUT_S
        while len(seen) < 60 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            value = message.value()
            assert value is not None
            seen.add(value)
        assert seen == {f"t{i}".encode() for i in range(60)}
    finally:
        consumer.close()
