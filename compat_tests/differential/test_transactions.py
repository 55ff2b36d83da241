"""The transaction APIs, Strom against Apache Kafka 4.1.1, step by step.

Each scenario is a script of raw requests (InitProducerId, AddPartitionsToTxn, Produce,
AddOffsetsToTxn, TxnOffsetCommit, EndTxn, DescribeTransactions, ListTransactions, a
read_committed Fetch) run on both brokers under names of its own; every answer is reduced to
what must agree (error codes, epochs, states, partitions, offsets, the last stable offset and
the aborted transactions, producer ids renamed in order of appearance since each broker
allocates its own, the group's `__consumer_offsets` partition unnamed since the two brokers
have different numbers of them) and the two transcripts must be equal, step by step:

- commits and aborts, with transactions v1 (AddPartitionsToTxn v3, Produce v11, EndTxn v4) and
  v2 (KIP-890: Produce v12 adds the partition, EndTxn v5 bumps the epoch);
- fencing: a second InitProducerId while a transaction is open answers CONCURRENT_TRANSACTIONS
  (it aborts that transaction; the client retries), then the old epoch is fenced everywhere:
  AddPartitionsToTxn, Produce, EndTxn, TxnOffsetCommit;
- timeouts: an over-long transaction timeout is refused, a transaction left open past its
  timeout is aborted by the coordinator and its producer is fenced;
- INVALID_TXN_STATE and other bad input: EndTxn with no transaction open, a transactional
  Produce to a partition never added, unknown topics, a producer id the id does not map to,
  TxnOffsetCommit for a group in another generation or from an unknown member;
- ListTransactions v2's pattern, and a pattern that does not compile;
- WriteTxnMarkers for producers a partition never saw, from an older coordinator epoch, and
  for unknown partitions.

Waiting is by polling what both brokers expose (DescribeTransactions until the previous
transaction completed, Fetch until the last stable offset reaches the high watermark): Kafka
writes the markers after answering EndTxn, so a script that did not wait would compare timing.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from compat_tests.differential.conftest import Pair
from strom.broker.testing.client import KafkaClient
from strom.wire.errors import ErrorCode
from strom.wire.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from strom.wire.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)
from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from strom.wire.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)
from strom.wire.messages.end_txn import EndTxnRequest, EndTxnResponse
from strom.wire.messages.fetch import FetchRequest, FetchResponse
from strom.wire.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from strom.wire.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from strom.wire.messages.join_group import JoinGroupRequest, JoinGroupResponse
from strom.wire.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from strom.wire.messages.list_transactions import (
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse
from strom.wire.messages.produce import ProduceRequest, ProduceResponse
from strom.wire.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from strom.wire.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from strom.wire.messages.write_txn_markers import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from strom.wire.records import Record, build_batch, iter_batches

Step = tuple[Any, ...]
_LOADING = (
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
)  # fmt: skip
"""Retried by every client, and by these scripts: a coordinator still loading after start."""
_runs = itertools.count()


class Script:
    """One scenario's run on one broker: its client, its names, and the transcript."""

    def __init__(self, client: KafkaClient, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        self.transcript: list[Step] = []
        self._pids: dict[int, int] = {}
        self.members: dict[str, tuple[str, int]] = {}

    def name(self, short: str) -> str:
        return f"{self.prefix}{short}"

    def pid(self, producer_id: int) -> int | str:
        """A producer id renamed in order of appearance (-1 stays -1)."""
        if producer_id < 0:
            return producer_id
        return f"pid{self._pids.setdefault(producer_id, len(self._pids))}"

    def note(self, *step: Any) -> None:
        self.transcript.append(step)

    # --- setup, not compared beyond success ---------------------------------------------------

    async def topic(self, short: str, partitions: int = 1) -> None:
        topic = CreateTopicsRequest.CreatableTopic(
            name=self.name(short), num_partitions=partitions, replication_factor=1
        )
        created = await self.client.request(
            CreateTopicsRequest(topics=[topic], timeout_ms=30_000), 7, CreateTopicsResponse
        )
        assert created.topics[0].error_code == ErrorCode.NONE, created
        for _ in range(300):
            metadata = await self.client.request(
                MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=self.name(short))]),
                12, MetadataResponse,
            )  # fmt: skip
            parts = metadata.topics[0].partitions
            led = len(parts) == partitions and all(p.leader_id >= 0 for p in parts)
            if led and await self._serving(short, partitions):
                return
            await trio.sleep(0.05)
        raise AssertionError(f"topic {short} has no leaders")

    async def _serving(self, short: str, partitions: int) -> bool:
        """Every partition answers ListOffsets (Kafka's Metadata names a leader a moment
        before the partition serves: a Produce then is NOT_LEADER_OR_FOLLOWER)."""
        request = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
            self.name(short),
            [ListOffsetsRequest.ListOffsetsPartition(p, -1, -1) for p in range(partitions)],
        )])  # fmt: skip
        listed = await self.client.request(request, 7, ListOffsetsResponse)
        return all(p.error_code == ErrorCode.NONE for p in listed.topics[0].partitions)

    async def coordinator_ready(self, short: str, key_type: int = 1) -> None:
        """Until FindCoordinator answers (Kafka creates its internal topic on first ask)."""
        for _ in range(600):
            found = await self.client.request(
                FindCoordinatorRequest(key=self.name(short), key_type=key_type), 3,
                FindCoordinatorResponse,
            )  # fmt: skip
            if found.error_code == ErrorCode.NONE and (key_type == 0 or await self._loaded(short)):
                return
            await trio.sleep(0.05)
        raise AssertionError(f"no coordinator for {short}")

    async def _loaded(self, txn: str) -> bool:
        """The id's `__transaction_state` partition is loaded (Kafka answers FindCoordinator
        before that, then NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS for a while)."""
        error = (await self._describe(txn)).error_code
        return error in (ErrorCode.NONE, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)

    async def settle(self, txn: str) -> None:
        """Until the id's previous transaction completed (its markers are written)."""
        for _ in range(600):
            state = await self._describe(txn)
            if state.transaction_state not in ("PrepareCommit", "PrepareAbort", "PrepareEpochFence"):
                return
            await trio.sleep(0.05)
        raise AssertionError(f"{txn}'s transaction did not complete")

    async def join(self, group: str) -> None:
        """One member in `group`, generation known (JoinGroup v9 twice: member id, then join)."""
        protocol = JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")
        request = JoinGroupRequest(
            group_id=self.name(group), session_timeout_ms=30_000, rebalance_timeout_ms=30_000,
            member_id="", protocol_type="consumer", protocols=[protocol],
        )  # fmt: skip
        joined = await self.client.request(request, 9, JoinGroupResponse)
        if joined.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            request.member_id = joined.member_id
            joined = await self.client.request(request, 9, JoinGroupResponse)
        assert joined.error_code == ErrorCode.NONE, joined
        synced = await self.client.request(
            SyncGroupRequest(
                group_id=self.name(group), generation_id=joined.generation_id,
                member_id=joined.member_id, protocol_type="consumer", protocol_name="range",
                assignments=[],
            ), 5, SyncGroupResponse,
        )  # fmt: skip
        assert synced.error_code == ErrorCode.NONE, synced
        self.members[group] = (joined.member_id, joined.generation_id)

    # --- the compared steps ---------------------------------------------------------------------

    async def init(
        self, txn: str, timeout_ms: int = 60_000, version: int = 5, retry: bool = True
    ) -> tuple[int, int]:
        """InitProducerId; with `retry`, until it is not CONCURRENT_TRANSACTIONS (as clients
        do), noting whether it was."""
        request = InitProducerIdRequest(transactional_id=self.name(txn), transaction_timeout_ms=timeout_ms)
        concurrent = False
        for _ in range(600):
            response = await self.client.request(request, version, InitProducerIdResponse)
            if response.error_code in _LOADING:
                await trio.sleep(0.05)  # a client's retry, whatever `retry` says
                continue
            if not retry or response.error_code != ErrorCode.CONCURRENT_TRANSACTIONS:
                break
            concurrent = True
            await trio.sleep(0.05)
        self.note(
            "init", txn, ErrorCode(response.error_code).name, concurrent,
            self.pid(response.producer_id), response.producer_epoch,
        )  # fmt: skip
        return response.producer_id, response.producer_epoch

    async def add(self, txn: str, pid: int, epoch: int, *parts: tuple[str, int], version: int = 3) -> None:
        topics: dict[str, list[int]] = {}
        for short, p in parts:
            topics.setdefault(self.name(short), []).append(p)
        request = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.name(txn),
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[
                AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(t, ps) for t, ps in topics.items()
            ],
        )
        response = await self.client.request(request, version, AddPartitionsToTxnResponse)
        self.note("add", txn, sorted(
            (t.name.removeprefix(self.prefix), p.partition_index,
             ErrorCode(p.partition_error_code).name)
            for t in response.results_by_topic_v3_and_below for p in t.results_by_partition
        ))  # fmt: skip

    async def produce(
        self, txn: str | None, topic: str, pid: int, epoch: int, seq: int, n: int = 2,
        version: int = 11, transactional: bool = True,
    ) -> None:  # fmt: skip
        records = [Record(b"k", b"v%d" % (seq + i), (), 1_700_000_000_000 + i) for i in range(n)]
        data = build_batch(
            records, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
            transactional=transactional,
        )  # fmt: skip
        request = ProduceRequest(
            transactional_id=self.name(txn) if txn else None, acks=-1, timeout_ms=10_000,
            topic_data=[ProduceRequest.TopicProduceData(
                name=self.name(topic),
                partition_data=[ProduceRequest.PartitionProduceData(index=0, records=bytes(data))],
            )],
        )  # fmt: skip
        response = await self.client.request(request, version, ProduceResponse)
        part = response.responses[0].partition_responses[0]
        error = ErrorCode(part.error_code)
        self.note("produce", txn, topic, epoch, error.name, part.base_offset if not error else None)

    async def end(self, txn: str, pid: int, epoch: int, commit: bool, version: int = 4) -> tuple[int, int]:
        request = EndTxnRequest(
            transactional_id=self.name(txn), producer_id=pid, producer_epoch=epoch, committed=commit
        )
        response = await self.client.request(request, version, EndTxnResponse)
        self.note(
            "end", txn, "commit" if commit else "abort", epoch, ErrorCode(response.error_code).name,
            self.pid(response.producer_id) if version >= 5 else None,
            response.producer_epoch if version >= 5 else None,
        )  # fmt: skip
        return response.producer_id, response.producer_epoch

    async def add_offsets(self, txn: str, pid: int, epoch: int, group: str) -> None:
        request = AddOffsetsToTxnRequest(
            transactional_id=self.name(txn), producer_id=pid, producer_epoch=epoch,
            group_id=self.name(group),
        )  # fmt: skip
        response = await self.client.request(request, 3, AddOffsetsToTxnResponse)
        self.note("add_offsets", txn, group, epoch, ErrorCode(response.error_code).name)

    async def txn_offset_commit(
        self, txn: str, pid: int, epoch: int, group: str, topic: str, offset: int,
        generation_delta: int = 0, member: str | None = None, version: int = 3,
    ) -> None:  # fmt: skip
        member_id, generation = self.members.get(group, ("", -1))
        request = TxnOffsetCommitRequest(
            transactional_id=self.name(txn), group_id=self.name(group), producer_id=pid,
            producer_epoch=epoch, generation_id=generation + generation_delta,
            member_id=member if member is not None else member_id,
            topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(
                name=self.name(topic),
                partitions=[TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                    committed_metadata="",
                )],
            )],
        )  # fmt: skip
        response = await self.client.request(request, version, TxnOffsetCommitResponse)
        self.note("txn_offset_commit", txn, group, epoch, generation_delta, member, [
            ErrorCode(p.error_code).name for t in response.topics for p in t.partitions
        ])  # fmt: skip

    async def _describe(self, txn: str) -> DescribeTransactionsResponse.TransactionState:
        response = await self.client.request(
            DescribeTransactionsRequest(transactional_ids=[self.name(txn)]), 0,
            DescribeTransactionsResponse,
        )  # fmt: skip
        return response.transaction_states[0]

    async def describe(self, txn: str) -> None:
        state = await self._describe(txn)
        self.note(
            "describe", txn, ErrorCode(state.error_code).name, state.transaction_state,
            self.pid(state.producer_id), state.producer_epoch, state.transaction_timeout_ms,
            sorted(
                (t.topic.removeprefix(self.prefix), sorted(t.partitions))
                if t.topic != "__consumer_offsets" else (t.topic, ["the group's"])
                for t in state.topics
            ),
        )  # fmt: skip

    async def read_committed(self, topic: str) -> None:
        """read_committed Fetches as a consumer makes them, from offset 0 to the end, once the
        last stable offset reached the high watermark: each answer's batches and aborted
        transactions."""

        async def fetch(offset: int) -> FetchResponse.PartitionData:
            request = FetchRequest(
                max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=1,
                topics=[FetchRequest.FetchTopic(topic=self.name(topic), partitions=[
                    FetchRequest.FetchPartition(
                        partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
                    )
                ])],
            )  # fmt: skip
            response = await self.client.request(request, 12, FetchResponse)
            part: FetchResponse.PartitionData = response.responses[0].partitions[0]
            return part

        for _ in range(600):  # a reference broker under load may answer a retriable error
            part = await fetch(0)
            if part.error_code == ErrorCode.NONE and part.last_stable_offset == part.high_watermark:
                break
            await trio.sleep(0.05)
        waited = ErrorCode(part.error_code).name
        answers: list[Step] = []
        offset = 0
        while offset < part.high_watermark and len(answers) < 20:
            part = await fetch(offset)
            batches = [
                (h.base_offset, h.last_offset_delta, h.is_control, h.is_transactional,
                 self.pid(h.producer_id))
                for h, _ in iter_batches(bytes(part.records or b""), allow_partial=True)
            ]  # fmt: skip
            aborted = sorted(
                (self.pid(a.producer_id), a.first_offset) for a in part.aborted_transactions or []
            )
            answers.append((offset, ErrorCode(part.error_code).name, aborted, batches))
            if not batches:
                break
            offset = batches[-1][0] + batches[-1][1] + 1
        self.note(
            "read_committed", topic, waited, part.high_watermark, part.last_stable_offset, answers
        )

    async def marker(
        self, pid: int, epoch: int, commit: bool, coordinator_epoch: int, *parts: tuple[str, int]
    ) -> None:
        """WriteTxnMarkers (v1, as a coordinator sends it) for a producer of our choosing."""
        topics: dict[str, list[int]] = {}
        for short, p in parts:
            topics.setdefault(self.name(short), []).append(p)
        Marker = WriteTxnMarkersRequest.WritableTxnMarker
        request = WriteTxnMarkersRequest(markers=[Marker(
            pid, epoch, commit,
            [WriteTxnMarkersRequest.WritableTxnMarkerTopic(t, ps) for t, ps in topics.items()],
            coordinator_epoch,
        )])  # fmt: skip
        response = await self.client.request(request, 1, WriteTxnMarkersResponse)
        self.note("marker", "commit" if commit else "abort", epoch, coordinator_epoch, sorted(
            (t.name.removeprefix(self.prefix), p.partition_index, ErrorCode(p.error_code).name)
            for m in response.markers for t in m.topics for p in t.partitions
        ))  # fmt: skip

    async def list_transactions(self, pattern: str | None, version: int = 2) -> None:
        response = await self.client.request(
            ListTransactionsRequest(transactional_id_pattern=pattern), version, ListTransactionsResponse
        )
        mine = sorted(
            (t.transactional_id.removeprefix(self.prefix), t.transaction_state)
            for t in response.transaction_states
            if t.transactional_id.startswith(self.prefix)
        )
        self.note("list", pattern, ErrorCode(response.error_code).name, mine)


