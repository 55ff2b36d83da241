"""Differential testing: one request sequence, two brokers, responses compared field by field.

A sequence is a list of `Op`s (see `ops.py`). Each op builds its request from the sequence's
symbolic names (topic slot 1, member slot 0 of group 2, ...) and what the broker it runs against
told it earlier (its member ids, generations, topic ids), so the same sequence means the same
thing on Apache Kafka and on Strom. The sequence runs on Kafka, then on Strom, each on its own
connection, and the two response lists are compared:

- `normalise` turns a response into plain values, replacing what legitimately differs between
  two clusters: throttle times, the answering node's id/host/port, cluster ids, topic ids and
  member ids (each replaced by its order of first appearance, so "the same id twice" is still
  checked), and record batches (decoded into their fields and records; CRCs dropped).
- `compare` walks both normalised trees and counts every leaf compared; a difference is a
  failure unless `ALLOWED` lists it, with the reason also written in docs/apis.md.

Apache Kafka applies metadata changes asynchronously after answering (the controller commits,
then the broker's metadata publisher catches up), so after every admin change the Kafka side
waits for a *barrier*: it creates a fresh one-partition topic and polls ListOffsets on it until
the broker leads it; metadata records apply in order, so every earlier change is visible too.
Strom applies its changes before answering; it needs no barrier.
"""

from __future__ import annotations

import itertools
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from strom.broker.testing.client import KafkaClient
from strom.wire.errors import ErrorCode
from strom.wire.message import Message, Struct
from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from strom.wire.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse
from strom.wire.primitives import ZERO_UUID
from strom.wire.records import decode_batch, iter_batches

Plain = Any
"""A normalised response: dicts, lists, scalars."""


@dataclass
class Side:
    """One broker as a sequence sees it, with what the broker told the sequence so far."""

    name: str
    client: KafkaClient
    node_id: int
    needs_barrier: bool
    members: dict[tuple[int, int], str] = field(default_factory=dict)
    generations: dict[int, int] = field(default_factory=dict)
    barriers: itertools.count[int] = field(default_factory=itertools.count)

    async def barrier(self, prefix: str) -> None:
        """Wait until every metadata change made so far is applied on this broker (Kafka)."""
        if not self.needs_barrier:
            return
        name = f"{prefix}barrier-{next(self.barriers)}"
        topic = CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=1, replication_factor=1
        )
        created = await self.client.request(
            CreateTopicsRequest(topics=[topic], timeout_ms=30_000), 7, CreateTopicsResponse
        )
        assert created.topics[0].error_code == ErrorCode.NONE, created
        await wait_for_leader(self.client, name, 1)

    async def topic_id(self, name: str) -> uuid.UUID:
        """The topic's id on this broker, or a fixed id no topic has."""
        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=name)],
            allow_auto_topic_creation=False,
        )
        response = await self.client.request(request, 12, MetadataResponse)
        [topic] = response.topics
        if topic.error_code != ErrorCode.NONE:
            return UNKNOWN_TOPIC_ID
        return topic.topic_id


REQUEST_TIMEOUT = 20.0
"""Every request in these sequences is answered at once; a hang is a failure."""

UNKNOWN_TOPIC_ID = uuid.UUID("5ca1ab1e-0000-4000-8000-00000000d1ff")


async def wait_for_leader(client: KafkaClient, topic: str, partitions: int) -> None:
    """Poll ListOffsets until this broker leads every partition of `topic` (deadline 30 s)."""
    request = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=topic,
                partitions=[
                    ListOffsetsRequest.ListOffsetsPartition(partition_index=p, timestamp=-1)
                    for p in range(partitions)
                ],
            )
        ],
    )
    deadline = time.monotonic() + 30
    while True:
        response = await client.request(request, 7, ListOffsetsResponse)
        errors = [p.error_code for t in response.topics for p in t.partitions]
        if errors and all(e == ErrorCode.NONE for e in errors):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic}: partitions never got a leader: {errors}")
        await trio.sleep(0.02)


class Op(Protocol):
    """One request of a sequence; its repr is what hypothesis prints for a failing example."""

    @property
    def api(self) -> str: ...

    @property
    def version(self) -> int: ...

    async def run(self, side: Side, ctx: Context) -> Plain:
        """Send the request to `side`, return the normalised response (or what it stands for)."""
        ...


