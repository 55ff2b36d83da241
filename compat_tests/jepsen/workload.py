"""The queue workload: producers, a live consumer and a nemesis against a 3-node cluster.

Producers (confluent-kafka, enable.idempotence, acks=all) send unique values ("<producer>-<n>")
to partitions drawn from the seed and record each value's fate from its delivery report:
acknowledged with (partition, offset), or not (the error; a timeout is indeterminate: the write
may or may not have happened). A consumer assigned every partition from the beginning reads
throughout, recording (partition, offset, value). Meanwhile the nemesis injects the scheduled
faults (`nemesis.schedule`, `faults.Injector`) and heals each. At the end the load stops, every
node is healed, a fresh consumer reads each partition from offset 0 to its high watermark (the
final read the checker holds the acknowledgements against), and every node's log of each
partition is compared, batch by batch, up to the high watermark (`replicas.compare`).

Threads, not trio: librdkafka's clients are blocking and run their own threads; the nemesis
(signals, restarts, DescribeQuorum) runs on the calling thread.
"""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from compat_tests.cluster.quorum import quorum_state
from compat_tests.confluent_kafka import ck
from compat_tests.helpers import Deadline
from compat_tests.jepsen.batches import batches_with
from compat_tests.jepsen.checker import History, Outcome, Read, Send
from compat_tests.jepsen.faults import Injector, leader_of
from compat_tests.jepsen.nemesis import Fault, Mix, schedule
from compat_tests.jepsen.replicas import compare
from strom.broker.testing.cluster import ClusterProcess

TOPIC = "jepsen-queue"
DEFINITE_FAILURES = {
    KafkaError._PURGE_QUEUE,  # never left the client
    KafkaError.NOT_ENOUGH_REPLICAS,  # refused before the append
    KafkaError.INVALID_REQUIRED_ACKS,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
}
"""Errors after which the value is certainly not in the log; any other error is indeterminate."""


ELR = "eligible.leader.replicas.version"
TIMEOUTS = {
    "broker.session.timeout.ms": "6000",
    "broker.heartbeat.interval.ms": "1500",
    "replica.lag.time.max.ms": "10000",
}
"""The queue cluster's timeouts, shorter than Kafka's defaults (9 s, 2 s, 30 s) so that the
nemesis's long faults (13-17 s) outlast both the session and the ISR lag without making a
100-fault run last an hour."""


@dataclass
class Options:
    seed: int = 1
    faults: int = 4
    mix: Mix = "classic"
    duration: float = 0.0
    """With no faults: seconds of load."""
    whole_cluster_power_cuts: bool = False
    partitions: int = 3
    producers: int = 2
    rate: float = 100.0
    """Values per second, per producer."""
    warmup: float = 3.0
    tail: float = 3.0
    """Seconds of load after the last fault is healed."""
    drain_timeout: float = 60.0
    message_timeout_ms: int = 120_000
    """The producers' message.timeout.ms, as the Java client's delivery.timeout.ms default: a
    value not acknowledged within it makes librdkafka bump the producer epoch and send it again
    from sequence 0, which stores it twice if the first send was written (see the Results).
    The hard mix's double faults and whole-cluster kills stall a partition for longer than 30 s
    on this machine (two nodes restarting while the controller quorum is gone)."""
    consumer_debug: str = ""
    """librdkafka `debug` contexts for the live consumer (e.g. "fetch,topic,metadata,broker"),
    logged to `consumer_log`: what it was doing when it stopped receiving."""
    consumer_log: Path | None = None
    producer_debug: str = ""
    """librdkafka `debug` contexts for each producer (e.g. "eos,msg,protocol": `eos` logs every
    producer-epoch bump and its reason), logged to `producer-N.log` in `producer_log_dir`."""
    producer_log_dir: Path | None = None
    topic_config: dict[str, str] = field(default_factory=dict)
    """Configs of the queue topic beyond min.insync.replicas=2 (e.g. flush.messages=1)."""


@dataclass
class Run:
    """What a run did: the history for the checker, and the log of faults as injected."""

    history: History
    plan: list[Fault]
    log: list[str] = field(default_factory=list)
    seconds: float = 0.0


class _Worker(threading.Thread):
    """A thread whose exception is re-raised where it is joined (`join_checked`)."""

    failure: BaseException | None = None
    began = 0.0
    """time.monotonic() when the load began: the history's times count from it."""

    def run(self) -> None:
        try:
            self.work()
        except BaseException as exc:
            self.failure = exc

    def work(self) -> None:
        raise NotImplementedError

    def join_checked(self) -> None:
        self.join()
        if self.failure is not None:
            raise self.failure


