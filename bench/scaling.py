"""How Strom's costs grow with the work (issue 6, "How cost grows").

    python bench/scaling.py                   # everything below, about 4 minutes
    python bench/scaling.py --quick           # small sizes: a smoke run
    python bench/scaling.py --only partitions,connections

Four series, each on fresh `strom serve` processes (`bench/harness.py`):

- partitions: 1, 10, 100, 1,000, 5,000 and 10,000 partitions (topics of up to 10 partitions
  each; a partition holds one open file, its active segment, see NOFILE), then 500,000 x 100 B produced round-robin over all of them by confluent-kafka
  (linger.ms=5, acks=1): time to create the topics, produce msgs/s, broker CPU µs/msg,
  resident memory after creating the topics and after producing.
- connections: 1, 10, 100 and 1,000 concurrent producer connections (one trio task each,
  `bench/wireclient.py`), each sending Produce requests of one 100-record batch (100 B
  values, acks=1) one at a time to one of 10 partitions; 1,000,000 records in all. Reports
  msgs/s, broker CPU µs/msg, request latency p50/p99 and resident memory.
- fetch position: a 2 GiB single-partition log (~1 MB batches of 1 KiB values), then Fetch
  requests of up to 1 MiB (max_wait_ms=0) at its start, middle and end, interleaved, timed
  one by one from the request to the whole response. Flat means the index finds any
  position alike. The log was just written, so it is all in the page cache.
- recovery: logs of 64 MiB, 256 MiB and 1 GiB written with no fsync (the whole log is the
  unflushed tail), the broker killed with SIGKILL, restarted on the same directory; then
  stopped cleanly (SIGTERM) and restarted again. Reports the time from process start to the
  first Metadata answer and to the first ListOffsets answer with the full log end offset.

- hosted partitions: 500,000 x 100 B produced round-robin over 10 partitions while the
  broker hosts 10, 1,000 or 10,000 more (idle ones): what the records cost must not depend on
  how many partitions sit beside them (no work per hosted partition on the data path).
- spread: 1,000,000 x 100 B over 10 to 10,000 partitions, all led by one node, in Produce
  requests of the same shape whatever the count (10 partitions of one 100-record batch each,
  as the Java client puts several partitions in a request; 16 connections, `bench/wireclient.py`):
  what a record costs when only the number of partitions written changes. A first pass writes
  one batch to each partition and is reported per partition. With `--cluster --kafka` every
  row also runs on Apache Kafka's three nodes (`bench/replication.py`'s `KafkaCluster`).

`--cluster` runs the same series on three combined nodes (`ClusterProcess`, every topic with
replication factor 3 and min.insync.replicas=2, produced with acks=all; broker CPU summed over
the three processes, the followers' fetching included). The wire client's topics there have
every partition led by node 1 (a manual assignment), which it talks to; the recovery series is
a single broker's and is not run.

Output: markdown tables on stdout, JSON in `bench/results/scaling.json`
(`scaling.quick.json` with `--quick`, `scaling.cluster.json` with `--cluster`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import trio

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:  # `python bench/scaling.py` from a checkout
    sys.path.insert(0, str(_ROOT))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined,unused-ignore]  # noqa: E402

from bench.harness import (  # noqa: E402
    ClusterBroker,
    RunningBroker,
    StromSpec,
    machine_info,
    start_broker,
    start_cluster,
)
from bench.wireclient import (  # noqa: E402
    FETCH_VERSION,
    LIST_OFFSETS_VERSION,
    PRODUCE_VERSION,
    AsyncWireClient,
    WireClient,
    fetch_request,
    fetched,
    latest_offset,
    list_offsets_request,
    produce_error,
    produce_many,
    produce_request,
    record_batch,
)
from bench.workloads import create_topic, payload_pool, percentile, topic_name  # noqa: E402

RESULTS_DIR = _ROOT / "bench" / "results"
CLUSTER = {"on": False}
"""Set by --cluster: every series on three combined nodes, replication factor 3."""
MIB = 1 << 20
Log = Callable[[str], None]


def _mb(n: int) -> float:
    return round(n / 1e6, 1)


# --- partitions --------------------------------------------------------------------------


@contextlib.contextmanager
def _broker(label: str, nofile: int | None = None) -> Iterator[RunningBroker]:
    """One fresh `strom serve`, or with --cluster three combined nodes."""
    if CLUSTER["on"]:
        with start_cluster(label) as cluster:
            yield cluster
    else:
        with start_broker(StromSpec(label=label, nofile=nofile)) as broker:
            yield broker


def _replication() -> tuple[int, dict[str, str]]:
    """(replication factor, topic config) of the topics a series creates."""
    return (3, {"min.insync.replicas": "2"}) if CLUSTER["on"] else (1, {})


def _acks() -> str:
    return "all" if CLUSTER["on"] else "1"


def create_led_by_one(broker: RunningBroker, topic: str, partitions: int) -> str:
    """A topic whose partitions are all led by one node; that node's bootstrap (the wire
    client talks to one broker). On one broker: `create_topic`."""
    if not isinstance(broker, ClusterBroker):
        create_topic(broker.bootstrap, topic, partitions)
        return broker.bootstrap
    return create_led_by_node_one(broker, [topic], partitions, timeout=60)


def create_many(bootstrap: str, topics: list[str], partitions: int, timeout: float = 300) -> None:
    """Create `topics` (in requests of 100) and wait until metadata shows every leader."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    replication, config = _replication()
    for i in range(0, len(topics), 100):
        chunk = [
            NewTopic(t, num_partitions=partitions, replication_factor=replication, config=config)
            for t in topics[i : i + 100]
        ]
        futures = admin.create_topics(chunk, operation_timeout=timeout, request_timeout=timeout)
        for future in futures.values():
            future.result(timeout)
    deadline = time.monotonic() + timeout
    wanted = set(topics)
    while True:
        meta = admin.list_topics(timeout=timeout)
        ready = {
            name
            for name, t in meta.topics.items()
            if name in wanted
            and t.error is None
            and len(t.partitions) == partitions
            and all(p.leader >= 0 for p in t.partitions.values())
        }
        if ready == wanted:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(wanted - ready)} topics without leaders after {timeout}s")
        time.sleep(0.05)