@dataclass
class Context:
    """What is the same on both sides: names, times, the example's unique prefix."""

    prefix: str
    ts0: int

    def topic(self, slot: int) -> str:
        return f"{self.prefix}t{slot}"

    def group(self, slot: int) -> str:
        return f"{self.prefix}g{slot}"


# ---------------------------------------------------------------- normalisation

_NODE_FIELDS = {"node_id", "leader_id", "controller_id", "coordinator_id", "broker_id"}
_NODE_LISTS = {"replica_nodes", "isr_nodes", "offline_replicas", "eligible_leader_replicas",
               "last_known_elr"}  # fmt: skip
_DROPPED = {"throttle_time_ms", "unknown_tagged_fields"}
_ID_STRINGS = {"member_id", "leader"}
_RECORD_FIELDS = {"records"}


class Normaliser:
    """Per-side replacement of ids by their order of first appearance."""

    def __init__(self, side: Side) -> None:
        self.side = side
        self.ids: dict[tuple[str, object], str] = {}
        self.counts: Counter[str] = Counter()

    def _id(self, kind: str, value: object) -> str:
        key = (kind, value)
        if key not in self.ids:
            self.ids[key] = f"<{kind}-{self.counts[kind]}>"
            self.counts[kind] += 1
        return self.ids[key]

    def __call__(self, value: object, name: str = "") -> Plain:
        if isinstance(value, Struct):
            return {
                f: self(getattr(value, f), f) for f in value.FIELDS if f not in _DROPPED
            }
        if isinstance(value, list):
            if name == "configs" and value and all(hasattr(v, "name") for v in value):
                # config lists by key: a missing or extra key is one difference, not a shift
                return {v.name: self(v, name) for v in value}
            if name in _NODE_LISTS:
                return [self._node(v) for v in value]
            return [self(v, name) for v in value]
        if name in _RECORD_FIELDS:
            return decode_records(value)
        if name in _NODE_FIELDS and isinstance(value, int):
            return self._node(value)
        if name == "host":
            return "<host>"
        if name == "port":
            return "<port>"
        if name == "cluster_id" and value is not None:
            return "<cluster>"
        if isinstance(value, uuid.UUID):
            if value in (ZERO_UUID, UNKNOWN_TOPIC_ID):
                return str(value)
            return self._id("uuid", value)
        if name in _ID_STRINGS and isinstance(value, str) and value:
            return self._id("member", value)
        if isinstance(value, memoryview | bytearray):
            return bytes(value)
        return value

    def _node(self, value: int) -> Plain:
        return "<self>" if value == self.side.node_id else value


def decode_records(data: object) -> Plain:
    """Record batches as their fields and records (CRCs and lengths dropped)."""
    if data is None:
        return None
    assert isinstance(data, bytes | bytearray | memoryview), type(data)
    out: list[Plain] = []
    for header, raw in iter_batches(memoryview(bytes(data))):
        _, records = decode_batch(raw)
        out.append({
            "base_offset": header.base_offset,
            "partition_leader_epoch": header.partition_leader_epoch,
            "attributes": header.attributes,
            "last_offset_delta": header.last_offset_delta,
            "base_timestamp": header.base_timestamp,
            "max_timestamp": header.max_timestamp,
            "producer_id": header.producer_id,
            "producer_epoch": header.producer_epoch,
            "base_sequence": header.base_sequence,
            "records": [
                {"key": r.key, "value": r.value, "headers": list(r.headers),
                 "timestamp": r.timestamp}
                for r in records
            ],
        })  # fmt: skip
    return out


def normalise(side: Side, normaliser: Normaliser, response: Message | None) -> Plain:
    if response is None:
        return None
    return {"_type": type(response).__name__, **normaliser(response)}


# ---------------------------------------------------------------- comparison


@dataclass(frozen=True)
class Allowed:
    """A known, documented departure: APIs matching `api` may differ at `path` (both regexes;
    the path without list indexes) when `when(kafka_value, strom_value)` holds."""

    api: str
    path: str
    reason: str
    when: Callable[[Plain, Plain], bool] = lambda kafka, strom: True
    applies: Callable[[Op], bool] = lambda op: True
    """Which requests the departure concerns (by what they ask for)."""