class _Producer(_Worker):
    def __init__(self, index: int, bootstrap: str, opts: Options, stop: threading.Event) -> None:
        super().__init__(name=f"jepsen-producer-{index}", daemon=True)
        self.index = index
        self.bootstrap = bootstrap
        self.opts = opts
        self.stop = stop
        self.sends: list[Send] = []
        self.rng = random.Random(f"{opts.seed}/{index}")
        self.restarts = 0
        self.fatal = ""
        """A fatal error librdkafka reported (the producer must be replaced)."""
        self.fatal_errors: list[str] = []

    def on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self.fatal = err.name()

    def client(self) -> Producer:
        extra: dict[str, Any] = {}
        if self.opts.producer_debug and self.opts.producer_log_dir is not None:
            # one logger per producer thread, also for the replacement after a fatal error
            path = self.opts.producer_log_dir / f"producer-{self.index}.log"
            extra = {"debug": self.opts.producer_debug, "log_level": 7,
                     "logger": _debug_logger(path, self.began)}  # fmt: skip
        return ck.producer(
            self.bootstrap,
            **{
                "enable.idempotence": True,
                "message.timeout.ms": self.opts.message_timeout_ms,
                "linger.ms": 2,
                "client.id": f"jepsen-producer-{self.index}",
                "error_cb": self.on_error,
                "log_level": 2,  # connection refusals to a killed node are the point here
                **extra,
            },
        )

    def work(self) -> None:
        producer = self.client()
        interval = 1.0 / self.opts.rate
        next_at = time.monotonic()
        seq = 0
        while not self.stop.is_set():
            partition = self.rng.randrange(self.opts.partitions)
            send = Send(f"{self.index}-{seq}", self.index, partition, seq)
            send.sent_at = time.monotonic() - self.began
            try:
                producer.produce(TOPIC, value=send.value.encode(), partition=partition,
                                 on_delivery=_on_delivery(send, self.began))  # fmt: skip
            except BufferError:
                producer.poll(0.1)
                continue
            except KafkaException as exc:  # produce() refuses after a fatal error
                send.outcome, send.error = "failed", _name(exc.args[0])
                self.sends.append(send)
                seq += 1
                self.fatal = self.fatal or str(exc.args[0])
                producer = self._replace(producer)
                continue
            self.sends.append(send)
            seq += 1
            next_at = max(next_at + interval, time.monotonic() - 1.0)  # no catch-up bursts
            # serves delivery reports and paces the load (a rate, not a synchronisation)
            try:
                with ck.fatal_unmasked():
                    producer.poll(0)
                    while (wait := next_at - time.monotonic()) > 0:
                        producer.poll(wait)  # returns early when it served a delivery report
            except KafkaException as exc:  # a fatal error raised from poll()
                self.fatal = self.fatal or _name(exc.args[0])
            if self.fatal:  # a fatal idempotence error: a new producer (and producer id)
                producer = self._replace(producer)
        self._flush(producer)
        for send in self.sends:
            if send.outcome == "pending":
                send.outcome, send.error = "indeterminate", "no delivery report"

    def _flush(self, producer: Producer) -> None:
        """Wait for outstanding delivery reports; after a fatal error some never come (those
        values stay pending, then count as indeterminate)."""
        try:
            with ck.fatal_unmasked():
                producer.flush(self.opts.message_timeout_ms / 1000 + 5)
        except KafkaException as exc:
            self.fatal_errors.append(str(exc.args[0]))

    def _replace(self, producer: Producer) -> Producer:
        self.fatal_errors.append(self.fatal)
        # a fatal producer may never settle what it holds: purge (queued values fail as
        # _PURGE_QUEUE, certainly not written; in-flight ones as _PURGE_INFLIGHT, unknown)
        try:
            producer.purge()
        except KafkaException as exc:
            self.fatal_errors.append(str(exc.args[0]))
        self._flush(producer)
        self.restarts += 1
        self.fatal = ""
        return self.client()


def _name(error: Any) -> str:
    return error.name() if isinstance(error, KafkaError) else str(error)