# Strom keeps one file open per partition (the active segment's .log) plus one per connection;
# `strom serve` raises its soft RLIMIT_NOFILE to the hard limit itself, and the harness asks for
# this much, which only a process allowed to raise its hard limit gets
NOFILE = 100_000


def partitions_series(counts: list[int], messages: int, log: Log) -> list[dict[str, Any]]:
    rows = []
    for total in counts:
        try:
            row = _partitions(total, messages)
        except Exception as exc:
            row = {"partitions": total, "error": f"{type(exc).__name__}: {exc}"}
        log(f"partitions {total}: {row}")
        rows.append(row)
    return rows


def _partitions(total: int, messages: int, active: int | None = None) -> dict[str, Any]:
    """`total` partitions hosted; `messages` produced round-robin over the first `active`
    (default: all)."""
    per_topic = min(total, 10)
    n_topics = total // per_topic
    with _broker(f"p{total}", NOFILE) as broker:
        topics = [topic_name(f"p{i}") for i in range(n_topics)]
        t0 = time.perf_counter()
        create_many(broker.bootstrap, topics, per_topic)
        created = time.perf_counter() - t0
        after_create = broker.sample()
        open_files = (broker.open_files() if isinstance(broker, ClusterBroker)
                      else len(os.listdir(f"/proc/{broker.pid}/fd")))  # fmt: skip
        targets = [(t, p) for t in topics for p in range(per_topic)][: active or total]
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": _acks(),
                             "linger.ms": 5, "delivery.report.only.error": True,
                             "message.timeout.ms": 120_000})  # fmt: skip
        for t in topics:
            producer.list_topics(t, timeout=60)
        pool = payload_pool(100)
        before = broker.sample()
        start = time.perf_counter()
        i = 0
        while i < messages:
            topic, part = targets[i % len(targets)]
            try:
                producer.produce(topic, pool[i & 1023], partition=part)
            except BufferError:
                producer.poll(0.001)
                if not broker.alive():
                    break
                continue
            i += 1
        left = producer.flush(150) if broker.alive() else messages - i
        seconds = time.perf_counter() - start
        if not broker.alive():
            tail = " / ".join(list(broker.output)[-3:])
            raise RuntimeError(f"the broker exited during the produce: {tail}")
        after = broker.sample()
        row = {
            "partitions": total, "topics": n_topics, "create_s": round(created, 2),
            "produced_to": len(targets),
            "messages": messages, "unacknowledged": left,
            "msgs_per_s": round(messages / seconds), "seconds": round(seconds, 2),
            "broker_cpu_us_per_msg": round((after.cpu_s - before.cpu_s) * 1e6 / messages, 2),
            "rss_idle_mb": _mb(broker.idle.rss), "rss_after_create_mb": _mb(after_create.rss),
            "rss_after_produce_mb": _mb(after.rss), "open_files_after_create": open_files,
        }  # fmt: skip
        del producer
    return row