Scenario = Callable[[Script], Awaitable[None]]


async def _transcript(bootstrap: str, scenario: Scenario, prefix: str) -> list[Step]:
    client = await KafkaClient.connect(bootstrap, client_id="differential-txn")
    try:
        script = Script(client, prefix)
        await scenario(script)
        return script.transcript
    finally:
        await client.aclose()


def _compare(pair: Pair, scenario: Scenario) -> None:
    run = f"dtx{next(_runs)}-{int(time.time()) % 100_000}-"
    kafka = trio.run(_transcript, pair.kafka.bootstrap, scenario, f"k{run}")
    strom = trio.run(_transcript, pair.strom.bootstrap, scenario, f"s{run}")
    differing = [
        f"step {i}: Kafka {k!r}\n{' ' * len(f'step {i}: ')}Strom {s!r}"
        for i, (k, s) in enumerate(itertools.zip_longest(kafka, strom))
        if k != s
    ]
    assert not differing, "transcripts differ:\n" + "\n".join(differing)


# --- the scenarios -------------------------------------------------------------------------------


async def commit_and_abort_v1(s: Script) -> None:
    await s.topic("t")
    await s.coordinator_ready("tx")
    pid, epoch = await s.init("tx", version=3)
    await s.add("tx", pid, epoch, ("t", 0))
    await s.describe("tx")
    await s.produce("tx", "t", pid, epoch, 0)
    await s.end("tx", pid, epoch, commit=True)
    await s.settle("tx")
    await s.describe("tx")
    await s.end("tx", pid, epoch, commit=True)  # a retried commit: answered NONE again
    await s.end("tx", pid, epoch, commit=False)  # the other outcome: INVALID_TXN_STATE
    await s.add("tx", pid, epoch, ("t", 0))
    await s.produce("tx", "t", pid, epoch, 2)
    await s.end("tx", pid, epoch, commit=False)
    await s.settle("tx")
    await s.describe("tx")
    await s.read_committed("t")
    await s.list_transactions(None)


