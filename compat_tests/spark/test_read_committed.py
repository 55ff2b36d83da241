"""Spark's `kafka` source with `kafka.isolation.level=read_committed` against `strom serve`.

The data is the interleaving of compat_tests/confluent_kafka/test_read_committed.py (two
transactional producers, commits, aborts, plain records, transactions spanning small
segments, one transaction left open). A batch query from earliest to latest with
read_committed reads exactly the plain and committed records (the latest offset it plans to
is the last stable offset; aborted records and markers are gaps it walks over); with
read_uncommitted it reads everything. A streaming query (availableNow) with read_committed
reads the same, and once the open transaction commits, a second run reads the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from compat_tests.confluent_kafka import ck
from compat_tests.confluent_kafka.test_read_committed import (
    SMALL_SEGMENTS,
    TIMEOUT,
    write_interleaved,
)
from compat_tests.helpers import topic_name
from strom.broker.testing.embedded import BrokerProcess

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.timeout(600)  # the first test also waits for Spark to start


def batch(spark: SparkSession, bootstrap: str, topic: str, isolation: str) -> list[str]:
    rows = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("kafka.isolation.level", isolation)
        .load()
        .select("offset", "value")
        .collect()
    )
    return [bytes(r["value"]).decode() for r in sorted(rows, key=lambda r: r["offset"])]


def stream(spark: SparkSession, bootstrap: str, topic: str, work: Path) -> list[str]:
    """One availableNow run with read_committed into a JSON file sink under `work` (resuming
    from its checkpoint there); every value the sink holds, in offset order."""
    query = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("kafka.isolation.level", "read_committed")
        .load()
        .selectExpr("offset", "CAST(value AS STRING) AS value")
        .writeStream.format("json")
        .option("path", str(work / "out"))
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(240), query.lastProgress
    assert query.exception() is None, query.exception()
    rows = spark.read.json(str(work / "out")).collect()
    return [r["value"] for r in sorted(rows, key=lambda r: r["offset"])]


def test_read_committed(spark: SparkSession, strom_broker: BrokerProcess, tmp_path: Path) -> None:
    bootstrap = strom_broker.bootstrap
    topic = topic_name("spark-rc")
    ck.create_topic(ck.admin(bootstrap), topic, 1, SMALL_SEGMENTS)
    committed, everything, open_producer = write_interleaved(bootstrap, topic)
    assert batch(spark, bootstrap, topic, "read_committed") == committed
    assert batch(spark, bootstrap, topic, "read_uncommitted") == everything
    assert stream(spark, bootstrap, topic, tmp_path) == committed
    open_producer.commit_transaction(TIMEOUT)
    rest = [*committed, "a-open-0", "p3"]
    assert batch(spark, bootstrap, topic, "read_committed") == rest
    assert stream(spark, bootstrap, topic, tmp_path) == rest  # from its checkpoint: nothing twice