def hosted_series(counts: list[int], messages: int, log: Log) -> list[dict[str, Any]]:
    """The same traffic (round-robin over 10 partitions) beside more and more idle ones."""
    rows = []
    for total in counts:
        try:
            row = _partitions(total, messages, active=10)
        except Exception as exc:
            row = {"partitions": total, "error": f"{type(exc).__name__}: {exc}"}
        log(f"hosted {total}: {row}")
        rows.append(row)
    return rows


# --- connections -------------------------------------------------------------------------


async def _connections(
    bootstrap: str, topic: str, conns: int, requests: int, batch: bytes, acks: str = "1"
) -> list[float]:
    clients = []
    for _ in range(conns):  # all connected before the clock starts
        clients.append(await AsyncWireClient.connect(bootstrap))
    latencies: list[float] = []
    errors: list[int] = []

    async def one(k: int, client: AsyncWireClient) -> None:
        body = produce_request(topic, k % 10, batch, -1 if acks == "all" else int(acks))
        for _ in range(requests):
            t = time.perf_counter()
            response = await client.call(body, PRODUCE_VERSION)
            latencies.append(time.perf_counter() - t)
            code = produce_error(response)
            if code:
                errors.append(code)

    await _drive(clients, one, errors)
    return latencies


async def _drive(
    clients: list[AsyncWireClient],
    one: Callable[[int, AsyncWireClient], Awaitable[None]],
    errors: list[int],
) -> None:
    """Run `one(k, client)` on every connection at once, then close them all; any produce
    error `one` noted fails the run."""
    try:
        async with trio.open_nursery() as nursery:
            for k, client in enumerate(clients):
                nursery.start_soon(one, k, client)
    finally:
        for client in clients:
            await client.aclose()
    if errors:
        raise RuntimeError(f"{len(errors)} produce errors, e.g. code {errors[0]}")