async def commit_and_abort_v2(s: Script) -> None:
    """Transactions v2: Produce v12 adds the partition itself, EndTxn v5 bumps the epoch."""
    await s.topic("t")
    await s.coordinator_ready("tx")
    pid, epoch = await s.init("tx")
    await s.produce("tx", "t", pid, epoch, 0, version=12)
    await s.describe("tx")
    pid, epoch = await s.end("tx", pid, epoch, commit=True, version=5)
    await s.settle("tx")
    await s.produce("tx", "t", pid, epoch, 0, version=12)
    await s.produce("tx", "t", pid, epoch - 1, 2, version=12)  # the previous epoch: fenced
    pid, epoch = await s.end("tx", pid, epoch, commit=False, version=5)
    await s.settle("tx")
    await s.end("tx", pid, epoch - 1, commit=False, version=5)  # a retried abort (the old epoch)
    await s.end("tx", pid, epoch - 2, commit=True, version=5)  # older still: fenced
    await s.describe("tx")
    await s.read_committed("t")


async def fencing(s: Script) -> None:
    await s.topic("t")
    await s.topic("out")
    await s.coordinator_ready("tx")
    await s.coordinator_ready("g", key_type=0)
    await s.join("g")
    old_pid, old = await s.init("tx", version=3)
    await s.add("tx", old_pid, old, ("t", 0))
    await s.produce("tx", "t", old_pid, old, 0)
    await s.add_offsets("tx", old_pid, old, "g")
    await s.txn_offset_commit("tx", old_pid, old, "g", "out", 5)
    # a new producer with the same id: CONCURRENT_TRANSACTIONS while the open one is aborted
    pid, epoch = await s.init("tx", version=3)
    await s.settle("tx")
    await s.describe("tx")
    await s.add("tx", old_pid, old, ("t", 0))
    await s.produce("tx", "t", old_pid, old, 2)
    await s.add_offsets("tx", old_pid, old, "g")
    await s.txn_offset_commit("tx", old_pid, old, "g", "out", 6)
    await s.end("tx", old_pid, old, commit=True)
    await s.end("tx", old_pid, old, commit=True, version=5)
    # the new producer goes on
    await s.add("tx", pid, epoch, ("t", 0))
    await s.produce("tx", "t", pid, epoch, 0)
    await s.end("tx", pid, epoch, commit=True)
    await s.settle("tx")
    await s.read_committed("t")


