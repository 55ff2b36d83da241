"""Kafka's own tools (the Java client) against a secured Strom.

- Over SASL_SSL with SCRAM-SHA-256: `kafka-configs` manages SCRAM users
  (AlterUserScramCredentials / DescribeUserScramCredentials) and `kafka-acls` adds, lists and
  removes ACLs, as a super user; a user added by the tool then authenticates and is held to the
  ACLs the tool created (kafka-console-producer).
- Over mutual TLS: the console producer and consumer present client certificates; the
  principal is the certificate's name mapped by `ssl.principal.mapping.rules`, and the ACLs
  written for that name decide what each may do."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.kafka_tools.tools import KafkaTools
from strom.broker.testing.certs import PASSWORD, TlsFiles
from strom.broker.testing.embedded import BrokerProcess, child_environment

ADMIN_SECRET = "admin-Secret-5"
ALICE_SECRET = "alice-Secret-6"
SCRAM_JAAS = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
              f'username="admin" password="{ADMIN_SECRET}";')  # fmt: skip


def client_config(path: Path, user: str, secret: str, files: TlsFiles) -> Path:
    path.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{secret}";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={files.ca_pem}\n"
    )
    return path


@pytest.fixture
def files(tmp_path: Path) -> TlsFiles:
    return TlsFiles.make(tmp_path / "certs")


@pytest.fixture
def secured(tmp_path: Path, files: TlsFiles) -> Iterator[str]:
    import subprocess
    import sys

    data = tmp_path / "data"
    subprocess.run(
        [sys.executable, "-m", "strom", "format", "-t", "AAAAAAAAAAAAAAAAAAAAAA",
         "--override", f"log.dirs={data}",
         "--add-scram", f"SCRAM-SHA-256=[name=admin,password={ADMIN_SECRET}]"],
        check=True, capture_output=True, timeout=60, env=child_environment(),
    )  # fmt: skip
    overrides = {
        "listeners": "SASL_SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        **files.pem_listener("sasl_ssl"),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
    }
    with BrokerProcess(data, overrides) as broker:
        yield broker.bootstrap


def test_kafka_configs_and_kafka_acls(
    kafka_tools: KafkaTools, secured: str, tmp_path: Path, files: TlsFiles
) -> None:
    admin = str(client_config(tmp_path / "admin.properties", "admin", ADMIN_SECRET, files))
    alice = str(client_config(tmp_path / "alice.properties", "alice", ALICE_SECRET, files))
    base = ("--bootstrap-server", secured, "--command-config", admin)
    kafka_tools.run("kafka-configs", *base, "--alter", "--entity-type", "users",
                    "--entity-name", "alice",
                    "--add-config", f"SCRAM-SHA-256=[iterations=8192,password={ALICE_SECRET}]")  # fmt: skip
    described = kafka_tools.run("kafka-configs", *base, "--describe", "--entity-type", "users",
                                "--entity-name", "alice")  # fmt: skip
    assert any("SCRAM-SHA-256=iterations=8192" in line for line in described.lines), described.lines
    kafka_tools.run("kafka-topics", *base, "--create", "--topic", "orders", "--partitions", "1")
    # alice authenticates, but no ACL lets her write
    refused = kafka_tools.run(
        "kafka-console-producer", "--bootstrap-server", secured, "--producer.config", alice,
        "--topic", "orders", "--producer-property", "max.block.ms=5000",
        stdin="first\n", check=False, timeout=60,
    )  # fmt: skip
    assert "TopicAuthorizationException" in refused.stderr or "Not authorized" in refused.stderr, (
        refused.stderr[-2000:]
    )
    kafka_tools.run("kafka-acls", *base, "--add", "--allow-principal", "User:alice",
                    "--operation", "Write", "--operation", "Describe", "--topic", "orders")  # fmt: skip
    listed = kafka_tools.run("kafka-acls", *base, "--list", "--topic", "orders")
    text = "\n".join(listed.lines)
    for word in ("User:alice", "WRITE", "DESCRIBE"):
        assert word in text, text
    kafka_tools.run(
        "kafka-console-producer", "--bootstrap-server", secured, "--producer.config", alice,
        "--topic", "orders", stdin="second\n", timeout=60,
    )  # fmt: skip
    kafka_tools.run("kafka-acls", *base, "--remove", "--force", "--allow-principal", "User:alice",
                    "--operation", "Write", "--topic", "orders")  # fmt: skip
    remaining = kafka_tools.run("kafka-acls", *base, "--list", "--topic", "orders")
    assert "WRITE" not in "\n".join(remaining.lines)
    assert "DESCRIBE" in "\n".join(remaining.lines)
    kafka_tools.run("kafka-configs", *base, "--alter", "--entity-type", "users",
                    "--entity-name", "alice", "--delete-config", "SCRAM-SHA-256")  # fmt: skip


def mtls_config(path: Path, files: TlsFiles, subject: str) -> Path:
    keystore = files.pkcs12_keystore(path.stem, files.client(subject))  # Java reads PKCS12
    path.write_text(
        "security.protocol=SSL\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={files.ca_pem}\n"
        f"ssl.keystore.type=PKCS12\nssl.keystore.location={keystore}\n"
        f"ssl.keystore.password={PASSWORD}\n"
    )
    return path


def test_mutual_tls_principals_and_acls(
    kafka_tools: KafkaTools, tmp_path: Path, files: TlsFiles
) -> None:
    overrides = {
        "listeners": "SSL://127.0.0.1:0",
        **files.pem_listener("ssl", client_auth="required"),
        "ssl.principal.mapping.rules": "RULE:^CN=([a-z]+),OU=apps,.*$/$1/,DEFAULT",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
    }
    with BrokerProcess(tmp_path / "data", overrides) as broker:
        admin = str(mtls_config(tmp_path / "admin.properties", files, "CN=admin,OU=apps,O=Strom"))
        writer = str(mtls_config(tmp_path / "writer.properties", files, "CN=writer,OU=apps,O=Strom"))
        reader = str(mtls_config(tmp_path / "reader.properties", files, "CN=reader,OU=apps,O=Strom"))
        base = ("--bootstrap-server", broker.bootstrap, "--command-config", admin)
        kafka_tools.run("kafka-topics", *base, "--create", "--topic", "events", "--partitions", "1")
        kafka_tools.run("kafka-acls", *base, "--add", "--allow-principal", "User:writer",
                        "--producer", "--topic", "events")  # fmt: skip
        kafka_tools.run("kafka-acls", *base, "--add", "--allow-principal", "User:reader",
                        "--consumer", "--topic", "events", "--group", "readers")  # fmt: skip
        kafka_tools.run(
            "kafka-console-producer", "--bootstrap-server", broker.bootstrap,
            "--producer.config", writer, "--topic", "events", stdin="one\ntwo\n", timeout=60,
        )  # fmt: skip
        read = kafka_tools.run(
            "kafka-console-consumer", "--bootstrap-server", broker.bootstrap,
            "--consumer.config", reader, "--topic", "events", "--group", "readers",
            "--from-beginning", "--max-messages", "2", "--timeout-ms", "30000", timeout=90,
        )  # fmt: skip
        assert read.lines == ["one", "two"]
        refused = kafka_tools.run(
            "kafka-console-producer", "--bootstrap-server", broker.bootstrap,
            "--producer.config", reader, "--topic", "events",
            "--producer-property", "max.block.ms=5000", stdin="three\n", check=False, timeout=60,
        )  # fmt: skip
        # the idempotent producer's InitProducerId needs WRITE on some topic (KIP-679): refused
        # there, as by Kafka, before any record is sent
        assert "ClusterAuthorizationException" in refused.stderr, refused.stderr[-2000:]
