"""The transactional workload: consume-transform-produce transactions over several partitions
against a 3-node cluster while the nemesis kills and stops the transaction coordinator and
partition leaders (`nemesis.py`'s "txn" mix; `faults.Injector`).

Each worker pairs a transactional producer (confluent-kafka, `transactional.id`
`jepsen-txn-<worker>`) with a read_committed consumer assigned every partition of the topic
from the beginning. A transaction: poll what the consumer has (its reads, Jepsen's `:poll`),
begin, send 1 to `max_sends` unique values ("<worker>-<txn>-<n>") to seeded partitions, send
the consumer's positions with `send_offsets_to_transaction` (the worker's group), then commit,
or, for a seeded share, abort on purpose. The outcome is recorded as librdkafka reports it:
committed (the commit acknowledged), aborted (an abort acknowledged, or a fatal error before
any commit was asked: the next InitProducerId of the id aborts it) or of unknown outcome (a
commit asked and neither acknowledged nor refused). A fatal error replaces the producer (the
new instance's InitProducerId fences the old one and ends its transaction).

At the end the load stops, every node is healed, a fresh read_committed consumer reads every
partition from 0 to its end (the *final read*: the version order), each worker's group's
offsets are fetched (stable offsets only), and every node's log is compared batch by batch
below the high watermark (`replicas.compare`). `txn_checker.check` judges the history.

Threads, as in the queue workload: librdkafka's clients block and run their own threads.
"""

from __future__ import annotations

import random
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
from compat_tests.jepsen.faults import TXN_STATE, Injector, leader_of
from compat_tests.jepsen.nemesis import Fault, Mix, schedule
from compat_tests.jepsen.replicas import compare
from compat_tests.jepsen.txn_checker import FINAL, Txn, TxnHistory, TxnRead, TxnSend
from compat_tests.jepsen.workload import ELR, TIMEOUTS, _debug_logger, _heal_all, _Worker
from strom.broker.testing.cluster import ClusterProcess

TOPIC = "jepsen-txn"
TXN_CLUSTER = {
    **TIMEOUTS,
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "1",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "1",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "2000",
}
"""The queue cluster's timeouts, `__transaction_state` and `__consumer_offsets` replicated
three times (Strom's defaults are server.properties' 1), each with one partition: one broker
coordinates every transactional id (the coordinator faults' victim) and every group."""


@dataclass
class TxnOptions:
    seed: int = 1
    faults: int = 4
    mix: Mix = "txn"
    duration: float = 0.0
    """With no faults: seconds of load."""
    partitions: int = 4
    workers: int = 3
    rate: float = 5.0
    """Transactions per second, per worker (at most: a commit may take longer)."""
    max_sends: int = 4
    abort_share: float = 0.15
    """The share of transactions aborted on purpose."""
    warmup: float = 5.0
    tail: float = 5.0
    transaction_timeout_ms: int = 40_000
    """The producers' transaction.timeout.ms (librdkafka's message.timeout.ms follows it):
    longer than the longest fault, so a stalled partition fails a transaction only rarely."""
    commit_timeout: float = 90.0
    """How long a worker retries a retriable commit or abort before it calls the outcome
    unknown and replaces the producer."""
    drain_timeout: float = 120.0
    """The final read's deadline: a transaction left open by a replaced producer holds the
    last stable offset until its timeout aborts it."""
    strict: bool = False
    """Judge every write cycle (the checker's `strict`)."""
    stuck_after: float = 60.0
    """Seconds the workers get to finish once the load stops (after the heal: the cluster is
    whole, calls answer in seconds): a transactional call that outlives them is stuck."""
    debug_dir: Path | None = None
    """Where each worker's producer writes librdkafka's eos,msg,protocol debug log."""


@dataclass
class TxnRun:
    history: TxnHistory
    plan: list[Fault]
    log: list[str] = field(default_factory=list)
    seconds: float = 0.0
    replaced: int = 0


def _name(error: Any) -> str:
    return error.name() if isinstance(error, KafkaError) else str(error)