async def invalid_state_and_bad_input(s: Script) -> None:
    await s.topic("t")
    await s.coordinator_ready("tx")
    await s.coordinator_ready("missing")
    await s.coordinator_ready("g", key_type=0)
    await s.init("tx", timeout_ms=900_001)  # past transaction.max.timeout.ms
    await s.init("tx", timeout_ms=0)
    pid, epoch = await s.init("tx", version=3)
    await s.end("tx", pid, epoch, commit=True)  # nothing open: INVALID_TXN_STATE
    await s.end("tx", pid, epoch, commit=False)
    await s.end("tx", pid + 1, epoch, commit=True)  # a producer id the id does not map to
    await s.end("missing", pid, epoch, commit=True)  # an id never initialized
    await s.add("missing", pid, epoch, ("t", 0))
    await s.add("tx", pid, epoch, ("t", 0), ("nope", 0), ("t", 7))
    await s.produce("tx", "t", pid, epoch, 0)  # never added: refused by verification
    await s.produce("tx", "t", pid, epoch + 1, 0)  # an epoch the coordinator never gave
    await s.add_offsets("tx", pid, epoch, "g")
    await s.describe("tx")
    await s.join("g")
    await s.txn_offset_commit("tx", pid, epoch, "g", "t", 1, generation_delta=1)
    await s.txn_offset_commit("tx", pid, epoch, "g", "t", 1, member="someone-else")
    await s.txn_offset_commit("tx", pid, epoch, "g", "t", 1)
    await s.end("tx", pid, epoch, commit=True)
    await s.settle("tx")
    await s.describe("tx")
    await s.list_transactions("tx")  # the whole id: the prefix keeps it from matching
    await s.list_transactions(".*tx")
    await s.list_transactions("")
    await s.list_transactions("(tx")
    await s.list_transactions("(?=tx).*")