def _on_delivery(send: Send, began: float) -> Callable[[KafkaError | None, Message], None]:
    def report(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            # everything read before anything is set: a report that fails part way (see
            # ck.fatal_unmasked) leaves its value pending, so indeterminate
            at, partition, offset = time.monotonic() - began, msg.partition(), msg.offset()
            assert partition == send.partition, (partition, send)
            send.outcome, send.offset, send.acked_at = "acked", offset, at
            return
        outcome: Outcome = "failed" if err.code() in DEFINITE_FAILURES else "indeterminate"
        send.outcome, send.error = outcome, err.name()

    return report


class _LiveConsumer(_Worker):
    def __init__(self, bootstrap: str, opts: Options, stop: threading.Event) -> None:
        super().__init__(name="jepsen-consumer", daemon=True)
        self.bootstrap = bootstrap
        self.opts = opts
        self.stop = stop
        self.reads: list[Read] = []
        self.errors: dict[str, int] = {}
        """Errors received instead of records, by "p<partition> NAME"."""

    def work(self) -> None:
        extra: dict[str, Any] = {}
        if self.opts.consumer_debug and self.opts.consumer_log is not None:
            extra = {"debug": self.opts.consumer_debug, "log_level": 7,
                     "logger": _debug_logger(self.opts.consumer_log, self.began)}  # fmt: skip
        consumer = _consumer(self.bootstrap, self.opts, **extra)
        try:
            while not self.stop.is_set():
                for msg in consumer.consume(num_messages=1000, timeout=0.2):
                    read = _read(msg, "live", time.monotonic() - self.began)
                    if read is None:
                        name = f"p{msg.partition()} {_name(msg.error())}"
                        self.errors[name] = self.errors.get(name, 0) + 1
                    else:
                        self.reads.append(read)
        finally:
            consumer.close()


_EVENTS = [
    ("fencings", re.compile(r"fenced broker \d+: its session timed out")),
    ("ISR shrinks", re.compile(r"jepsen-queue-\d+: proposing ISR \[([\d, ]*)\] \(committed \[([\d, ]*)\]\)")),
    ("leaderships", re.compile(r"leading jepsen-queue-\d+ in epoch")),
    ("truncations of a divergent tail", re.compile(r"jepsen-queue-\d+ diverges from leader")),
    ("unclean elections", re.compile(r"jepsen-queue-\d+: elected uncleanly")),
]  # fmt: skip


class EventTally:
    """Counts what the faults made the cluster do, from every node's log lines: brokers fenced
    by their lease, ISR shrinks proposed, leaderships of the queue topic taken, divergent tails
    truncated (a zombie leader's return), unclean elections."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {name: 0 for name, _ in _EVENTS}
        self._lock = threading.Lock()

    def __call__(self, node_id: int, line: str) -> None:
        for name, pattern in _EVENTS:
            found = pattern.search(line)
            if found is None:
                continue
            if name == "ISR shrinks" and not _shrinks(found.group(1), found.group(2)):
                continue
            with self._lock:
                self.counts[name] = self.counts.get(name, 0) + 1


def _shrinks(proposed: str, committed: str) -> bool:
    return len([b for b in proposed.split(",") if b.strip()]) < len(
        [b for b in committed.split(",") if b.strip()]
    )


def _debug_logger(path: Path, began: float) -> logging.Logger:
    """A logger writing librdkafka's debug lines to `path`, each stamped with the seconds since
    the load began (the run log's clock)."""

    class Stamp(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            return f"[{time.monotonic() - began:7.2f}s] {record.getMessage()}"

    logger = logging.getLogger(f"jepsen.debug.{path}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    if logger.handlers:  # a replaced client writes on to the same file
        return logger
    handler = logging.FileHandler(path)
    handler.setFormatter(Stamp())
    logger.addHandler(handler)
    return logger


def _consumer(bootstrap: str, opts: Options, **extra: Any) -> Consumer:
    config: dict[str, Any] = {"auto.offset.reset": "earliest", "log_level": 2, **extra}
    consumer = ck.consumer(bootstrap, **config)
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(opts.partitions)])
    return consumer


def _read(msg: Message, phase: Any, at: float = 0.0) -> Read | None:
    if msg.error() is not None:
        return None
    partition, offset, value = msg.partition(), msg.offset(), msg.value()
    assert partition is not None
    assert offset is not None
    assert isinstance(value, bytes)
    return Read(partition, offset, value.decode(), phase, at)


def cluster_settings(
    elr: int,
    *,
    split: bool = False,
    planted: tuple[str, ...] = (),
    overrides: dict[str, str] | None = None,
) -> dict[str, Any]:
    """ClusterProcess arguments of the queue cluster (also the CI test's `strom_cluster`): 3
    combined nodes, or with `split` 3 controllers (ids 1-3) and 3 brokers (ids 4-6)."""
    nodes = {"controllers": 3, "brokers": 3} if split else {"combined": 3}
    return {**nodes, "partitionable": True, "power_cuts": True,
            "overrides": {**TIMEOUTS, **(overrides or {})}, "features": {ELR: elr},
            "planted": planted}  # fmt: skip


def plan_of(opts: Options) -> list[Fault]:
    return schedule(
        opts.seed, opts.faults, opts.partitions, mix=opts.mix, warmup=opts.warmup,
        whole_cluster_power_cuts=opts.whole_cluster_power_cuts,
    )  # fmt: skip


Nemesis = Callable[[Injector, Callable[[str], None]], None]
"""A scripted nemesis (scenarios.py): runs during the load, through the injector's cluster."""


def run(
    cluster: ClusterProcess,
    opts: Options,
    say: Callable[[str], None] = print,
    nemesis: Nemesis | None = None,
) -> Run:
    """Create the topic, run load + faults (the seed's schedule, or `nemesis`), heal, read
    everything, compare the replicas; return the history."""
    plan = plan_of(opts) if nemesis is None else []
    out = Run(History([], [], opts.partitions), plan)

    def log(line: str) -> None:
        stamped = f"[{time.monotonic() - begun:6.1f}s] {line}"
        out.log.append(stamped)
        say(stamped)

    begun = time.monotonic()
    _create_topic(cluster, opts)
    log(f"topic {TOPIC}: {opts.partitions} partitions, replication factor 3, "
        "min.insync.replicas=2")  # fmt: skip
    stop_load, stop_reading = threading.Event(), threading.Event()
    producers = [_Producer(i, cluster.bootstrap, opts, stop_load) for i in range(opts.producers)]
    reader = _LiveConsumer(cluster.bootstrap, opts, stop_reading)
    load_began = time.monotonic()
    for thread in [*producers, reader]:
        thread.began = load_began
        thread.start()
    injector = Injector(cluster, TOPIC, opts.seed, log)
    tally = EventTally()
    for node in cluster.nodes:
        node.watchers.append(tally)
    try:
        try:
            if nemesis is not None:
                stop_load.wait(opts.warmup)  # the load's own clock, not a synchronisation
                nemesis(injector, log)
            for fault in plan:
                wait = load_began + fault.start - time.monotonic()
                if wait > 0:
                    stop_load.wait(wait)  # the schedule's clock, not a synchronisation
                injector.inject(fault)
            stop_load.wait(max(opts.tail, opts.duration if not plan and not nemesis else 0.0))
        finally:
            stop_load.set()
            log("load stopped; healing every node")
            _heal_all(cluster, log)
        for thread in producers:
            thread.join_checked()
    finally:
        stop_reading.set()  # also when the run failed: no client outlives it
    log("producers flushed: " + ", ".join(f"producer {p.index} sent {len(p.sends)}"
                                          f" (replaced {p.restarts}x)" for p in producers))  # fmt: skip
    for p in producers:
        for fatal in p.fatal_errors:
            log(f"producer {p.index}: fatal error {fatal}")
    reader.join_checked()
    out.history.sends = [s for p in producers for s in p.sends]
    out.history.reads = list(reader.reads)
    out.history.live_errors = dict(reader.errors)
    _final_read(cluster, opts, out.history, log)
    if out.history.final_complete and out.history.end_offsets:
        checked = compare(
            {n.node_id: n.data_dir / "data" for n in cluster.brokers}, TOPIC,
            out.history.end_offsets,
        )  # fmt: skip
        out.history.replicas_divergent = checked.divergent
        out.history.replicas_behind = checked.behind
        out.history.replicas_compared = checked.compared
    for node in cluster.nodes:
        node.watchers.remove(tally)
    out.history.events = dict(tally.counts)
    out.history.duplicate_batches = _duplicate_evidence(cluster, out.history)
    if opts.producer_debug and opts.producer_log_dir is not None:
        for p in producers:
            for bump in epoch_bumps(opts.producer_log_dir / f"producer-{p.index}.log"):
                log(f"producer {p.index}: librdkafka bumped its producer epoch at {bump}"
                    " (the load's clock)")  # fmt: skip
    out.seconds = time.monotonic() - begun
    return out


def _duplicate_evidence(cluster: ClusterProcess, history: History, most: int = 3) -> list[str]:
    """For the first values the final read found twice: the batch headers of every copy on
    one broker (who wrote each copy: leader epoch, producer id and epoch, sequence), the
    evidence `batches.py` gives on a kept run."""
    where: dict[str, set[tuple[int, int]]] = {}
    for read in history.reads:
        if read.phase == "final":
            where.setdefault(read.value, set()).add((read.partition, read.offset))
    twice = sorted(v for v, at in where.items() if len(at) > 1)[:most]
    if not twice:
        return []
    node = cluster.brokers[0]
    out = []
    for value in twice:
        partition = min(where[value])[0]
        for segment in sorted((node.data_dir / "data" / f"{TOPIC}-{partition}").glob("*.log")):
            for info in batches_with(segment.read_bytes(), [value], f"node {node.node_id}"):
                out.append(f"{value}: {info.describe()}")
    return out


_BUMP = re.compile(r"^\[\s*([\d.]+s)\] .*Beginning partition drain .* epoch bump .*: (.*)$")


def epoch_bumps(path: Path) -> list[str]:
    """Each producer-epoch bump in a producer's librdkafka debug log (`eos` context), as
    "t+SECONDS: REASON": after a bump librdkafka sends every unacknowledged message again from
    sequence 0 under the new epoch, which stores twice any that an earlier send had written
    (docs/replication.md, the long runs)."""
    if not path.exists():
        return []
    out = []
    with path.open(errors="replace") as lines:
        for line in lines:
            if "epoch bump" in line and (found := _BUMP.match(line.rstrip("\n"))) is not None:
                out.append(f"t+{found.group(1)}: {found.group(2)}")
    return out


def _create_topic(cluster: ClusterProcess, opts: Options) -> None:
    state = quorum_state(cluster)
    via = cluster.bootstrap
    if state is not None and cluster.node(state.leader_id).is_broker:
        via = cluster.node(state.leader_id).bootstrap
    new = ck.NewTopic(TOPIC, num_partitions=opts.partitions, replication_factor=3,
                      config={"min.insync.replicas": "2", **opts.topic_config})  # fmt: skip
    admin = ck.admin(via)  # kept referenced until the answer: dropping it aborts the request
    futures = admin.create_topics([new], operation_timeout=ck.TIMEOUT, request_timeout=ck.TIMEOUT)
    ck.result(futures[TOPIC])
    deadline = Deadline(30)
    while not all(_leader(cluster, p) is not None for p in range(opts.partitions)):
        if deadline.expired:
            raise AssertionError(f"{TOPIC}'s partitions have no leaders after 30s")
        time.sleep(0.1)  # polling the metadata against the deadline


def _leader(cluster: ClusterProcess, partition: int) -> int | None:
    return leader_of(cluster, TOPIC, partition)


def _heal_all(cluster: ClusterProcess, log: Callable[[str], None]) -> None:
    cluster.heal()
    for node in cluster.nodes:
        if node.process is not None and not node.alive:
            node.start()
            node.wait_started()
            log(f"node {node.node_id} restarted")
        elif node.alive:
            node.resume()
    cluster.wait_for_brokers(60)


def _final_read(
    cluster: ClusterProcess, opts: Options, history: History, log: Callable[[str], None]
) -> None:
    deadline = Deadline(opts.drain_timeout)
    consumer = _consumer(cluster.bootstrap, opts)
    try:
        ends: dict[int, int] = {}
        for p in range(opts.partitions):
            while p not in ends:
                try:
                    _, ends[p] = consumer.get_watermark_offsets(
                        TopicPartition(TOPIC, p), timeout=5, cached=False
                    )
                except KafkaException as exc:
                    if deadline.expired:
                        log(f"final read: no high watermark for partition {p}: {exc}")
                        history.final_complete = False
                        return
        history.end_offsets = ends
        log("final read to end offsets " + ", ".join(f"p{p}={o}" for p, o in ends.items()))
        position = dict.fromkeys(range(opts.partitions), 0)
        errors: dict[str, int] = {}
        while any(position[p] < ends[p] for p in ends):
            if deadline.expired:
                log(f"final read: reached {position} of {ends} in {opts.drain_timeout}s; "
                    f"consumer errors: {errors or 'none'}")  # fmt: skip
                history.final_complete = False
                return
            for msg in consumer.consume(num_messages=1000, timeout=0.2):
                read = _read(msg, "final")
                if read is not None:
                    history.reads.append(read)
                    position[read.partition] = max(position[read.partition], read.offset + 1)
                else:
                    name = f"p{msg.partition()} {_name(msg.error())}"
                    errors[name] = errors.get(name, 0) + 1
    finally:
        consumer.close()


def describe_plan(opts: Options, plan: list[Fault]) -> str:
    repeat = f"--seed {opts.seed} --faults {opts.faults} --mix {opts.mix}"
    if opts.whole_cluster_power_cuts:
        repeat += " --whole-cluster-power-cuts"
    if not plan:
        repeat += f" --duration {opts.duration:g}"
    head = (f"seed {opts.seed}: {opts.faults} faults ({opts.mix} mix), {opts.producers} "
            f"producers x {opts.rate:g}/s, {opts.partitions} partitions (repeat: python -m "
            f"compat_tests.jepsen {repeat})")  # fmt: skip
    return "\n".join([head, *(f"  {f.describe()}" for f in plan)])