@dataclass
class Difference:
    api: str
    version: int
    step: int
    path: str
    kafka: Plain
    strom: Plain

    @property
    def generic_path(self) -> str:
        return re.sub(r"\[\d+\]", "", self.path)

    def __str__(self) -> str:
        return (
            f"step {self.step} {self.api} v{self.version} {self.path}: "
            f"kafka={self.kafka!r} strom={self.strom!r}"
        )


@dataclass
class Stats:
    """What the differential tests compared, summed over the session."""

    sequences: int = 0
    requests: int = 0
    fields: int = 0
    per_api: Counter[str] = field(default_factory=Counter)
    allowed: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        apis = ", ".join(f"{api} {n}" for api, n in sorted(self.per_api.items()))
        lines = [
            f"differential: {self.sequences} sequences, {self.requests} requests, "
            f"{self.fields} fields compared against Apache Kafka",
            f"differential: requests per API: {apis}",
        ]
        for reason, n in sorted(self.allowed.items()):
            lines.append(f"differential: allowed difference ({n}x): {reason}")
            lines.append(f"differential:     e.g. {self.examples[reason]}")
        return "\n".join(lines)


STATS = Stats()


def compare(kafka: Plain, strom: Plain, path: str = "") -> tuple[int, list[tuple[str, Plain, Plain]]]:
    """(leaves compared, differences) between two normalised responses."""
    if isinstance(kafka, dict) and isinstance(strom, dict):
        count, diffs = 0, []
        for key in kafka.keys() | strom.keys():
            n, d = compare(kafka.get(key, "<absent>"), strom.get(key, "<absent>"), f"{path}.{key}")
            count += n
            diffs += d
        return count, diffs
    if isinstance(kafka, list) and isinstance(strom, list):
        if len(kafka) != len(strom):
            return 1, [(path, kafka, strom)]
        count, diffs = 0, []
        for i, (k, s) in enumerate(zip(kafka, strom, strict=True)):
            n, d = compare(k, s, f"{path}[{i}]")
            count += n
            diffs += d
        return count, diffs
    return 1, ([] if kafka == strom else [(path, kafka, strom)])


async def run_sequence(
    ops: Sequence[Op], sides: tuple[Side, Side], ctx: Context
) -> tuple[list[Plain], list[Plain]]:
    results: list[list[Plain]] = []
    for side in sides:
        normaliser = Normaliser(side)
        out: list[Plain] = []
        for step, op in enumerate(ops):
            with trio.move_on_after(REQUEST_TIMEOUT) as scope:
                response = await op.run(side, ctx)
            if scope.cancelled_caught:
                raise AssertionError(f"{side.name}: step {step} {op} got no answer within "
                                     f"{REQUEST_TIMEOUT}s")
            out.append(normalise(side, normaliser, response))
        results.append(out)
    return results[0], results[1]


def check(
    ops: Sequence[Op],
    kafka: list[Plain],
    strom: list[Plain],
    allowed: Sequence[Allowed],
    used: set[Allowed] | None = None,
) -> list[Difference]:
    """Compare step by step; count into STATS; return the differences nothing allows
    (and add the rules that allowed one to `used`)."""
    STATS.sequences += 1
    failures: list[Difference] = []
    for step, (op, k, s) in enumerate(zip(ops, kafka, strom, strict=True)):
        STATS.requests += 1
        STATS.per_api[op.api] += 1
        count, diffs = compare(k, s)
        STATS.fields += count
        for path, kv, sv in diffs:
            diff = Difference(op.api, op.version, step, path, kv, sv)
            rule = next(
                (a for a in allowed
                 if re.fullmatch(a.api, op.api) and re.fullmatch(a.path, diff.generic_path)
                 and a.applies(op) and a.when(kv, sv)),
                None,
            )  # fmt: skip
            if rule is None:
                failures.append(diff)
            else:
                key = f"{op.api} {rule.path}: {rule.reason}"
                if used is not None:
                    used.add(rule)
                STATS.allowed[key] += 1
                STATS.examples.setdefault(key, str(diff)[:300])
    return failures