async def timeout(s: Script) -> None:
    """Left open past its timeout, a transaction is aborted and its producer fenced."""
    await s.topic("t")
    await s.coordinator_ready("tx")
    pid, epoch = await s.init("tx", timeout_ms=1_000, version=3)
    await s.add("tx", pid, epoch, ("t", 0))
    await s.produce("tx", "t", pid, epoch, 0)
    for _ in range(600):  # the abort: up to the checker's interval (1 s here) past the timeout
        if (await s._describe("tx")).transaction_state == "CompleteAbort":
            break
        await trio.sleep(0.05)
    await s.describe("tx")
    await s.add("tx", pid, epoch, ("t", 0))
    await s.produce("tx", "t", pid, epoch, 2)
    await s.end("tx", pid, epoch, commit=True)
    await s.read_committed("t")
    pid, epoch = await s.init("tx", version=3)  # a new producer takes over
    await s.describe("tx")


async def markers(s: Script) -> None:
    """Markers as bad input: for producers the partition never saw, from an older coordinator
    epoch, for an unknown partition, twice for a producer with nothing open; and a
    transactional Produce for an id no coordinator knows (verification refuses it, retriable)."""
    await s.topic("t")
    unknown = 900_001
    await s.marker(unknown, 0, True, 0, ("t", 0))
    await s.marker(unknown + 1, 3, False, 5, ("t", 0))
    await s.marker(unknown + 1, 3, False, 4, ("t", 0))  # an older coordinator epoch
    await s.marker(unknown, 0, True, 0, ("nope", 0), ("t", 9))
    await s.produce("hanging", "t", unknown + 2, 0, 0, version=9)
    await s.marker(unknown + 2, 0, False, 0, ("t", 0))
    await s.marker(unknown + 2, 0, False, 0, ("t", 0))
    await s.read_committed("t")


def test_commits_and_aborts_v1(pair: Pair) -> None:
    _compare(pair, commit_and_abort_v1)


def test_commits_and_aborts_v2(pair: Pair) -> None:
    _compare(pair, commit_and_abort_v2)


def test_fencing_and_concurrent_transactions(pair: Pair) -> None:
    _compare(pair, fencing)


def test_invalid_state_and_bad_input(pair: Pair) -> None:
    _compare(pair, invalid_state_and_bad_input)


def test_timeouts(pair: Pair) -> None:
    _compare(pair, timeout)


def test_markers_as_bad_input(pair: Pair) -> None:
    _compare(pair, markers)
