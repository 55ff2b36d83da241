"""Spark's own Kafka source and sink over SASL_SSL: a batch job reads a topic and writes what it
read to another topic through Strom's SASL_SSL listener (SCRAM-SHA-512, the user seeded by
`strom format --add-scram`, TLS with a CA made at test time); the test checks both sides through
the PLAINTEXT listener."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from compat_tests.helpers import topic_name
from examples.pageviews.events import page_views
from examples.pageviews.produce import create_topics, produce
from examples.pageviews.readback import read_all
from strom.broker.testing.certs import TlsFiles
from strom.broker.testing.embedded import BrokerProcess, child_environment

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.timeout(600)

SECRET = "spark-Secret-2"  # the test user's password
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required"


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[tuple[BrokerProcess, str, TlsFiles]]:
    files = TlsFiles.make(tmp_path / "certs")
    data = tmp_path / "data"
    subprocess.run([sys.executable, "-m", "strom", "format", "-t", "AAAAAAAAAAAAAAAAAAAAAA",
                    "--override", f"log.dirs={data}",
                    "--add-scram", f"SCRAM-SHA-512=[name=spark,password={SECRET}]"],
                   check=True, capture_output=True, timeout=60, env=child_environment())  # fmt: skip
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": f"{SCRAM_JAAS};",
        **files.pem_listener("sasl_ssl"),
    }
    with BrokerProcess(data, overrides) as broker:
        line = next(line for line in broker.output if "started:" in line)
        found = re.search(r"SASL_SSL://(127\.0\.0\.1:\d+)", line)
        assert found is not None, line
        yield broker, found.group(1), files


def test_batch_read_and_write_over_sasl_ssl(
    spark: SparkSession, secured: tuple[BrokerProcess, str, TlsFiles]
) -> None:
    broker, address, files = secured
    source, sink = topic_name("spark-sasl-in"), topic_name("spark-sasl-out")
    create_topics(broker.bootstrap, {source: 2, sink: 1})
    delivered = produce(broker.bootstrap, source, page_views(40, seed=9))
    options = {
        "kafka.bootstrap.servers": address,
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": f'{SCRAM_JAAS} username="spark" password="{SECRET}";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(files.ca_pem),
    }
    frame = spark.read.format("kafka").options(**options).option("subscribe", source).load()
    rows = frame.select("key", "value").collect()
    assert len(rows) == len(delivered) == 40
    (frame.select("key", "value").write.format("kafka").options(**options)
     .option("topic", sink).save())  # fmt: skip
    written = read_all(broker.bootstrap, sink)
    assert sorted(r.value() or b"" for r in written) == sorted(bytes(r["value"]) for r in rows)
