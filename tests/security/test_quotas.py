"""Client quotas: Kafka's entity precedence, the windowed rate and throttle, and on a broker:
AlterClientQuotas (what it refuses), DescribeClientQuotas, and a producer over its byte rate
told to wait (throttle_time_ms) while one under it is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from strom.broker.security.quotas import FETCH, PRODUCE, ClientQuotas, Rate, quota_for
from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import open_broker
from strom.coordinator.metadata.image import QuotaEntity
from strom.wire.errors import ErrorCode
from strom.wire.messages.alter_client_quotas import (
    AlterClientQuotasRequest as Alter,
)
from strom.wire.messages.alter_client_quotas import AlterClientQuotasResponse
from strom.wire.messages.describe_client_quotas import (
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from strom.wire.messages.produce import ProduceRequest, ProduceResponse
from tests.broker.test_create_topics import create, topic
from tests.broker.test_produce_helpers import batch

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

        assert (await alter([("user", "x")], "request_percentage", 50))[0] == ErrorCode.INVALID_REQUEST
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
