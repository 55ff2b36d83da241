"""The client side of the broker benchmarks: confluent-kafka workloads and their figures.

Shared by `bench/broker_bench.py` (Strom alone) and `bench/compare.py` (Strom against Tansu).
Every phase reads the broker process's CPU seconds and resident memory just before the clock
starts and just after it stops (see `bench/harness.py`), so each result carries the broker's
own cost next to the client-side rate:

- `produce`: `count` values of `size` bytes, round-robin over the partitions (the partition is
  set explicitly, so both brokers get the same batches), from a producer that has already
  fetched the topic's metadata; timed from the first `produce()` to the end of `flush()`.
- `consume`: a fresh consumer `assign()`s every partition from the beginning (no group
  membership: `group.id` is set only because librdkafka insists; nothing is committed) and
  reads until it holds `count` messages; timed from `assign()` to the last message. Before
  the clock starts it has fetched metadata and asked for committed offsets once, so the
  group-coordinator lookup that librdkafka makes for any `group.id` (and the offsets topic a
  broker may create on the first one) is not part of the figure.
- `latency`: one partition, values paced at `rate` messages per second for `seconds`; each
  delivery report's `latency()`: librdkafka's time from `produce()` to the delivery report's
  callback, which runs inside the application's `poll()`. So the loop polls while it waits
  for the next send time: it once slept instead, and every record's latency then ran on to
  the next send (one interval: 2 ms at 500/s, 20 ms at 50/s).

Values are random upper-case ASCII letters (as Kafka's `ProducerPerformance` makes them), from
a pool of 1024 seeded values, so lz4 has something to compress (roughly 1.6:1) and no value
is a repeat of its neighbour. MB is 10^6 bytes of values (keys are absent; record and batch
overhead is not counted).
"""

from __future__ import annotations

import contextlib
import random
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined,unused-ignore]

from bench.harness import RunningBroker, machine_busy_seconds, self_cpu_seconds

MB = 1_000_000
POOL = 1024  # distinct values per size
FLUSH_TIMEOUT_S = 180.0
CONSUME_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class Workload:
    """One throughput workload: `count` values of `size` bytes, produced then consumed."""

    count: int
    size: int
    partitions: int
    acks: str  # "1" or "all", as librdkafka spells them
    compression: str = "none"

    @property
    def key(self) -> str:
        return f"{_count(self.count)}x{_size(self.size)}/{self.partitions}p/acks={self.acks}/{self.compression}"

    @property
    def payload_bytes(self) -> int:
        return self.count * self.size


def _count(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


def _size(n: int) -> str:
    return f"{n // 1024}KiB" if n >= 1024 and n % 1024 == 0 else f"{n}B"


def workloads(
    counts: dict[int, int], partitions: tuple[int, ...], acks: tuple[str, ...],
    compressions: tuple[str, ...] = ("none",),
) -> list[Workload]:  # fmt: skip
    """Every combination: `counts` maps value size -> message count."""
    return [
        Workload(count, size, p, a, c)
        for size, count in counts.items()
        for p in partitions
        for a in acks
        for c in compressions
    ]


@dataclass
class PhaseResult:
    """What one timed phase did and cost. `error` set means it did not complete."""

    phase: str
    messages: int = 0
    payload_bytes: int = 0
    seconds: float = 0.0
    broker_cpu_s: float = 0.0
    client_cpu_s: float = 0.0
    broker_rss_after: int = 0
    other_cpu_s: float = 0.0  # everything else on the machine: how disturbed the phase was
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.payload_bytes / MB / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_us_per_msg(self) -> float:
        return self.broker_cpu_s * 1e6 / self.messages if self.messages else 0.0

    @property
    def cpu_us_per_mb(self) -> float:
        return self.broker_cpu_s * 1e6 / (self.payload_bytes / MB) if self.payload_bytes else 0.0

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        extra = out.pop("extra")
        if self.ok:
            out.update(
                msgs_per_s=round(self.msgs_per_s, 1),
                mb_per_s=round(self.mb_per_s, 3),
                broker_cpu_us_per_msg=round(self.cpu_us_per_msg, 4),
                broker_cpu_us_per_mb=round(self.cpu_us_per_mb, 1),
            )
        out.update(extra)
        return out


def payload_pool(size: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed * 1_000_003 + size)
    letters = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return [bytes(rng.choices(letters, k=size)) for _ in range(POOL)]


def topic_name(label: str) -> str:
    return f"bench-{label}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """CreateTopics, then wait until the metadata shows every partition with a leader."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
        operation_timeout=timeout, request_timeout=timeout,
    )  # fmt: skip
    futures[topic].result(timeout)
    deadline = time.monotonic() + timeout
    while True:
        meta = admin.list_topics(topic, timeout=timeout)
        found = meta.topics.get(topic)
        if (
            found is not None
            and found.error is None
            and len(found.partitions) == partitions
            and all(p.leader >= 0 for p in found.partitions.values())
        ):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic} has no leaders after {timeout}s: {found}")
        time.sleep(0.01)