class _TxnWorker(_Worker):
    def __init__(self, index: int, bootstrap: str, opts: TxnOptions, stop: threading.Event) -> None:
        super().__init__(name=f"jepsen-txn-{index}", daemon=True)
        self.index = index
        self.bootstrap = bootstrap
        self.opts = opts
        self.stop = stop
        self.rng = random.Random(f"{opts.seed}/txn/{index}")
        self.txns: list[Txn] = []
        self.reads: list[TxnRead] = []
        self.consumer_errors: dict[str, int] = {}
        self.replaced = 0
        self.fatal_errors: list[str] = []
        self.retried: dict[str, int] = {}
        """Retriable errors of transactional calls, by "call: NAME"."""
        self.doing = ""
        """The transactional call under way and since when (what a stuck worker waits for)."""

    @property
    def group(self) -> str:
        return group_of(self.index)

    def now(self) -> float:
        return time.monotonic() - self.began

    def work(self) -> None:
        consumer = ck.consumer(self.bootstrap, **{
            "group.id": self.group, "isolation.level": "read_committed",
            "auto.offset.reset": "earliest", "log_level": 2,
        })  # fmt: skip
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING)
                         for p in range(self.opts.partitions)])  # fmt: skip
        producer: Producer | None = None
        interval = 1.0 / self.opts.rate
        try:
            while not self.stop.is_set():
                began = time.monotonic()
                if producer is None:
                    producer = self._producer()
                    if producer is None:
                        break  # stopped while the coordinator could not be reached
                txn = Txn(f"{self.index}-{len(self.txns)}", self.index)
                txn.intent = "abort" if self.rng.random() < self.opts.abort_share else "commit"
                self._poll(consumer, txn)
                self.txns.append(txn)
                if not self._run(producer, consumer, txn):
                    self._drop(producer)
                    self.replaced += 1
                    producer = None
                wait = interval - (time.monotonic() - began)
                if wait > 0:
                    self.stop.wait(wait)  # the load's pace, not a synchronisation
        finally:
            consumer.close()
            if producer is not None:
                self._drop(producer)

    def _producer(self) -> Producer | None:
        """A new transactional producer, initialised (fencing any previous instance)."""
        while not self.stop.is_set():
            extra: dict[str, Any] = {}
            if self.opts.debug_dir is not None:
                extra = {"debug": "eos,msg,protocol", "log_level": 7, "logger": _debug_logger(
                    self.opts.debug_dir / f"txn-worker-{self.index}.log", self.began)}  # fmt: skip
            producer = ck.producer(self.bootstrap, **{
                "transactional.id": f"jepsen-txn-{self.index}",
                "transaction.timeout.ms": self.opts.transaction_timeout_ms,
                "linger.ms": 2, "client.id": f"jepsen-txn-{self.index}", "log_level": 2,
                **extra,
            })  # fmt: skip
            deadline = Deadline(self.opts.commit_timeout)
            while True:
                try:
                    self.doing = f"init_transactions since t+{self.now():.1f}s"
                    producer.init_transactions(10)
                    return producer
                except KafkaException as exc:
                    error = exc.args[0]
                    if error.retriable() and not deadline.expired and not self.stop.is_set():
                        self._count("init_transactions", error)
                        continue
                    self.fatal_errors.append(f"init_transactions: {_name(error)}")
                    self._drop(producer)
                    break
        return None

    def _drop(self, producer: Producer) -> None:
        try:
            with ck.fatal_unmasked():
                producer.purge()
                producer.flush(1)
        except KafkaException as exc:
            self.fatal_errors.append(f"purge: {_name(exc.args[0])}")

    def _poll(self, consumer: Consumer, txn: Txn) -> None:
        for msg in consumer.consume(num_messages=200, timeout=0.05):
            error = msg.error()
            if error is not None:
                name = f"p{msg.partition()} {_name(error)}"
                self.consumer_errors[name] = self.consumer_errors.get(name, 0) + 1
                continue
            read = _read(msg, f"w{self.index}", self.now())
            self.reads.append(read)
            txn.reads.append(read)

    def _run(self, producer: Producer, consumer: Consumer, txn: Txn) -> bool:
        """One transaction; False when the producer must be replaced."""
        try:
            producer.begin_transaction()
        except KafkaException as exc:
            return self._failed(txn, exc, committing=False)
        txn.started = self.now()
        for n in range(self.rng.randint(1, self.opts.max_sends)):
            send = TxnSend(f"{txn.id}-{n}", self.rng.randrange(self.opts.partitions))
            txn.sends.append(send)
            while True:
                try:
                    producer.produce(TOPIC, value=send.value.encode(), partition=send.partition,
                                     on_delivery=_on_delivery(send))  # fmt: skip
                    break
                except BufferError:
                    try:
                        with ck.fatal_unmasked():
                            producer.poll(0.1)
                    except KafkaException as exc:
                        return self._failed(txn, exc, committing=False, producer=producer)
                except KafkaException as exc:
                    return self._failed(txn, exc, committing=False, producer=producer)
        try:
            positions = consumer.position(consumer.assignment())
            offsets = [tp for tp in positions if tp.offset >= 0]
            txn.offsets = {tp.partition: tp.offset for tp in offsets}
            if offsets:
                self._retrying("send_offsets_to_transaction", lambda: producer.send_offsets_to_transaction(
                    offsets, consumer.consumer_group_metadata(), 10))  # fmt: skip
            if txn.intent == "abort":
                self._retrying("abort_transaction", lambda: producer.abort_transaction(10))
                txn.outcome, txn.finished = "aborted", self.now()
                return True
            self._retrying("commit_transaction", lambda: producer.commit_transaction(10))
            txn.outcome, txn.finished = "committed", self.now()
            return True
        except KafkaException as exc:
            return self._failed(txn, exc, committing=txn.intent == "commit", producer=producer)

    def _retrying(self, what: str, call: Callable[[], object]) -> None:
        """A transactional call, repeated while librdkafka calls its error retriable."""
        deadline = Deadline(self.opts.commit_timeout)
        self.doing = f"{what} since t+{self.now():.1f}s"
        while True:
            try:
                with ck.fatal_unmasked():
                    call()
                self.doing = ""
                return
            except KafkaException as exc:
                if not exc.args[0].retriable() or deadline.expired:
                    raise
                self._count(what, exc.args[0])

    def _count(self, what: str, error: Any) -> None:
        name = f"{what}: {_name(error)}"
        self.retried[name] = self.retried.get(name, 0) + 1

    def _failed(self, txn: Txn, exc: KafkaException, *, committing: bool,
                producer: Producer | None = None) -> bool:  # fmt: skip
        """An error ended the transaction's normal course: abort it if librdkafka says so
        (aborted, once acknowledged); else (fatal, or retries exhausted) its outcome is
        unknown if a commit was asked, aborted if not (the next instance aborts it)."""
        error = exc.args[0]
        txn.error = _name(error)
        if producer is not None and error.txn_requires_abort():
            try:
                self._retrying("abort_transaction", lambda: producer.abort_transaction(10))
                txn.outcome, txn.finished = "aborted", self.now()
                return True
            except KafkaException as again:
                txn.error += f", then {_name(again.args[0])}"
        txn.outcome = "indeterminate" if committing else "aborted"
        self.fatal_errors.append(f"{txn.id}: {txn.error}")
        return False


