"""Client quotas: Kafka's entity precedence, the windowed rate and throttle, the controller
mutation token bucket, the event-loop time of a task, and on a broker: AlterClientQuotas (what
it refuses), DescribeClientQuotas, a producer over its byte rate told to wait (throttle_time_ms)
while one under it is not, a client over its request_percentage throttled and muted, and
topic creations, deletions and partition growth over controller_mutation_rate refused or
throttled as Kafka does by request version."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio

from strom.broker.network.loop_time import LoopTime
from strom.broker.security.quotas import (
    FETCH,
    MAX_REQUEST_THROTTLE_MS,
    MUTATION,
    PRODUCE,
    REQUEST,
    SWEEP_EVERY_S,
    ClientQuotas,
    Rate,
    quota_for,
)
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import open_broker
from strom.coordinator.metadata.image import QuotaEntity
from strom.wire.errors import ErrorCode
from strom.wire.messages.alter_client_quotas import (
    AlterClientQuotasRequest as Alter,
)
from strom.wire.messages.alter_client_quotas import AlterClientQuotasResponse
from strom.wire.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from strom.wire.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from strom.wire.messages.describe_client_quotas import (
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from strom.wire.messages.fetch import FetchResponse
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse
from strom.wire.messages.produce import ProduceRequest, ProduceResponse
from tests.broker.test_create_topics import create, topic
from tests.broker.test_produce_helpers import batch, fetch_request, produce, records_of

QUOTAS: dict[QuotaEntity, dict[str, float]] = {
    (("client-id", None), ("user", "alice")): {PRODUCE: 100.0},
    (("user", "alice"),): {PRODUCE: 200.0, FETCH: 300.0},
    (("user", None),): {PRODUCE: 400.0},
    (("client-id", "batch"),): {FETCH: 500.0},
}


def test_kafkas_precedence() -> None:
    assert quota_for(QUOTAS, PRODUCE, "alice", "app") == (100.0, ("alice", "app"))
    assert quota_for(QUOTAS, FETCH, "alice", "app") == (300.0, ("alice", ""))
    assert quota_for(QUOTAS, PRODUCE, "bob", "app") == (400.0, ("bob", ""))
    assert quota_for(QUOTAS, FETCH, "bob", "batch") == (500.0, ("", "batch"))
    assert quota_for(QUOTAS, FETCH, "bob", "app") is None


def test_the_rate_and_the_throttle() -> None:
    now = [0.0]
    quotas = ClientQuotas(lambda: now[0])
    limits: dict[QuotaEntity, dict[str, float]] = {(("user", "alice"),): {PRODUCE: 1000.0}}
    assert quotas.record(limits, PRODUCE, "alice", "a", 5000) == 0  # 5000 / 10 s window
    assert quotas.record(limits, PRODUCE, "alice", "a", 10000) == 5000  # 1500/s: 50% over
    assert quotas.record(limits, PRODUCE, "bob", "a", 10**9) == 0  # no quota for bob
    assert quotas.record({}, PRODUCE, "alice", "a", 10**9) == 0
    rate = Rate()
    for second in range(30):
        rate.record(100, float(second))
    assert rate.rate(29.0) == pytest.approx(110.0, rel=0.01)  # the last 11 samples only


@pytest.mark.trio
async def test_quotas_on_a_broker(tmp_path: Path) -> None:
    async with open_broker(tmp_path / "data") as broker:
        client = await KafkaClient.connect(broker.bootstrap)

        async def alter(entity: list[tuple[str, str | None]], key: str, value: float) -> tuple[int, str | None]:
            request = Alter(entries=[Alter.EntryData(
                [Alter.EntityData(t, n) for t, n in entity], [Alter.OpData(key, value, False)])])  # fmt: skip
            entry = (await client.request(request, 1, AlterClientQuotasResponse)).entries[0]
            return entry.error_code, entry.error_message

        assert await alter([("ip", "1.2.3.4")], "connection_creation_rate", 5) == (0, None)
        assert (await alter([("user", "x")], PRODUCE, 10.5))[0] == ErrorCode.INVALID_REQUEST
        assert await alter([("user", "x")], REQUEST, 12.5) == (0, None)
        assert await alter([("user", "x")], MUTATION, 0.5) == (0, None)
        assert (await alter([("ip", "1.2.3.4"), ("user", "x")], PRODUCE, 1))[0] == ErrorCode.INVALID_REQUEST
        assert (await alter([("user", "x")], PRODUCE, -5))[0] == ErrorCode.INVALID_REQUEST
        assert (await alter([("user", "x")], "no_such_quota", 5))[0] == ErrorCode.INVALID_REQUEST
        assert await alter([("client-id", "slow")], PRODUCE, 1024) == (0, None)
        described = await client.request(
            DescribeClientQuotasRequest(components=[DescribeClientQuotasRequest.ComponentData(
                "client-id", 0, "slow")], strict=True), 1, DescribeClientQuotasResponse)  # fmt: skip
        assert described.entries is not None
        assert [[(v.key, v.value) for v in e.values] for e in described.entries] == [[(PRODUCE, 1024.0)]]
        [created] = await create(client, topic("q"))
        assert created.error_code == 0
        await client.aclose()

        async def produce(client_id: str) -> int:
            producer = await KafkaClient.connect(broker.bootstrap, client_id=client_id)
            total = 0
            for _ in range(1):  # one: the next would wait out the throttle (the connection is muted)
                request = ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
                    ProduceRequest.TopicProduceData("q", [ProduceRequest.PartitionProduceData(
                        0, batch([b"x" * 20000]))])])  # fmt: skip
                response = await producer.request(request, 9, ProduceResponse)
                assert response.responses[0].partition_responses[0].error_code == 0
                total += response.throttle_time_ms
            await producer.aclose()
            return total

        assert await produce("slow") > 0  # 20 KB in a 10 s window at 1 KiB/s: told to wait
        assert await produce("fast") == 0  # no quota for this client


def test_request_time_throttle_is_bounded_by_one_sample() -> None:
    now = [0.0]
    quotas = ClientQuotas(lambda: now[0])
    limits: dict[QuotaEntity, dict[str, float]] = {(("client-id", None),): {REQUEST: 10.0}}
    # 50 ms of loop time is 5 percent-seconds: 0.5 % over the 10 s window, under 10 %
    assert quotas.record(limits, REQUEST, "u", "app", 5.0) == 0
    # 20 s of loop time in the window would be a 19 s throttle; Kafka bounds it by one sample
    assert quotas.record(limits, REQUEST, "u", "app", 2000.0) == MAX_REQUEST_THROTTLE_MS
    # 10.5 % observed against 10 %: 5 % over, 5 % of the 10 s window
    quotas = ClientQuotas(lambda: now[0])
    assert quotas.record(limits, REQUEST, "u", "app", 105.0) == 500


def test_idle_measurements_are_dropped() -> None:
    """Any number of client ids under a default quota costs bounded memory."""
    now = [0.0]
    quotas = ClientQuotas(lambda: now[0])
    limits: dict[QuotaEntity, dict[str, float]] = {
        (("client-id", None),): {PRODUCE: 1e9, MUTATION: 10.0}
    }
    for second in range(600):
        now[0] = float(second)
        quotas.record(limits, PRODUCE, "", f"client-{second}", 100)
        quotas.mutation(limits, "", f"client-{second}", strict=True)
    assert len(quotas) <= 2 * (SWEEP_EVERY_S + 12)


def test_controller_mutation_quota_strict_and_permissive() -> None:
    """Kafka's TokenBucket: starts full with rate x 11 s of tokens; strict refuses once it is
    empty (the mutation that empties it passes), permissive never refuses and throttles."""
    now = [100.0]
    quotas = ClientQuotas(lambda: now[0])
    limits: dict[QuotaEntity, dict[str, float]] = {(("user", "alice"),): {MUTATION: 2.0}}
    assert quotas.mutation(limits, "bob", "app", strict=True) is None
    strict = quotas.mutation(limits, "alice", "app", strict=True)
    assert strict is not None
    assert strict.admit(20)  # 22 -> 2 tokens
    assert strict.admit(10)  # 2 -> -8: allowed, the bucket was not empty
    assert strict.throttle_ms == 0
    assert not strict.admit(1)  # empty: refused, 8 tokens short at 2/s
    assert strict.throttle_ms == 4000
    now[0] += 1.0
    assert strict.throttle_ms == 3000  # what is left of it, as Kafka deducts
    permissive = quotas.mutation(limits, "alice", "other", strict=False)
    assert permissive is not None
    assert permissive.admit(5)  # -6 -> -11: accepted, throttled
    assert permissive.throttle_ms == 5500
    permissive.settle(5)  # the mutation failed: given back, -6 left
    assert permissive.throttle_ms == 3000
    now[0] += 3.0  # refilled to 0
    again = quotas.mutation(limits, "alice", "app", strict=True)
    assert again is not None
    assert again.admit(1)


@pytest.mark.trio
async def test_loop_time_counts_a_tasks_steps_not_its_waits() -> None:
    loop_time = LoopTime()
    loop_time.enable()
    try:
        busy: dict[str, float] = {}

        async def worker(name: str, spin_s: float, wait_s: float) -> None:
            loop_time.take()
            for _ in range(3):
                end = time.perf_counter() + spin_s
                while time.perf_counter() < end:
                    pass
                await trio.sleep(wait_s)
            busy[name] = loop_time.take()

        # Waits far longer than the spins, so that a process descheduled mid-step on a loaded
        # machine (which adds wall time to the step) cannot pass for a counted wait.
        async with trio.open_nursery() as nursery:
            nursery.start_soon(worker, "spinner", 0.02, 0.2)
            nursery.start_soon(worker, "sleeper", 0.0, 0.2)
        assert 0.06 <= busy["spinner"] < 0.06 + 0.3  # its three 20 ms spins, not its 600 ms asleep
        assert busy["sleeper"] < 0.3  # 600 ms asleep costs (next to) no loop time
    finally:
        loop_time.disable()


@pytest.mark.trio
async def test_request_percentage_on_a_broker(tmp_path: Path) -> None:
    """A client id with a tiny request_percentage is throttled by at most one sample (1 s) and
    muted for that long; another client id is not."""
    async with open_broker(tmp_path / "data") as broker:
        admin = await KafkaClient.connect(broker.bootstrap)
        request = Alter(entries=[Alter.EntryData(
            [Alter.EntityData("client-id", "busy")], [Alter.OpData(REQUEST, 0.0001, False)])])  # fmt: skip
        assert (await admin.request(request, 1, AlterClientQuotasResponse)).entries[0].error_code == 0
        await admin.aclose()

        busy = await KafkaClient.connect(broker.bootstrap, client_id="busy")
        idle = await KafkaClient.connect(broker.bootstrap, client_id="idle")
        assert (await idle.request(MetadataRequest(topics=None), 12, MetadataResponse)).throttle_time_ms == 0
        throttle = 0
        for _ in range(20):  # 0.0001 % of the 10 s window is 10 us of loop time: soon spent
            throttle = (await busy.request(MetadataRequest(topics=None), 12, MetadataResponse)).throttle_time_ms
            if throttle:
                break
        assert 0 < throttle <= MAX_REQUEST_THROTTLE_MS
        started = trio.current_time()
        await busy.request(MetadataRequest(topics=None), 12, MetadataResponse)
        assert trio.current_time() - started >= throttle / 1000 - 0.05  # muted meanwhile
        assert (await idle.request(MetadataRequest(topics=None), 12, MetadataResponse)).throttle_time_ms == 0
        await busy.aclose()
        await idle.aclose()


@pytest.mark.trio
async def test_controller_mutation_rate_on_a_broker(tmp_path: Path) -> None:
    """controller_mutation_rate=1 for a client id: 11 partitions' worth of tokens. New versions
    of CreateTopics, CreatePartitions and DeleteTopics refuse topics once the bucket is empty
    (THROTTLING_QUOTA_EXCEEDED with the time to refill); an old CreateTopics is throttled."""
    async with open_broker(tmp_path / "data") as broker:
        admin = await KafkaClient.connect(broker.bootstrap)
        request = Alter(entries=[Alter.EntryData(
            [Alter.EntityData("client-id", "mutator")], [Alter.OpData(MUTATION, 1.0, False)])])  # fmt: skip
        assert (await admin.request(request, 1, AlterClientQuotasResponse)).entries[0].error_code == 0
        [other] = await create(admin, topic("unlimited", 40))  # no quota for this client id
        assert other.error_code == 0

        async def connect() -> KafkaClient:  # a throttled connection is muted: a fresh one
            return await KafkaClient.connect(broker.bootstrap, client_id="mutator")

        client = await connect()
        bad = topic("bad name!", 30)  # fails: its partitions are given back
        results = await create(client, topic("a", 8), bad, topic("b", 5), topic("c", 1))
        codes = {r.name: (r.error_code, r.error_message) for r in results}
        assert codes["a"] == codes["b"] == (0, None)  # 11 -> 3 -> -2: b empties the bucket
        assert codes["bad name!"][0] == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert codes["c"] == (ErrorCode.THROTTLING_QUOTA_EXCEEDED, "The throttling quota has been exceeded.")
        await client.aclose()

        client = await connect()
        response = await client.request(
            CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic("a", 9)],
                                    timeout_ms=30_000), 3, CreatePartitionsResponse)  # fmt: skip
        assert [r.error_code for r in response.results] == [ErrorCode.THROTTLING_QUOTA_EXCEEDED]
        assert 0 < response.throttle_time_ms <= 2000
        await client.aclose()

        client = await connect()  # v5: permissive, so created and throttled
        old = await client.request(
            CreateTopicsRequest(
                topics=[topic("d", 3)], timeout_ms=30_000), 5, CreateTopicsResponse)
        assert [r.error_code for r in old.topics] == [0]
        assert old.throttle_time_ms > 2000
        await client.aclose()

        client = await connect()
        deleted = await client.request(
            DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name="a")], timeout_ms=30_000),
            6, DeleteTopicsResponse)  # fmt: skip
        assert [r.error_code for r in deleted.responses] == [ErrorCode.THROTTLING_QUOTA_EXCEEDED]
        await client.aclose()
        assert [r.error_code for r in (await admin.request(
            DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name="a")], timeout_ms=30_000),
            6, DeleteTopicsResponse)).responses] == [0]  # fmt: skip
        await admin.aclose()


@pytest.mark.trio
async def test_acks_0_produce_counts_against_the_byte_rate(tmp_path: Path) -> None:
    """No response to carry throttle_time_ms: the connection is muted all the same, as Kafka
    mutes it for a bandwidth violation of an acks=0 producer."""
    async with open_broker(tmp_path / "data") as broker:
        admin = await KafkaClient.connect(broker.bootstrap)
        request = Alter(entries=[Alter.EntryData(
            [Alter.EntityData("client-id", "fire")], [Alter.OpData(PRODUCE, 1900, False)])])  # fmt: skip
        assert (await admin.request(request, 1, AlterClientQuotasResponse)).entries[0].error_code == 0
        [created] = await create(admin, topic("q0"))
        assert created.error_code == 0
        await admin.aclose()
        producer = await KafkaClient.connect(broker.bootstrap, client_id="fire")
        produce = ProduceRequest(acks=0, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData("q0", [ProduceRequest.PartitionProduceData(
                0, batch([b"x" * 20000]))])])  # fmt: skip
        await producer.stream.send_all(producer.conn.send_request(produce, 9, expect_response=False))
        started = trio.current_time()
        await producer.request(MetadataRequest(topics=None), 12, MetadataResponse)
        # ~2,010 B/s against 1,900 over the 10 s window: about 0.58 s muted
        assert trio.current_time() - started >= 0.4
        await producer.aclose()


@pytest.mark.trio
async def test_a_throttled_fetch_carries_no_records(tmp_path: Path) -> None:
    """consumer_byte_rate as Kafka's KafkaApis applies it: a fetch reads at most the quota's
    window (1000 B/s x 10 s), one that would go over the rate is answered with no partitions,
    throttle_time_ms and no session, and its bytes are not counted (a small fetch right after
    is not throttled)."""
    async with open_broker(tmp_path / "data") as broker:
        admin = await KafkaClient.connect(broker.bootstrap)
        request = Alter(entries=[Alter.EntryData(
            [Alter.EntityData("client-id", None)], [Alter.OpData(FETCH, 1000, False)])])  # fmt: skip
        assert (await admin.request(request, 1, AlterClientQuotasResponse)).entries[0].error_code == 0
        [created] = await create(admin, topic("fq"))
        assert created.error_code == 0
        for value in (b"a" * 6000, b"b" * 6000, b"c" * 100):  # offsets 0, 1, 2
            assert (await produce(admin, "fq", batch([value]))).error_code == 0
        await admin.aclose()

        async def fetch(client_id: str, offset: int, partition_max_bytes: int) -> FetchResponse:
            reader = await KafkaClient.connect(broker.bootstrap, client_id=client_id)
            fetch = fetch_request("fq", offset, partition_max_bytes=partition_max_bytes)
            fetch.session_epoch = 0  # a full fetch, which would create a session
            response = await reader.request(fetch, 12, FetchResponse)
            await reader.aclose()  # a throttled connection is muted: a fresh one each time
            return response

        def offsets(response: FetchResponse) -> list[int]:
            return [o for t in response.responses for p in t.partitions for o, _ in records_of(p.records)]

        first = await fetch("reader", 0, 7000)  # 6 KB in the 10 s window: 600 B/s
        assert (offsets(first), first.throttle_time_ms) == ([0], 0)
        assert first.session_id != 0
        over = await fetch("reader", 1, 7000)  # 6 KB more would be 1200 B/s
        assert over.responses == []
        assert over.session_id == 0
        assert 1500 < over.throttle_time_ms <= 2500  # (1200 - 1000) / 1000 x 10 s
        small = await fetch("reader", 2, 7000)  # the throttled fetch's 6 KB were not counted
        assert (offsets(small), small.throttle_time_ms) == ([2], 0)
        capped = await fetch("capped", 0, 1024 * 1024)  # 10 KB at most: the window's worth
        assert (offsets(capped), capped.throttle_time_ms) == ([0], 0)