def _failed(name: str, exc: Exception) -> PhaseResult:
    return PhaseResult(name, error=f"{type(exc).__name__}: {exc}")


def timed_phase(
    broker: RunningBroker, name: str, body: Callable[[PhaseResult], None]
) -> PhaseResult:
    """Run `body` between two readings of the broker and of this process."""
    result = PhaseResult(name)
    if not broker.alive():
        result.error = "the broker process has exited"
        return result
    before, client_before, busy_before = broker.sample(), self_cpu_seconds(), machine_busy_seconds()
    try:
        body(result)
    except Exception as exc:  # recorded as n/a with its reason; the run goes on
        result.error = f"{type(exc).__name__}: {exc}"
    after, client_after, busy_after = broker.sample(), self_cpu_seconds(), machine_busy_seconds()
    if not result.seconds:
        result.seconds = after.wall - before.wall
    result.broker_cpu_s = after.cpu_s - before.cpu_s
    result.client_cpu_s = client_after - client_before
    result.other_cpu_s = max(
        0.0, busy_after - busy_before - result.broker_cpu_s - result.client_cpu_s
    )
    result.broker_rss_after = after.rss
    return result


def idle(broker: RunningBroker, seconds: float) -> PhaseResult:
    """No traffic for `seconds`: what the broker (or cluster) costs doing nothing."""

    def body(result: PhaseResult) -> None:
        time.sleep(seconds)

    return timed_phase(broker, "idle", body)


def producer_config(
    bootstrap: str, acks: str, compression: str, linger_ms: float
) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "compression.type": compression,
        "linger.ms": linger_ms,
        "enable.idempotence": False,
        "message.timeout.ms": int(FLUSH_TIMEOUT_S * 1000),
    }


def produce(broker: RunningBroker, topic: str, w: Workload, linger_ms: float = 5) -> PhaseResult:
    """Produce `w.count` values as fast as the client goes; all acknowledged at the end."""
    errors: list[str] = []

    def on_error(err: KafkaError | None, _msg: Any) -> None:
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    config = producer_config(broker.bootstrap, w.acks, w.compression, linger_ms)
    config.update({"delivery.report.only.error": True, "on_delivery": on_error})
    try:
        producer = Producer(config)
        producer.list_topics(topic, timeout=30)  # connected, metadata known: not timed
    except Exception as exc:
        return _failed("produce", exc)
    pool = payload_pool(w.size)
    mask, parts = POOL - 1, w.partitions

    def body(result: PhaseResult) -> None:
        send, poll = producer.produce, producer.poll
        start = time.perf_counter()
        i = 0
        while i < w.count:
            try:
                send(topic, pool[i & mask], partition=i % parts)
            except BufferError:  # the client's queue is full: let deliveries drain it
                poll(0.001)
                continue
            i += 1
            if not i & 0xFFFF:
                poll(0)
        left = producer.flush(FLUSH_TIMEOUT_S)
        result.seconds = time.perf_counter() - start
        if left:
            raise TimeoutError(f"{left} messages unacknowledged after {FLUSH_TIMEOUT_S}s")
        if errors:
            raise RuntimeError(f"delivery failed: {'; '.join(errors)}")
        result.messages, result.payload_bytes = w.count, w.payload_bytes

    return timed_phase(broker, "produce", body)


def consumer_config(
    bootstrap: str, isolation: str | None = None, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """`isolation`: librdkafka's isolation.level (None: its default, read_committed);
    `extra`: more client settings."""
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-assign-{uuid.uuid4().hex[:8]}",  # required; never joined
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
    }
    if isolation is not None:
        config["isolation.level"] = isolation
    config.update(extra or {})
    return config


