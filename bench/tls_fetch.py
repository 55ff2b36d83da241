"""The cost of TLS on the fetch path: broker CPU per consumed message, plaintext against TLS,
for Strom and for Apache Kafka, in one run.

Over plaintext both brokers send record batches from the page cache with sendfile; over TLS
they must read and encrypt them. For each broker the same topic (one partition, N records of
SIZE bytes, produced untimed) is consumed from the start by a confluent-kafka consumer over
the plaintext listener and over the TLS listener, alternately, ROUNDS times each; the figure is
the broker process's CPU seconds (utime + stime, `/proc`) spent while the consumer reads
everything, per message, median of the rounds (CPU time has 10 ms ticks: use enough
messages). Kafka runs on a normal server JVM (the tests' C1-only flags would slow its TLS).
The machine is shared: compare the ratios within one run, not the absolute numbers across
runs.

    python bench/tls_fetch.py                       # Strom and Apache Kafka 4.1.1
    python bench/tls_fetch.py --messages 100000 --no-kafka
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from bench.harness import StromSpec, cpu_seconds, start_broker  # noqa: E402
from strom.broker.testing.certs import PASSWORD, TlsFiles  # noqa: E402

TOPIC = "tls-bench"


def produce(bootstrap: str, messages: int, size: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "1",
                         "batch.size": 262144, "compression.type": "none"})  # fmt: skip
    value = b"x" * size
    for _ in range(messages):
        while True:
            try:
                producer.produce(TOPIC, value)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120) != 0:
        raise RuntimeError("the benchmark's records were not all produced")


def consume(config: dict[str, str], messages: int) -> float:
    """Read the topic from the start until `messages` records; the wall seconds it took."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**config, "group.id": f"bench-{time.monotonic_ns()}",
                         "enable.auto.commit": False, "fetch.max.bytes": 52428800,
                         "max.partition.fetch.bytes": 10485760})  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    seen = 0
    started = time.perf_counter()
    deadline = time.monotonic() + 300
    while seen < messages and time.monotonic() < deadline:
        for message in consumer.consume(10000, 1.0):
            if message.error() is None:
                seen += 1
    took = time.perf_counter() - started
    consumer.close()
    if seen < messages:
        raise RuntimeError(f"consumed {seen} of {messages} records")
    return took


def measure(pid: int, read: Callable[[], float]) -> tuple[float, float]:
    """(broker CPU seconds, wall seconds) of one full read."""
    before = cpu_seconds(pid)
    wall = read()
    return cpu_seconds(pid) - before, wall


def rounds(
    pid: int, plain: dict[str, str], tls: dict[str, str], messages: int, count: int
) -> dict[str, list[tuple[float, float]]]:
    results: dict[str, list[tuple[float, float]]] = {"plaintext": [], "tls": []}
    consume(plain, messages)  # warm: the page cache, the broker's handler imports
    for _ in range(count):
        results["plaintext"].append(measure(pid, lambda: consume(plain, messages)))
        results["tls"].append(measure(pid, lambda: consume(tls, messages)))
    return results


def tls_client(files: TlsFiles, bootstrap: str) -> dict[str, str]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SSL",
            "ssl.ca.location": str(files.ca_pem)}  # fmt: skip


def run_strom(files: TlsFiles, messages: int, size: int, count: int) -> dict[str, list[tuple[float, float]]]:
    spec = StromSpec(overrides={
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "message.max.bytes": "10485760",
        **files.pem_listener("ssl"),
    }, label="strom-tls")  # fmt: skip
    with start_broker(spec) as broker:
        line = next(line for line in broker.output if "started:" in line)
        ssl_port = re.search(r"SSL://127\.0\.0\.1:(\d+)", line)
        assert ssl_port is not None
        produce(broker.bootstrap, messages, size)
        return rounds(broker.pid, {"bootstrap.servers": broker.bootstrap},
                      tls_client(files, f"127.0.0.1:{ssl_port.group(1)}"), messages, count)  # fmt: skip


def run_kafka(files: TlsFiles, workdir: Path, messages: int, size: int, count: int) -> dict[str, list[tuple[float, float]]]:
    from compat_tests import apache_kafka
    from compat_tests.apache_kafka import ApacheKafka, free_port

    # the tests' JVM flags stop at the C1 compiler, which has no AES-GCM intrinsics: a
    # benchmark gives Kafka a normal server JVM
    apache_kafka.JVM_OPTIONS = ("-Xmx1g", "-Xms256m", "-XX:+UseG1GC", "-XX:+AlwaysPreTouch")

    tls_port = free_port()
    ssl = {  # PKCS12: Java 17 cannot decrypt a PBES2-encrypted PEM key
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(files.pkcs12_keystore()),
        "ssl.keystore.password": PASSWORD,
    }  # fmt: skip
    kafka = ApacheKafka(workdir / "kafka", overrides={"message.max.bytes": "10485760"})
    base = kafka.properties

    def properties(port: int, controller_port: int) -> dict[str, str]:
        props = base(port, controller_port)
        props["listeners"] += f",SSL://127.0.0.1:{tls_port}"
        props["advertised.listeners"] += f",SSL://127.0.0.1:{tls_port}"
        props["listener.security.protocol.map"] += ",SSL:SSL"
        return {**props, **ssl}

    kafka.properties = properties  # type: ignore[method-assign]
    with kafka:
        assert kafka.process is not None
        produce(kafka.bootstrap, messages, size)
        return rounds(kafka.process.pid, {"bootstrap.servers": kafka.bootstrap},
                      tls_client(files, f"127.0.0.1:{tls_port}"), messages, count)  # fmt: skip


def report(name: str, results: dict[str, list[tuple[float, float]]], messages: int) -> dict[str, float]:
    out = {}
    for mode, samples in results.items():
        cpu = statistics.median(c for c, _ in samples)
        wall = statistics.median(w for _, w in samples)
        out[mode] = cpu / messages * 1e6
        print(f"{name:6} {mode:9} broker CPU {cpu:6.2f} s = {out[mode]:6.2f} us/message; "
              f"read in {wall:5.2f} s ({messages / wall:,.0f} messages/s)")  # fmt: skip
    print(f"{name:6} TLS / plaintext CPU per message: {out['tls'] / out['plaintext']:.2f}x")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-kafka", action="store_true", help="Strom only (no JVM)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="strom-tls-bench-") as tmp:
        workdir = Path(tmp)
        files = TlsFiles.make(workdir / "certs")
        print(f"{args.messages:,} messages of {args.size} bytes, one partition, "
              f"{args.rounds} rounds each (medians)")  # fmt: skip
        strom = report("strom", run_strom(files, args.messages, args.size, args.rounds), args.messages)
        if not args.no_kafka:
            kafka = report("kafka", run_kafka(files, workdir, args.messages, args.size, args.rounds),
                           args.messages)  # fmt: skip
            print(f"Strom / Kafka CPU per message: plaintext {strom['plaintext'] / kafka['plaintext']:.1f}x, "
                  f"TLS {strom['tls'] / kafka['tls']:.1f}x")  # fmt: skip


if __name__ == "__main__":
    main()