def connections_series(counts: list[int], records: int, log: Log) -> list[dict[str, Any]]:
    per_batch = 100
    batch = record_batch(per_batch, 100)
    rows = []
    for conns in counts:
        requests = max(1, records // per_batch // conns)
        with _broker(f"c{conns}") as broker:
            topic = topic_name("conns")
            leader = create_led_by_one(broker, topic, 10)
            before = broker.sample()
            start = time.perf_counter()
            lat = trio.run(_connections, leader, topic, conns, requests, batch, _acks())
            seconds = time.perf_counter() - start
            after = broker.sample()
        sent = conns * requests * per_batch
        ms = sorted(x * 1000 for x in lat)
        row = {
            "connections": conns, "requests_each": requests, "records": sent,
            "msgs_per_s": round(sent / seconds), "seconds": round(seconds, 2),
            "broker_cpu_us_per_msg": round((after.cpu_s - before.cpu_s) * 1e6 / sent, 2),
            "latency_p50_ms": round(percentile(ms, 50), 2), "latency_p99_ms": round(percentile(ms, 99), 2),
            "rss_after_mb": _mb(after.rss), "rss_idle_mb": _mb(broker.idle.rss),
        }  # fmt: skip
        log(f"connections {conns}: {row}")
        rows.append(row)
    return rows


# --- partitions written, several in each request -----------------------------------------

SPREAD_PER_REQUEST = 10
"""Partitions in each Produce of the spread series, one 100-record batch each."""
SPREAD_CONNECTIONS = 16


def create_led_by_node_one(broker: RunningBroker, topics: list[str], per_topic: int,
                           timeout: float = 600) -> str:  # fmt: skip
    """`topics` of `per_topic` partitions, every one led by node 1 (replicas 1, 2, 3 on a
    cluster; the only node otherwise); node 1's address, which the wire client talks to."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    replicas = [[1, 2, 3]] * per_topic if CLUSTER["on"] else [[1]] * per_topic
    config = {"min.insync.replicas": "2"} if CLUSTER["on"] else {}
    for i in range(0, len(topics), 100):
        chunk = [NewTopic(t, num_partitions=per_topic, replica_assignment=replicas, config=config)
                 for t in topics[i : i + 100]]
        for future in admin.create_topics(chunk, operation_timeout=timeout,
                                          request_timeout=timeout).values():  # fmt: skip
            future.result(timeout)
    deadline = time.monotonic() + timeout
    wanted = set(topics)
    while True:
        meta = admin.list_topics(timeout=timeout)
        ready = {name for name, t in meta.topics.items()
                 if name in wanted and t.error is None and len(t.partitions) == per_topic
                 and all(p.leader == 1 and len(p.isrs) == len(replicas[0])
                         for p in t.partitions.values())}  # fmt: skip
        if ready == wanted:
            node = meta.brokers[1]
            return f"{node.host}:{node.port}"
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(wanted - ready)} topics not led by node 1 with a full ISR")
        time.sleep(0.2)


RETRIABLE = {6, 19, 20}
"""NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS(_AFTER_APPEND): a partition whose leader or
ISR news has not reached node 1 yet, though the metadata another node answered shows it."""


async def _spread(leader: str, slots: list[tuple[str, int]], requests: int, batch: bytes,
                  acks: int, retry: bool = False) -> list[float]:  # fmt: skip
    """`requests` Produces over SPREAD_CONNECTIONS connections, each one request at a time;
    request j carries the batch for SPREAD_PER_REQUEST consecutive slots from j * that. With
    `retry`, a request answered with a RETRIABLE error is sent again (the first pass, which
    also waits out each partition's first leadership news)."""
    clients = [await AsyncWireClient.connect(leader) for _ in range(SPREAD_CONNECTIONS)]
    latencies: list[float] = []
    errors: list[int] = []
    taken = [0]

    async def one(_k: int, client: AsyncWireClient) -> None:
        while taken[0] < requests:
            j = taken[0]
            taken[0] += 1
            first = j * SPREAD_PER_REQUEST % len(slots)
            body = produce_many(slots[first : first + SPREAD_PER_REQUEST], batch, acks)
            deadline = time.monotonic() + 60
            while True:
                t = time.perf_counter()
                response = await client.call(body, PRODUCE_VERSION)
                latencies.append(time.perf_counter() - t)
                code = produce_error(response)
                if not (retry and code in RETRIABLE and time.monotonic() < deadline):
                    break
                await trio.sleep(0.05)
            if code:
                errors.append(code)

    await _drive(clients, one, errors)
    return latencies


def spread_series(counts: list[int], records: int, log: Log,
                  brokers: Mapping[str, Callable[[str], contextlib.AbstractContextManager[RunningBroker]]],
                  ) -> list[dict[str, Any]]:  # fmt: skip
    """The same records and the same request shape (SPREAD_PER_REQUEST partitions of one
    100-record batch each) over more and more partitions, all led by one node: what a record
    costs must not depend on how many partitions the writes are spread over. A first pass
    writes one batch to every partition and is reported apart (per partition): a partition's
    first write is a cost per partition, not per record."""
    per_batch = 100
    batch = record_batch(per_batch, 100)
    acks = -1 if CLUSTER["on"] else 1
    requests = records // (per_batch * SPREAD_PER_REQUEST)
    rows = []
    for total in counts:
        for name, start in brokers.items():
            row: dict[str, Any] = {"broker": name, "partitions": total}
            try:
                with start(f"s{total}") as broker:
                    topics = [topic_name(f"s{i}") for i in range(total // 10)]
                    t0 = time.perf_counter()
                    leader = create_led_by_node_one(broker, topics, 10)
                    row["create_s"] = round(time.perf_counter() - t0, 2)
                    slots = [(t, p) for t in topics for p in range(10)]
                    first = broker.sample()  # one batch to each partition: its first write
                    trio.run(_spread, leader, slots, total // SPREAD_PER_REQUEST, batch, acks, True)
                    before = broker.sample()
                    row["first_write_us_per_partition"] = round(
                        (before.cpu_s - first.cpu_s) * 1e6 / total, 1)
                    started = time.perf_counter()
                    lat = trio.run(_spread, leader, slots, requests, batch, acks)
                    seconds = time.perf_counter() - started
                    after = broker.sample()
                sent = requests * per_batch * SPREAD_PER_REQUEST
                ms = sorted(x * 1000 for x in lat)
                row |= {
                    "records": sent, "msgs_per_s": round(sent / seconds),
                    "broker_cpu_us_per_msg": round((after.cpu_s - before.cpu_s) * 1e6 / sent, 2),
                    "latency_p50_ms": round(percentile(ms, 50), 2),
                    "latency_p99_ms": round(percentile(ms, 99), 2),
                }  # fmt: skip
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {exc}"
            log(f"spread {name} {total}: {row}")
            rows.append(row)
    return rows


@contextlib.contextmanager
def _kafka(label: str) -> Iterator[RunningBroker]:
    """The peer for --kafka: three Apache Kafka combined KRaft nodes (`bench/replication.py`)."""
    from bench.replication import KafkaCluster

    with tempfile.TemporaryDirectory(prefix=f"strom-bench-kafka-{label}-") as tmp:
        cluster = KafkaCluster(Path(tmp))
        try:
            yield cluster
        finally:
            cluster.close()


# --- filling a log, fetch by position, recovery -------------------------------------------


def fill(bootstrap: str, topic: str, nbytes: int, in_flight: int = 8, acks: int = 1) -> int:
    """Append about `nbytes` in ~1 MB batches of 1 KiB values to partition 0; records sent.

    960 values a batch keeps it under the default message.max.bytes (1,048,588).
    """
    per_batch = 960
    batch = record_batch(per_batch, 1024)
    body = produce_request(topic, 0, batch, acks)
    count = max(1, nbytes // len(batch))
    with WireClient(bootstrap) as client:
        pending = 0
        for _ in range(count):
            client.send(body, PRODUCE_VERSION)
            pending += 1
            if pending >= in_flight:
                code = produce_error(client.receive())
                if code:
                    raise RuntimeError(f"produce error {code}")
                pending -= 1
        while pending:
            code = produce_error(client.receive())
            if code:
                raise RuntimeError(f"produce error {code}")
            pending -= 1
    return count * per_batch


def fetch_series(log_bytes: int, rounds: int, log: Log) -> dict[str, Any]:
    with _broker("fetch") as broker:
        topic = topic_name("fetch")
        leader = create_led_by_one(broker, topic, 1)
        t0 = time.perf_counter()
        records = fill(leader, topic, log_bytes, acks=-1 if CLUSTER["on"] else 1)
        fill_s = time.perf_counter() - t0
        positions = {"start": 0, "middle": records // 2, "end": max(0, records - 1024)}
        times: dict[str, list[float]] = {name: [] for name in positions}
        sizes: dict[str, int] = {}
        before = broker.sample()
        with WireClient(leader) as client:
            for _ in range(rounds):
                for name, offset in positions.items():
                    t = time.perf_counter()
                    code, _hw, size = fetched(
                        client.call(fetch_request(topic, 0, offset, MIB), FETCH_VERSION)
                    )
                    times[name].append((time.perf_counter() - t) * 1000)
                    if code or not size:
                        raise RuntimeError(f"fetch at {offset}: error {code}, {size} bytes")
                    sizes[name] = size
        after = broker.sample()
        out: dict[str, Any] = {
            "log_bytes": records * 1034, "records": records, "fill_s": round(fill_s, 1),
            "fill_mb_per_s": round(records * 1034 / 1e6 / fill_s, 1), "rounds": rounds,
            "broker_cpu_ms_per_fetch": round(
                (after.cpu_s - before.cpu_s) * 1000 / (rounds * len(positions)), 3
            ),
            "rss_after_mb": _mb(after.rss),
            "positions": {
                name: {
                    "offset": positions[name], "response_records_bytes": sizes[name],
                    "p50_ms": round(statistics.median(ts), 3),
                    "p99_ms": round(percentile(sorted(ts), 99), 3), "max_ms": round(max(ts), 3),
                }
                for name, ts in times.items()
            },
        }  # fmt: skip
    log(f"fetch: {out}")
    return out


def _ready_times(broker: RunningBroker, topic: str, end: int, deadline_s: float = 300) -> float:
    """Seconds from process start until ListOffsets(latest) reports `end`."""
    t_end = time.perf_counter() + deadline_s
    while time.perf_counter() < t_end:
        try:
            with WireClient(broker.bootstrap, timeout=deadline_s) as client:
                code, offset = latest_offset(
                    client.call(list_offsets_request(topic, 0), LIST_OFFSETS_VERSION)
                )
            if code == 0 and offset == end:
                return time.perf_counter() - broker.started_at
            if code == 0 and offset != end:
                raise RuntimeError(f"log end {offset} after restart, {end} expected")
        except OSError:
            pass
        time.sleep(0.001)
    raise TimeoutError(f"{topic} not readable after {deadline_s}s")


def recovery_series(sizes: list[int], log: Log) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="strom-recovery-") as tmp:
            workdir = Path(tmp)
            spec = StromSpec(label="recovery")
            topic = topic_name("recovery")
            with start_broker(spec, workdir, keep=True) as broker:
                empty_start = broker.startup_s
                create_topic(broker.bootstrap, topic, 1)
                records = fill(broker.bootstrap, topic, size)
                os.kill(broker.pid, signal.SIGKILL)
            with start_broker(spec, workdir, keep=True) as broker:
                unclean = (broker.startup_s, _ready_times(broker, topic, records))
            # leaving the context stopped it with SIGTERM: a clean shutdown
            with start_broker(spec, workdir, keep=True) as broker:
                clean = (broker.startup_s, _ready_times(broker, topic, records))
        row = {
            "log_bytes": records * 1034, "records": records,
            "empty_start_metadata_s": round(empty_start, 3),
            "after_kill9_metadata_s": round(unclean[0], 3),
            "after_kill9_log_ready_s": round(unclean[1], 3),
            "after_clean_stop_metadata_s": round(clean[0], 3),
            "after_clean_stop_log_ready_s": round(clean[1], 3),
        }  # fmt: skip
        log(f"recovery {size // MIB} MiB: {row}")
        rows.append(row)
    return rows


# --- tables ------------------------------------------------------------------------------


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["| " + " | ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) + " |"
             for r in [header, *rows]]  # fmt: skip
    lines.insert(1, "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|")
    return "\n".join(lines)


def report(doc: dict[str, Any]) -> str:
    out = []
    if "partitions" in doc:
        out += ["## Partitions (500k x 100 B produced round-robin over all)\n", table(
            ["partitions", "topics", "create s", "open files", "msgs/s", "broker µs/msg",
             "RSS idle MB", "RSS after create MB", "RSS after produce MB"],
            [[f"{r['partitions']:,}", f"{r['topics']:,}", f"{r['create_s']}",
              f"{r['open_files_after_create']:,}", f"{r['msgs_per_s']:,}",
              f"{r['broker_cpu_us_per_msg']}", f"{r['rss_idle_mb']}", f"{r['rss_after_create_mb']}",
              f"{r['rss_after_produce_mb']}"] if "error" not in r else
             [f"{r['partitions']:,}", *["n/a"] * 8] for r in doc["partitions"]],
        ), ""]  # fmt: skip
    failed = [r for r in doc.get("partitions", []) if "error" in r]
    out += [f"- {r['partitions']:,} partitions: n/a: {r['error']}" for r in failed]
    if failed:
        out.append("")
    if "hosted" in doc:
        out += ["## Hosted partitions (500k x 100 B round-robin over 10 of them)\n", table(
            ["partitions hosted", "create s", "open files", "msgs/s", "broker µs/msg",
             "RSS after create MB", "RSS after produce MB"],
            [[f"{r['partitions']:,}", f"{r['create_s']}", f"{r['open_files_after_create']:,}",
              f"{r['msgs_per_s']:,}", f"{r['broker_cpu_us_per_msg']}",
              f"{r['rss_after_create_mb']}", f"{r['rss_after_produce_mb']}"]
             if "error" not in r else [f"{r['partitions']:,}", *["n/a"] * 6]
             for r in doc["hosted"]],
        ), ""]  # fmt: skip
    if "connections" in doc:
        acks = "all" if doc["meta"].get("cluster") else "1"
        out += [f"## Concurrent producer connections (100-record batches, acks={acks})\n", table(
            ["connections", "records", "msgs/s", "broker µs/msg", "request p50 ms",
             "request p99 ms", "RSS after MB"],
            [[f"{r['connections']:,}", f"{r['records']:,}", f"{r['msgs_per_s']:,}",
              f"{r['broker_cpu_us_per_msg']}", f"{r['latency_p50_ms']}", f"{r['latency_p99_ms']}",
              f"{r['rss_after_mb']}"] for r in doc["connections"]],
        ), ""]  # fmt: skip
    if "spread" in doc:
        acks = "all" if doc["meta"].get("cluster") else "1"
        out += [f"## Partitions written, {SPREAD_PER_REQUEST} in each Produce (one 100-record "
                f"batch each, {SPREAD_CONNECTIONS} connections to the leader, acks={acks})\n", table(
            ["broker", "partitions", "create s", "first write µs/partition", "records", "msgs/s",
             "broker µs/msg", "request p50 ms", "request p99 ms"],
            [[r["broker"], f"{r['partitions']:,}", f"{r['create_s']}",
              f"{r['first_write_us_per_partition']}", f"{r['records']:,}",
              f"{r['msgs_per_s']:,}", f"{r['broker_cpu_us_per_msg']}", f"{r['latency_p50_ms']}",
              f"{r['latency_p99_ms']}"] if "error" not in r else
             [r["broker"], f"{r['partitions']:,}", *["n/a"] * 7] for r in doc["spread"]],
        ), ""]  # fmt: skip
        out += [f"- {r['broker']}, {r['partitions']:,} partitions: n/a: {r['error']}"
                for r in doc["spread"] if "error" in r]
    if "fetch" in doc:
        f = doc["fetch"]
        out += [f"## Fetch latency by position in a {f['log_bytes'] / 1e9:.2f} GB log "
                f"({f['rounds']} fetches of up to 1 MiB each)\n", table(
            ["position", "offset", "bytes returned", "p50 ms", "p99 ms", "max ms"],
            [[name, f"{p['offset']:,}", f"{p['response_records_bytes']:,}", f"{p['p50_ms']}",
              f"{p['p99_ms']}", f"{p['max_ms']}"] for name, p in f["positions"].items()],
        ), ""]  # fmt: skip
    if "recovery" in doc:
        out += ["## Start-up after kill -9 (unflushed tail = whole log) and after a clean stop\n", table(
            ["log MB", "empty start s", "kill -9: Metadata s", "kill -9: log ready s",
             "clean: Metadata s", "clean: log ready s"],
            [[f"{r['log_bytes'] / 1e6:,.0f}", f"{r['empty_start_metadata_s']}",
              f"{r['after_kill9_metadata_s']}", f"{r['after_kill9_log_ready_s']}",
              f"{r['after_clean_stop_metadata_s']}", f"{r['after_clean_stop_log_ready_s']}"]
             for r in doc["recovery"]],
        ), ""]  # fmt: skip
    return "\n".join(out)


SERIES = ("partitions", "hosted", "connections", "spread", "fetch", "recovery")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--only", default=",".join(SERIES), help=f"subset of {', '.join(SERIES)}")
    parser.add_argument(
        "--partitions", help="comma-separated partition counts (default 1,10,...,10000)"
    )
    parser.add_argument("--json", type=Path, help="where to write the JSON results")
    parser.add_argument("--cluster", action="store_true",
                        help="three combined nodes, replication factor 3 (see the docstring)")  # fmt: skip
    parser.add_argument("--kafka", action="store_true",
                        help="with --cluster: the spread series on Apache Kafka's 3 nodes too")  # fmt: skip
    args = parser.parse_args(argv)
    CLUSTER["on"] = args.cluster
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    if args.cluster:
        only.discard("recovery")
    if args.kafka and not args.cluster:
        parser.error("--kafka needs --cluster (the peer is a three-node cluster)")
    if only - set(SERIES):
        parser.error(f"unknown series: {', '.join(only - set(SERIES))}")

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    q = args.quick
    started = time.perf_counter()
    doc: dict[str, Any] = {"meta": {"benchmark": "scaling", "quick": q, "cluster": args.cluster,
                                    **machine_info()}}  # fmt: skip
    if "partitions" in only:
        counts = [1, 10, 100] if q else [1, 10, 100, 1_000, 5_000, 10_000]
        if args.partitions:
            counts = [int(x) for x in args.partitions.split(",")]
        doc["partitions"] = partitions_series(counts, 2_000 if q else 500_000, log)
    if "hosted" in only:
        doc["hosted"] = hosted_series(
            [10, 100] if q else [10, 1_000, 10_000], 2_000 if q else 500_000, log
        )
    if "connections" in only:
        doc["connections"] = connections_series(
            [1, 10, 50] if q else [1, 10, 100, 1_000], 5_000 if q else 1_000_000, log
        )
    if "spread" in only:
        brokers = {"strom": _broker} | ({"kafka": _kafka} if args.kafka else {})
        counts = [10, 100] if q else [10, 100, 1_000, 10_000]
        if args.partitions:
            counts = [int(x) for x in args.partitions.split(",")]
        doc["spread"] = spread_series(counts, 10_000 if q else 1_000_000, log, brokers)
    if "fetch" in only:
        doc["fetch"] = fetch_series(8 * MIB if q else 2048 * MIB, 5 if q else 50, log)
    if "recovery" in only:
        doc["recovery"] = recovery_series(
            [2 * MIB, 8 * MIB] if q else [64 * MIB, 256 * MIB, 1024 * MIB], log
        )
    doc["meta"]["elapsed_s"] = round(time.perf_counter() - started, 1)
    print(report(doc))
    name = "scaling" + (".cluster" if args.cluster else "") + (".quick" if q else "")
    path = args.json or RESULTS_DIR / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