def group_of(worker: int) -> str:
    return f"jepsen-txn-{worker}"


def _on_delivery(send: TxnSend) -> Callable[[KafkaError | None, Message], None]:
    def report(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            send.offset = msg.offset()

    return report


def _read(msg: Message, consumer: str, at: float) -> TxnRead:
    partition, offset, value = msg.partition(), msg.offset(), msg.value()
    assert partition is not None
    assert offset is not None
    assert isinstance(value, bytes)
    return TxnRead(consumer, partition, offset, value.decode(), at)


def cluster_settings(elr: int = 1) -> dict[str, Any]:
    """ClusterProcess arguments of the transactional cluster (also the CI test's)."""
    return {"combined": 3, "partitionable": True, "power_cuts": True,
            "overrides": dict(TXN_CLUSTER), "features": {ELR: elr}}  # fmt: skip


def plan_of(opts: TxnOptions) -> list[Fault]:
    return schedule(opts.seed, opts.faults, opts.partitions, mix=opts.mix, warmup=opts.warmup)


def describe_plan(opts: TxnOptions, plan: list[Fault]) -> str:
    repeat = f"--workload txn --seed {opts.seed} --faults {opts.faults} --mix {opts.mix}"
    if not plan:
        repeat += f" --duration {opts.duration:g}"
    head = (f"seed {opts.seed}: {opts.faults} faults ({opts.mix} mix), {opts.workers} "
            f"transactional workers x {opts.rate:g} transactions/s of 1-{opts.max_sends} values, "
            f"{opts.abort_share:.0%} aborted on purpose, {opts.partitions} partitions "
            f"(repeat: python -m compat_tests.jepsen {repeat})")  # fmt: skip
    return "\n".join([head, *(f"  {f.describe()}" for f in plan)])


def run(cluster: ClusterProcess, opts: TxnOptions, say: Callable[[str], None] = print) -> TxnRun:
    """Create the topic, run load + faults, heal, read everything, compare the replicas."""
    plan = plan_of(opts)
    out = TxnRun(TxnHistory([], [], opts.partitions), plan)

    def log(line: str) -> None:
        stamped = f"[{time.monotonic() - begun:6.1f}s] {line}"
        out.log.append(stamped)
        say(stamped)

    begun = time.monotonic()
    _create_topic(cluster, opts)
    log(f"topic {TOPIC}: {opts.partitions} partitions, replication factor 3, "
        "min.insync.replicas=2")  # fmt: skip
    stop = threading.Event()
    workers = [_TxnWorker(i, cluster.bootstrap, opts, stop) for i in range(opts.workers)]
    load_began = time.monotonic()
    for worker in workers:
        worker.began = load_began
        worker.start()
    injector = Injector(cluster, TOPIC, opts.seed, log)
    try:
        for fault in plan:
            wait = load_began + fault.start - time.monotonic()
            if wait > 0:
                stop.wait(wait)  # the schedule's clock, not a synchronisation
            injector.inject(fault)
        stop.wait(max(opts.tail, opts.duration if not plan else 0.0))
    finally:
        log("healing every node")
        try:
            _heal_all(cluster, log)
        finally:
            log("load stops")
            stop.set()
            deadline = Deadline(opts.stuck_after)
            for worker in workers:
                while worker.is_alive() and not deadline.expired:
                    worker.join(min(30.0, max(0.1, deadline.remaining)))
                    if worker.is_alive():
                        log(f"worker {worker.index} still busy: {worker.doing}")
    for worker in workers:
        if worker.is_alive():  # its history so far is judged; its open transaction pending
            stuck = (f"worker {worker.index} stuck in {worker.doing} ({opts.stuck_after:.0f}s "
                     f"after the load stopped; retried {worker.retried or 'nothing'})")  # fmt: skip
            out.history.stuck.append(stuck)
            log(stuck)
            if opts.debug_dir is not None:
                tail = (opts.debug_dir / f"txn-worker-{worker.index}.log").read_text()
                log("its producer's last debug lines (librdkafka's log reaches Python only "
                    "through poll(): none come from within the stuck call):\n"
                    + "\n".join(tail.splitlines()[-40:]))  # fmt: skip
        else:
            worker.join_checked()
        committed = sum(t.outcome == "committed" for t in worker.txns)
        log(f"worker {worker.index}: {len(worker.txns)} transactions, {committed} committed, "
            f"producer replaced {worker.replaced}x; retried {worker.retried or 'nothing'}")  # fmt: skip
        for fatal in worker.fatal_errors[:10]:
            log(f"worker {worker.index}: {fatal}")
    out.replaced = sum(w.replaced for w in workers)
    history = out.history
    history.txns = [t for w in workers for t in list(w.txns)]
    history.reads = [r for w in workers for r in list(w.reads)]
    for w in workers:
        for name, n in w.consumer_errors.items():
            history.consumer_errors[f"w{w.index} {name}"] = n
    _final_read(cluster, opts, history, log)
    history.group_offsets = _group_offsets(cluster, opts, log)
    if history.final_complete and history.end_offsets:
        checked = compare(
            {n.node_id: n.data_dir / "data" for n in cluster.brokers}, TOPIC, history.end_offsets
        )
        history.replicas_divergent = checked.divergent
        history.replicas_behind = checked.behind
        history.replicas_compared = checked.compared
    out.seconds = time.monotonic() - begun
    return out


def _create_topic(cluster: ClusterProcess, opts: TxnOptions) -> None:
    state = quorum_state(cluster)
    via = cluster.bootstrap
    if state is not None and cluster.node(state.leader_id).is_broker:
        via = cluster.node(state.leader_id).bootstrap
    new = ck.NewTopic(TOPIC, num_partitions=opts.partitions, replication_factor=3,
                      config={"min.insync.replicas": "2"})  # fmt: skip
    admin = ck.admin(via)  # kept referenced until the answer: dropping it aborts the request
    futures = admin.create_topics([new], operation_timeout=ck.TIMEOUT, request_timeout=ck.TIMEOUT)
    ck.result(futures[TOPIC])
    deadline = Deadline(30)
    while not all(leader_of(cluster, TOPIC, p) is not None for p in range(opts.partitions)):
        if deadline.expired:
            raise AssertionError(f"{TOPIC}'s partitions have no leaders after 30s")
        time.sleep(0.1)  # polling the metadata against the deadline
    # the coordinator faults need __transaction_state: a producer's first FindCoordinator
    # creates it; wait for its leader so the first fault finds its victim
    producer = ck.producer(cluster.bootstrap, **{"transactional.id": "jepsen-txn-setup"})
    producer.init_transactions(ck.TIMEOUT)
    while leader_of(cluster, TXN_STATE, 0) is None:
        if deadline.expired:
            raise AssertionError(f"{TXN_STATE} has no leader")
        time.sleep(0.1)  # polling the metadata against the deadline


def _final_read(
    cluster: ClusterProcess, opts: TxnOptions, history: TxnHistory, log: Callable[[str], None]
) -> None:
    """read_committed from 0 until each partition's position passes its high watermark
    (a read_committed consumer's position moves past markers and aborted records)."""
    deadline = Deadline(opts.drain_timeout)
    watcher = ck.consumer(cluster.bootstrap)
    consumer = ck.consumer(cluster.bootstrap, **{"isolation.level": "read_committed",
                                                 "auto.offset.reset": "earliest"})  # fmt: skip
    try:
        ends: dict[int, int] = {}
        for p in range(opts.partitions):
            while p not in ends:
                try:
                    _, ends[p] = watcher.get_watermark_offsets(
                        TopicPartition(TOPIC, p), timeout=5, cached=False
                    )
                except KafkaException as exc:
                    if deadline.expired:
                        log(f"final read: no high watermark for partition {p}: {exc}")
                        history.final_complete = False
                        return
        history.end_offsets = ends
        log("final read (read_committed) to high watermarks "
            + ", ".join(f"p{p}={o}" for p, o in ends.items()))  # fmt: skip
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(opts.partitions)])
        position = dict.fromkeys(range(opts.partitions), 0)
        errors: dict[str, int] = {}
        while any(position[p] < ends[p] for p in ends):
            if deadline.expired:
                log(f"final read: reached {position} of {ends} in {opts.drain_timeout:.0f}s; "
                    f"consumer errors: {errors or 'none'}")  # fmt: skip
                history.final_complete = False
                return
            for msg in consumer.consume(num_messages=1000, timeout=0.2):
                if msg.error() is None:
                    history.reads.append(_read(msg, FINAL, 0.0))
                else:
                    name = f"p{msg.partition()} {_name(msg.error())}"
                    errors[name] = errors.get(name, 0) + 1
            for tp in consumer.position([TopicPartition(TOPIC, p) for p in ends]):
                position[tp.partition] = max(position[tp.partition], tp.offset)
    finally:
        consumer.close()
        watcher.close()


def _group_offsets(
    cluster: ClusterProcess, opts: TxnOptions, log: Callable[[str], None]
) -> dict[int, dict[int, int]] | None:
    """Each worker's group's committed offsets, stable ones only (read_committed asks with
    require_stable: a pending transactional commit answers UNSTABLE_OFFSET_COMMIT)."""
    out: dict[int, dict[int, int]] = {}
    deadline = Deadline(opts.drain_timeout)
    for worker in range(opts.workers):
        consumer = ck.consumer(cluster.bootstrap, **{"group.id": group_of(worker),
                                                     "isolation.level": "read_committed"})  # fmt: skip
        try:
            while True:
                try:
                    committed = consumer.committed(
                        [TopicPartition(TOPIC, p) for p in range(opts.partitions)], timeout=10
                    )
                    break
                except KafkaException as exc:
                    if deadline.expired:
                        log(f"group offsets of worker {worker}: {_name(exc.args[0])}")
                        return None
            out[worker] = {tp.partition: tp.offset for tp in committed if tp.offset >= 0}
        finally:
            consumer.close()
    return out
