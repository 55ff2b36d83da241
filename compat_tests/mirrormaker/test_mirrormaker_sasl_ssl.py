"""MirrorMaker 2 between two Strom brokers over SASL_SSL (SCRAM-SHA-512 users seeded by
`strom format --add-scram`, TLS with a CA made at test time): the same checks as the plaintext
test (records, topic configs, translated group offsets), with MirrorMaker's every connection
(consumers, producers, admin clients of both clusters) authenticated and encrypted. The test's
own clients use each broker's PLAINTEXT listener."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.mirrormaker.mm2 import MirrorMaker2
from compat_tests.mirrormaker.test_mirrormaker import TOPIC, check_replication, create_and_fill
from strom.broker.testing.certs import TlsFiles
from strom.broker.testing.embedded import BrokerProcess, child_environment

SECRET = "mm2-Secret-3"  # the test user's password
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required"


def secured_broker(root: Path, files: TlsFiles) -> BrokerProcess:
    data = root / "data"
    subprocess.run([sys.executable, "-m", "strom", "format", "-t", "AAAAAAAAAAAAAAAAAAAAAA",
                    "--override", f"log.dirs={data}",
                    "--add-scram", f"SCRAM-SHA-512=[name=mm2,password={SECRET}]"],
                   check=True, capture_output=True, timeout=60, env=child_environment())  # fmt: skip
    return BrokerProcess(data, {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": f"{SCRAM_JAAS};",
        **files.pem_listener("sasl_ssl"),
    })  # fmt: skip


def sasl_ssl_address(broker: BrokerProcess) -> str:
    line = next(line for line in broker.output if "started:" in line)
    found = re.search(r"SASL_SSL://(127\.0\.0\.1:\d+)", line)
    assert found is not None, line
    return found.group(1)


@pytest.fixture
def files(tmp_path: Path) -> TlsFiles:
    return TlsFiles.make(tmp_path / "certs")


@pytest.fixture
def cluster_a(tmp_path: Path, files: TlsFiles) -> Iterator[BrokerProcess]:
    with secured_broker(tmp_path / "a", files) as broker:
        yield broker


@pytest.fixture
def cluster_b(tmp_path: Path, files: TlsFiles) -> Iterator[BrokerProcess]:
    with secured_broker(tmp_path / "b", files) as broker:
        yield broker


def test_strom_to_strom_over_sasl_ssl(
    cluster_a: BrokerProcess, cluster_b: BrokerProcess, files: TlsFiles, tmp_path: Path
) -> None:
    create_and_fill(cluster_a.bootstrap)
    security: dict[str, str] = {}
    for alias in ("A", "B"):
        security |= {
            f"{alias}.security.protocol": "SASL_SSL",
            f"{alias}.sasl.mechanism": "SCRAM-SHA-512",
            f"{alias}.sasl.jaas.config": f'{SCRAM_JAAS} username="mm2" password="{SECRET}";',
            f"{alias}.ssl.truststore.type": "PEM",
            f"{alias}.ssl.truststore.location": str(files.ca_pem),
        }
    mm2 = MirrorMaker2(
        tmp_path / "mm2",
        {"A": sasl_ssl_address(cluster_a), "B": sasl_ssl_address(cluster_b)},
        {"A->B": {"topics": "mm-.*", "groups": "mm-.*"}},
        security,
    )
    with mm2:
        try:
            check_replication(cluster_a.bootstrap, cluster_b.bootstrap, mm2, f"A.{TOPIC}")
        except BaseException as exc:
            raise AssertionError(f"{exc}\nMirrorMaker 2 log:\n{mm2.tail()}") from exc
