"""Socket-level fuzzer: mutated request frames against a real `strom serve` process.

    python -m tests.fuzz.socket_fuzz                       # 100,000 frames, random seed
    python -m tests.fuzz.socket_fuzz --frames 1000000 --seed 42 --connections 8
    python -m tests.fuzz.socket_fuzz --max-valid 0       # every frame corrupted

Frames are valid requests of every advertised API and version (`corpus.valid_frame`),
sent as they are or corrupted (`corpus.MUTATIONS`: bit flips, truncation, length
lies, huge counts, other API keys and versions, random bytes). Each session opens a
connection, sends 1-7 valid frames and usually one corrupted frame, half-closes and
reads until the broker closes; several sessions run at once. Meanwhile a control producer writes records with acks=all.

Afterwards the broker must be alive, answer a fresh ApiVersions and Metadata on a
new connection, return every acknowledged control record unchanged, and its log
must hold no traceback and no ERROR line. A session the broker leaves open longer
than `SESSION_TIMEOUT` is reported as a hang.

Reproducible: worker w draws from `random.Random(f"{seed}/{w}")`, so a seed replays
the same frames on the same connections (the broker's interleaving of connections
is up to the scheduler). The seed is printed first.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import trio

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import BrokerProcess
from strom.wire.errors import ErrorCode
from strom.wire.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from strom.wire.messages.fetch import FetchRequest, FetchResponse
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse
from strom.wire.messages.produce import ProduceRequest, ProduceResponse
from strom.wire.records import Record, build_batch, decode_batch, iter_batches
from tests.fuzz.corpus import NAMES, mutate, valid_frame

FRAMES_ENV = "STROM_FUZZ_FRAMES"
SEED_ENV = "STROM_FUZZ_SEED"
SESSION_TIMEOUT = 20.0
MAX_VALID = 7
"""A session sends 1 to MAX_VALID valid frames, then (four times in five) a corrupted one."""
CONTROL_TOPIC = "fuzz-control"
PROBLEM_MARKERS = ("Traceback", "level=ERROR", "level=CRITICAL", "handler for API key")
BROKER_OVERRIDES = {
    "group.min.session.timeout.ms": "10",
    "group.max.session.timeout.ms": "2000",
    "num.partitions": "2",
}
"""Group timeouts small enough that a fuzzed JoinGroup cannot hold a session for minutes."""


@dataclass
class Report:
    seed: int
    frames: int = 0
    sessions: int = 0
    responses: int = 0
    hangs: list[str] = field(default_factory=list)
    mutations: collections.Counter[str] = field(default_factory=collections.Counter)
    control_records: int = 0
    problems: list[str] = field(default_factory=list)
    log_lines: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        rate = self.frames / self.seconds if self.seconds else 0.0
        kinds = ", ".join(f"{k}={v}" for k, v in sorted(self.mutations.items()))
        return (
            f"seed={self.seed} frames={self.frames} sessions={self.sessions} "
            f"responses={self.responses} control_records={self.control_records} "
            f"hangs={len(self.hangs)} log_lines={self.log_lines} problems={len(self.problems)} "
            f"seconds={self.seconds:.1f} frames_per_second={rate:.0f}\n  mutations: {kinds}"
        )


class LogWatch:
    """Collects the broker's log lines that show a bug (from BrokerProcess's reader thread)."""

    def __init__(self, report: Report) -> None:
        self.report = report
        self._lock = threading.Lock()

    def __call__(self, line: str) -> None:
        with self._lock:
            self.report.log_lines += 1
            if any(marker in line for marker in PROBLEM_MARKERS):
                self.report.problems.append(line)


# --- fuzzing ----------------------------------------------------------------------------------


async def _session(bootstrap: str, frames: list[bytes]) -> int | None:
    """Send `frames` on a new connection, half-close, read to EOF; responses seen, None if hung."""
    host, port = bootstrap.rsplit(":", 1)
    responses = 0
    with trio.move_on_after(SESSION_TIMEOUT):
        stream = await trio.open_tcp_stream(host, int(port))
        try:
            try:
                await stream.send_all(b"".join(frames))
                await stream.send_eof()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the broker already closed on an earlier frame
            pending = b""
            while True:
                try:
                    data = await stream.receive_some(1 << 16)
                except trio.BrokenResourceError:
                    return responses
                if not data:
                    return responses
                pending += data
                while len(pending) >= 4:
                    size = int.from_bytes(pending[:4], "big")
                    if len(pending) < 4 + size:
                        break
                    pending = pending[4 + size :]
                    responses += 1
        finally:
            await trio.aclose_forcefully(stream)
    return None


async def _worker(bootstrap: str, worker: int, budget: int, max_valid: int, report: Report) -> None:
    rng = random.Random(f"{report.seed}/{worker}")
    correlation = 0
    while budget > 0:
        # A valid prefix the broker answers (handlers run on random field values),
        # then usually a corrupted frame (after which the broker may close).
        frames = []
        for _ in range(min(budget, rng.randint(1, max_valid) if max_valid else 0)):
            correlation += 1
            frames.append(valid_frame(rng, correlation)[0])
            report.mutations["none"] += 1
        if len(frames) < budget and (not max_valid or rng.random() < 0.8):
            correlation += 1
            data, name = mutate(rng, valid_frame(rng, correlation)[0])
            frames.append(data)
            report.mutations[name] += 1
        budget -= len(frames)
        report.frames += len(frames)
        report.sessions += 1
        responses = await _session(bootstrap, frames)
        if responses is None:
            report.hangs.append(f"worker {worker}: " + " ".join(f.hex() for f in frames))
        else:
            report.responses += responses


# --- the control topic ------------------------------------------------------------------------


async def _create_topics(client: KafkaClient, names: list[str]) -> None:
    request = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(name=n, num_partitions=2, replication_factor=1)
            for n in names
        ],
        timeout_ms=10_000,
    )
    response = await client.request(request, 7, CreateTopicsResponse)
    for topic in response.topics:
        assert topic.error_code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS), topic


async def _produce_control(client: KafkaClient, index: int) -> None:
    value = b"control-%d" % index
    request = ProduceRequest(
        acks=-1,
        timeout_ms=10_000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=CONTROL_TOPIC,
                partition_data=[
                    ProduceRequest.PartitionProduceData(
                        index=0, records=bytes(build_batch([Record(b"k", value)]))
                    )
                ],
            )
        ],
    )
    response = await client.request(request, 9, ProduceResponse)
    partition = response.responses[0].partition_responses[0]
    assert partition.error_code == ErrorCode.NONE, partition
    assert partition.base_offset == index, (partition.base_offset, index)


async def _control_producer(client: KafkaClient, report: Report, done: trio.Event) -> None:
    """Produce a control record every few milliseconds until the fuzzers finish."""
    while not done.is_set():
        await _produce_control(client, report.control_records)
        report.control_records += 1
        with trio.move_on_after(0.05):
            await done.wait()


async def _read_control(client: KafkaClient) -> list[bytes | None]:
    values: list[bytes | None] = []
    while True:
        request = FetchRequest(
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1 << 20,
            topics=[
                FetchRequest.FetchTopic(
                    topic=CONTROL_TOPIC,
                    partitions=[
                        FetchRequest.FetchPartition(
                            partition=0, fetch_offset=len(values), partition_max_bytes=1 << 20
                        )
                    ],
                )
            ],
        )
        response = await client.request(request, 12, FetchResponse)
        partition = response.responses[0].partitions[0]
        assert partition.error_code == ErrorCode.NONE, partition
        records = partition.records or b""
        got = [
            (r.offset, r.value)
            for _, batch in iter_batches(records)
            for r in decode_batch(batch)[1]
        ]
        if not got:
            return values
        for offset, value in got:
            assert offset == len(values), (offset, len(values))
            values.append(value)


# --- a run ------------------------------------------------------------------------------------


async def _run(
    bootstrap: str, frames: int, connections: int, max_valid: int, report: Report
) -> None:
    client = await KafkaClient.connect(bootstrap, "fuzz-control")
    try:
        await _create_topics(client, [CONTROL_TOPIC, *(n for n in NAMES if n.startswith("fuzz"))])
        started = time.monotonic()
        done = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_control_producer, client, report, done)
            async with trio.open_nursery() as fuzzers:
                share, extra = divmod(frames, connections)
                for w in range(connections):
                    fuzzers.start_soon(
                        _worker, bootstrap, w, share + (w < extra), max_valid, report
                    )
            done.set()
        report.seconds = time.monotonic() - started
    finally:
        await client.aclose()
    try:
        await _check_alive(bootstrap, report)
    except (AssertionError, OSError, trio.TooSlowError) as exc:
        report.problems.append(f"after the run: {type(exc).__name__}: {exc}")


async def _check_alive(bootstrap: str, report: Report) -> None:
    with trio.fail_after(30):
        client = await KafkaClient.connect(bootstrap, "fuzz-check")
        try:
            versions = await client.request(
                ApiVersionsRequest(client_software_name="strom-fuzz", client_software_version="1"),
                3,
                ApiVersionsResponse,
            )
            assert versions.error_code == ErrorCode.NONE, versions
            metadata = await client.request(
                MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=CONTROL_TOPIC)]),
                12,
                MetadataResponse,
            )
            assert metadata.topics[0].error_code == ErrorCode.NONE, metadata
            values = await _read_control(client)
        finally:
            await client.aclose()
    expected = [b"control-%d" % i for i in range(report.control_records)]
    if values != expected:
        differ = [i for i, (a, b) in enumerate(zip(values, expected, strict=False)) if a != b]
        report.problems.append(
            f"control topic: {len(values)} records read, {len(expected)} acknowledged, "
            f"differing offsets {differ[:10]}"
        )


def run(
    frames: int, seed: int, connections: int, data_dir: Path, max_valid: int = MAX_VALID
) -> Report:
    """Start a broker in `data_dir`, fuzz it, check it; the report lists what went wrong."""
    report = Report(seed)
    broker = BrokerProcess(data_dir, BROKER_OVERRIDES, on_line=LogWatch(report))
    with broker:
        trio.run(_run, broker.bootstrap, frames, connections, max_valid, report)
        assert broker.process is not None
        if broker.process.poll() is not None:
            report.problems.append(f"broker exited with {broker.process.returncode}")
    return report


def failures(report: Report) -> list[str]:
    return [*report.problems, *(f"hung session: {h}" for h in report.hangs)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=int(os.environ.get(FRAMES_ENV, 100_000)))
    parser.add_argument(
        "--seed", type=int, default=None, help="replay a run (printed by every run)"
    )
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument(
        "--max-valid",
        type=int,
        default=MAX_VALID,
        help="valid frames before a session's corrupted one (0: every frame corrupted)",
    )
    parser.add_argument(
        "--data-dir", type=Path, default=None, help="default: a temporary directory"
    )
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    print(
        f"socket fuzz: seed={seed} frames={args.frames} connections={args.connections} "
        f"max_valid={args.max_valid}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="strom-fuzz-") as tmp:
        report = run(
            args.frames, seed, args.connections, args.data_dir or Path(tmp), args.max_valid
        )
    print(report.summary())
    for line in failures(report)[:50]:
        print("FAIL", line)
    return 1 if failures(report) else 0


if __name__ == "__main__":
    sys.exit(main())