def consume(
    broker: RunningBroker,
    topic: str,
    w: Workload,
    isolation: str | None = None,
    extra: dict[str, Any] | None = None,
) -> PhaseResult:
    """Read the workload's `count` messages back from offset 0 of every partition."""
    try:
        consumer = Consumer(consumer_config(broker.bootstrap, isolation, extra))
        consumer.list_topics(topic, timeout=30)  # connected: not timed
    except Exception as exc:
        return _failed("consume", exc)
    partitions = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(w.partitions)]
    # librdkafka looks up the group coordinator whenever group.id is set, and a broker may
    # create its offsets topic on that first lookup: have it done before the clock starts.
    with contextlib.suppress(KafkaException):
        consumer.committed(partitions, timeout=30)

    def body(result: PhaseResult) -> None:
        start = time.perf_counter()
        consumer.assign(partitions)
        deadline = start + CONSUME_TIMEOUT_S
        got = 0
        nbytes = 0
        while got < w.count:
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{got} of {w.count} messages after {CONSUME_TIMEOUT_S}s")
            batch = consumer.consume(num_messages=min(10_000, w.count - got), timeout=0.5)
            for msg in batch:
                err = msg.error()
                if err is not None:
                    raise RuntimeError(f"consumer error: {err}")
            got += len(batch)
            nbytes += sum(map(len, batch))
        result.seconds = time.perf_counter() - start
        if got != w.count:
            raise RuntimeError(f"read {got} messages, expected {w.count}")
        if nbytes != w.payload_bytes:
            raise RuntimeError(f"read {nbytes} value bytes, expected {w.payload_bytes}")
        result.messages, result.payload_bytes = got, nbytes

    try:
        return timed_phase(broker, "consume", body)
    finally:
        consumer.close()


def latency(
    broker: RunningBroker, topic: str, *, rate: float, seconds: float, linger_ms: float,
    size: int = 100, acks: str = "all",
) -> PhaseResult:  # fmt: skip
    """Paced produce to one partition; p50/p99/max of the delivery latency in `extra` (ms)."""
    lat: list[float] = []
    errors: list[str] = []

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            value = msg.latency()
            if value is not None:
                lat.append(value)

    pool = payload_pool(size)
    try:
        producer = Producer(producer_config(broker.bootstrap, acks, "none", linger_ms))
        producer.list_topics(topic, timeout=30)
        for i in range(20):  # warm-up: connection and first batches, not counted
            producer.produce(topic, pool[i], partition=0)
        if producer.flush(30):
            raise TimeoutError("warm-up messages unacknowledged after 30s")
    except Exception as exc:
        return _failed("latency", exc)
    count = max(1, round(rate * seconds))
    interval = 1.0 / rate

    def body(result: PhaseResult) -> None:
        send, poll, clock = producer.produce, producer.poll, time.perf_counter
        start = clock()
        for i in range(count):
            # poll() returns once it has run a delivery callback, or after its timeout in
            # whole milliseconds (rounded up: a shorter one would spin at 0 ms, on a CPU the
            # brokers share; a send is late by under a millisecond, and the schedule holds)
            while (wait := start + i * interval - clock()) > 0:
                poll(max(wait, 0.001))
            send(topic, pool[i & (POOL - 1)], partition=0, on_delivery=on_delivery)
            poll(0)
        sent = clock()
        left = producer.flush(FLUSH_TIMEOUT_S)
        result.seconds = clock() - start
        if left or errors:
            raise RuntimeError(f"{left} unacknowledged, errors: {errors[:3]}")
        if len(lat) != count:
            raise RuntimeError(f"{len(lat)} latencies for {count} messages")
        result.messages, result.payload_bytes = count, count * size
        ms = sorted(x * 1000 for x in lat)
        result.extra = {
            "rate_target": rate,
            "rate_achieved": round(count / (sent - start), 1),
            "linger_ms": linger_ms,
            "acks": acks,
            "p50_ms": round(percentile(ms, 50), 3),
            "p99_ms": round(percentile(ms, 99), 3),
            "p999_ms": round(percentile(ms, 99.9), 3),
            "max_ms": round(ms[-1], 3),
            "mean_ms": round(statistics.fmean(ms), 3),
        }

    return timed_phase(broker, "latency", body)


def percentile(sorted_values: list[float], pct: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return float("nan")
    rank = max(1, -(-len(sorted_values) * pct // 100))
    return sorted_values[int(rank) - 1]
