"""The Spark session the jobs run in: local mode, small, with Spark's own Kafka connector.

The connector (`org.apache.spark:spark-sql-kafka-0-10_2.13`, the version of the installed
PySpark) is fetched by Spark itself from Maven Central through `spark.jars.packages`, into the
git-ignored `.cache/ivy` at the repository root; the first start downloads about 60 MB, later
ones read the cache.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyspark
from pyspark.sql import SparkSession

REPO = Path(__file__).resolve().parents[2]
IVY_CACHE = Path(os.environ.get("STROM_JVM_CACHE", REPO / ".cache")) / "ivy"
"""Where Spark keeps the connector's jars: `.cache/ivy`, or under `$STROM_JVM_CACHE` (as the
compatibility tests' other JVM artifacts)."""

CONNECTOR = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"
"""Spark's Kafka source and sink, built for the installed PySpark."""


class SparkUnavailable(RuntimeError):
    """Java or the connector is missing; the message says what to install."""


def start_session(app: str = "pageviews", *, driver_memory: str = "1g") -> SparkSession:
    """A `local[2]` session with the Kafka connector, times in UTC and 2 shuffle partitions."""
    if shutil.which("java") is None:
        raise SparkUnavailable(
            "no `java` on PATH: install a JDK 17 (apt-get install openjdk-17-jdk-headless)"
        )
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.jars.packages", CONNECTOR)
        .config("spark.jars.ivy", str(IVY_CACHE))
        .config("spark.driver.memory", driver_memory)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
    )
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # the JVM died before answering: most often the connector fetch
        raise SparkUnavailable(
            f"Spark did not start ({exc.__class__.__name__}); it needs Java 17 and {CONNECTOR} "
            "from Maven Central (fetched into .cache/ivy): see the output above"
        ) from exc
    spark.sparkContext.setLogLevel("WARN")
    return spark
